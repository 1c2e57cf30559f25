"""ConViT's checkpoints as a family of their own for the weight loader (keras_vit.models.convit)."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.weights import resample_position_embedding
from tests.testing import set_random_weights, to_numpy

SIZES = dict(patch_size=8, hidden_size=32, num_layers=3, num_heads=4, mlp_dim=64, num_gpsa_layers=2, num_classes=10)


def _saved(tmp_path, model):
    path = tmp_path / f"{model.name}.keras"
    model.save(path)
    return path


def test_a_grid_of_another_size_is_resampled_as_a_vit_does_by_default(tmp_path):
    # Bilinear, as a ViT's (timm's loader), not the bicubic the ConViT builder resamples with per call.
    small = keras_vit.ConViT(image_size=32, **SIZES, name="small")
    set_random_weights(small, scale=0.3)
    large = keras_vit.ConViT(image_size=48, **SIZES, name="large")
    report = keras_vit.load_weights(large, _saved(tmp_path, small))
    position = "patch_encoder/position_embedding"
    assert [entry[0] for entry in report.resampled] == [position]
    grid = to_numpy(next(v for v in small.weights if v.path == position))
    expected = resample_position_embedding(grid, (6, 6))
    np.testing.assert_allclose(to_numpy(next(v for v in large.weights if v.path == position)), expected, atol=1e-6)
    # The GPSA blocks carry their weights whatever the grid (their offsets are computed, not learned).
    gates = [v for v in large.weights if v.path.endswith("/attention/gating")]
    assert len(gates) == 2


def test_a_vit_file_is_refused_for_a_convit_and_a_convit_file_for_a_vit(tmp_path):
    convit = keras_vit.ConViT(image_size=32, **SIZES, name="convit")
    sizes = {key: value for key, value in SIZES.items() if key != "num_gpsa_layers"}
    vit = keras_vit.VisionTransformer(image_size=32, **sizes, name="vit")
    before = [to_numpy(w) for w in convit.weights]
    with pytest.raises(ValueError, match=r"holds a ViT checkpoint \(keras_vit layout\) and cannot be loaded into "
                                         r"the model 'convit', a ConViT; expected a ConViT checkpoint"):
        keras_vit.load_weights(convit, _saved(tmp_path, vit))
    with pytest.raises(ValueError, match=r"holds a ConViT checkpoint \(keras_vit layout\) and cannot be loaded into "
                                         r"the model 'vit', a ViT, DeiT or hybrid"):
        keras_vit.load_weights(vit, _saved(tmp_path, convit))
    assert all(np.array_equal(a, to_numpy(b)) for a, b in zip(before, convit.weights))


def test_a_convit_model_is_of_its_family_and_one_without_gpsa_is_a_vit():
    assert keras_vit.inspection.family(keras_vit.ConViT(image_size=32, **SIZES)) == "ConViT"
    plain = keras_vit.ConViT(image_size=32, **{**SIZES, "num_gpsa_layers": 0})
    assert keras_vit.inspection.family(plain) == "ViT"
    assert keras_vit.inspection.model_architecture(plain)["builder"] == "VisionTransformer"
    assert isinstance(plain, keras.Model)

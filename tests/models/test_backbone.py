"""`keras_vit.backbone` and `keras_vit.head`: one split for every family, old `.keras` files included."""

import keras
import numpy as np
import pytest

import keras_vit
from tests.models.test_legacy_files import LEGACY, NAMES
from tests.testing import to_numpy


@pytest.mark.parametrize("name", NAMES)
def test_head_of_backbone_is_the_model(name):
    model = keras.saving.load_model(LEGACY / f"{name}.keras")
    images = np.load(LEGACY / f"{name}.npz")["images"]
    features = keras_vit.backbone(model)
    top = keras_vit.head(model)
    tokens = to_numpy(features(images))
    np.testing.assert_allclose(to_numpy(top(tokens)), to_numpy(model(images)), rtol=1e-5, atol=1e-5)
    # Before pooling: a token sequence (ViT-like) or a feature map (Swin).
    assert tokens.ndim == (4 if name == "swin" else 3)
    # The two parts share the model's weights and split them without overlap.
    paths = [v.path for v in model.weights]
    assert sorted(v.path for v in features.weights + top.weights) == sorted(paths)


def test_token_layout_and_head_of_a_distilled_deit():
    model = keras.saving.load_model(LEGACY / "deit_distilled.keras")
    tokens = keras_vit.backbone(model).output
    assert tuple(tokens.shape) == (None, 2 + 16, 32)  # class, distillation, 4x4 patches
    assert {layer.name for layer in keras_vit.head(model).layers} >= {"head", "head_dist", "head_average"}


def test_features_and_backbone_end_at_the_same_norm():
    model = keras.saving.load_model(LEGACY / "vit.keras")
    images = np.load(LEGACY / "vit.npz")["images"]
    last = keras_vit.features(model, blocks=[-1], output="tokens", norm=True)(images)["block_1"]
    np.testing.assert_array_equal(to_numpy(last), to_numpy(keras_vit.backbone(model)(images)))


def test_swin_without_pooling_has_an_empty_head_and_stages_have_none():
    tiny = dict(image_size=16, patch_size=2, embed_dim=8, depths=(2, 1), num_heads=(2, 2), window_size=4,
                include_top=False)
    model = keras_vit.SwinTransformer(**tiny, pooling=None)
    images = np.random.default_rng(0).uniform(0, 255, (1, 16, 16, 3)).astype("float32")
    np.testing.assert_array_equal(to_numpy(keras_vit.backbone(model)(images)), to_numpy(model(images)))
    with pytest.raises(ValueError, match=r"return_stages=True.*Received: model="):
        keras_vit.head(keras_vit.SwinTransformer(**tiny, return_stages=True))


def test_a_model_that_is_not_keras_vit_is_refused_by_name():
    images = keras.Input((8, 8, 3))
    plain = keras.Model(images, keras.layers.Dense(2)(images), name="plain")
    with pytest.raises(ValueError, match=r"no transformer blocks.*Received: model='plain'"):
        keras_vit.backbone(plain)
    with pytest.raises(ValueError, match=r"must be a `keras.Model`. Received: model='x'"):
        keras_vit.head("x")

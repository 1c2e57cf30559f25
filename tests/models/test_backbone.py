"""`keras_vit.backbone` and `keras_vit.head`: one split for every family, `.keras` files included."""

import keras
import numpy as np
import pytest

import keras_vit
from tests.models.tiny import TINY_MODELS, tiny_images, tiny_model
from tests.testing import to_numpy


@pytest.mark.parametrize("name", sorted(TINY_MODELS))
def test_head_of_backbone_is_the_model_after_a_keras_file_round_trip(name, tmp_path):
    # Split as a user's loaded file is: the layers rebuilt from their configs, not the builder's objects.
    path = tmp_path / "model.keras"
    tiny_model(name).save(path)
    model = keras.saving.load_model(path)
    images = tiny_images(model)
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
    model = tiny_model("deit_distilled")
    tokens = keras_vit.backbone(model).output
    assert tuple(tokens.shape) == (None, 2 + 16, 32)  # class, distillation, 4x4 patches
    assert {layer.name for layer in keras_vit.head(model).layers} >= {"head", "head_dist", "head_average"}


def test_features_and_backbone_end_at_the_same_norm():
    model = tiny_model("vit")
    images = tiny_images(model)
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

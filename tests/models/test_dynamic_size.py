"""Models of dynamic image size: any height and width, position embeddings resampled in the call.

Against timm's `dynamic_img_size=True` (and `dynamic_img_pad=True`) on the same
weights for the ViT and the hybrid. timm's ConViT has no dynamic size, so the
ConViT is compared with a timm ConViT built at the other size, whose
`pos_embed` is the checkpoint's resampled by `torch.nn.functional.interpolate`
(what the ViT's dynamic size does) and whose GPSA relative indices are those of
the other grid (timm computes them for square grids only; the non-square ones
are set here, written from ConViT Eq. 5). Tolerance: 1e-4 on logits of O(1),
as in tests/weights/test_reference.py.
"""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import ImageShapeCheck, PatchEncoder, Patches
from keras_vit.models.convit import GPSA
from runs.reference import torch
from tests.testing import check_layer, set_random_weights, to_numpy
from tests.weights.checkpoints import (
    TINY,
    randomize_torch,
    save_state_dict,
    timm_convit,
    timm_hybrid,
    timm_vit,
    torch_logits,
)

TOLERANCE = 1e-4
CONVIT = {**TINY, "num_layers": 3, "num_heads": 4}


def images(size, seed=0):
    # Already normalized: both models get preprocessing switched off.
    return np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")


def assert_same_logits(model, torch_model, size):
    x = images(size)
    # One compiled call: on JAX far quicker for a new size than eager ops.
    ours, expected = np.asarray(model.predict_on_batch(x)), torch_logits(torch_model, x)
    assert np.abs(expected).max() > 0.1  # a real signal, not zeros
    np.testing.assert_allclose(ours, expected, atol=TOLERANCE, rtol=0)


def loaded(builder, path, **kwargs):
    model = builder(**kwargs, preprocessing=None)
    keras_vit.load_weights(model, path, strict=True)
    return model


# ---- ViT and hybrid against timm ------------------------------------------------


def test_vit_matches_timm_dynamic_img_size_and_the_fixed_model_at_its_size(tmp_path):
    reference = randomize_torch(timm_vit(dynamic_img_size=True))
    path = save_state_dict(tmp_path / "vit.safetensors", reference)
    model = loaded(keras_vit.VisionTransformer, path, **TINY, dynamic_image_size=True)
    assert model.input_shape == (None, None, None, 3)
    assert model.get_layer("patch_encoder").position_embedding.shape == (4, 4, 32)
    fixed = loaded(keras_vit.VisionTransformer, path, **TINY)
    x = images((32, 32))
    np.testing.assert_array_equal(model.predict_on_batch(x), fixed.predict_on_batch(x))
    for size in [(48, 48), (24, 40)]:
        assert_same_logits(model, reference, size)


def test_vit_matches_timm_dynamic_img_pad(tmp_path):
    reference = randomize_torch(timm_vit(dynamic_img_size=True, dynamic_img_pad=True))
    path = save_state_dict(tmp_path / "vit.safetensors", reference)
    model = loaded(keras_vit.VisionTransformer, path, **TINY, dynamic_image_size=True, dynamic_padding=True)
    for size in [(30, 45), (17, 32)]:
        assert_same_logits(model, reference, size)


def test_hybrid_matches_timm_dynamic_img_size(tmp_path):
    reference = randomize_torch(timm_hybrid(dynamic_img_size=True))
    path = save_state_dict(tmp_path / "hybrid.safetensors", reference)
    model = loaded(
        keras_vit.VisionTransformer, path, **{**TINY, "image_size": 64, "patch_size": 1},
        resnet_stages=(1, 1), dynamic_image_size=True,
    )
    for size in [(40, 40), (48, 72)]:
        assert_same_logits(model, reference, size)


def test_root_only_hybrid_pads_its_feature_map_as_timm(tmp_path):
    import functools

    from timm.models.vision_transformer_hybrid import HybridEmbed, _resnetv2

    reference = randomize_torch(timm_vit(
        img_size=64, patch_size=4, dynamic_img_size=True, dynamic_img_pad=True,
        embed_layer=functools.partial(HybridEmbed, backbone=_resnetv2(layers=())),
    ))
    path = save_state_dict(tmp_path / "hybrid.safetensors", reference)
    model = loaded(
        keras_vit.VisionTransformer, path, **{**TINY, "image_size": 64, "patch_size": 4},
        resnet_stages=(), dynamic_image_size=True, dynamic_padding=True,
    )
    # 60 x 76 px: a 15 x 19 feature map, padded to 16 x 20 (a 4 x 5 grid).
    for size in [(60, 76), (64, 64)]:
        assert_same_logits(model, reference, size)


# ---- ConViT -------------------------------------------------------------------------


def timm_convit_at(source, size):
    """timm's ConViT at `size`: the weights of `source`, its pos_embed resampled as timm's ViT does."""
    rows, cols = size[0] // 8, size[1] // 8
    state = {k: v.clone() for k, v in source.state_dict().items()}
    grid = state["pos_embed"].reshape(1, 4, 4, -1).permute(0, 3, 1, 2)
    grid = torch.nn.functional.interpolate(grid, size=(rows, cols), mode="bicubic", align_corners=False, antialias=True)
    state["pos_embed"] = grid.permute(0, 2, 3, 1).reshape(1, rows * cols, -1)
    model = timm_convit(img_size=size).eval()
    model.load_state_dict(state)
    # ConViT Eq. 5 for a rows x cols grid, tokens row-major: (dx, dy, dx^2 + dy^2).
    index = torch.arange(rows * cols)
    y, x = (index // cols).float(), (index % cols).float()
    dx, dy = x[None, :] - x[:, None], y[None, :] - y[:, None]
    indices = torch.stack([dx, dy, dx**2 + dy**2], dim=-1)[None]
    for block in model.blocks:
        if hasattr(block.attn, "rel_indices"):
            block.attn.rel_indices = indices
    return model


def test_convit_matches_timm_at_other_sizes_and_the_fixed_model_at_its_size(tmp_path):
    source = randomize_torch(timm_convit())
    path = save_state_dict(tmp_path / "convit.safetensors", source)
    model = loaded(keras_vit.ConViT, path, **CONVIT, num_gpsa_layers=2, dynamic_image_size=True)
    fixed = loaded(keras_vit.ConViT, path, **CONVIT, num_gpsa_layers=2)
    x = images((32, 32))
    np.testing.assert_array_equal(model.predict_on_batch(x), fixed.predict_on_batch(x))
    for size in [(48, 48), (24, 40)]:
        assert_same_logits(model, timm_convit_at(source, size), size)


def test_gpsa_on_a_grid_is_gpsa_on_its_sequence():
    layer = GPSA(4, grid_size=(3, 5))
    tokens = np.random.default_rng(0).normal(size=(2, 15, 16)).astype("float32")
    sequence = to_numpy(layer(tokens))
    set_random_weights(layer)
    sequence = to_numpy(layer(tokens))
    np.testing.assert_array_equal(to_numpy(layer(tokens.reshape(2, 3, 5, 16))).reshape(2, 15, 16), sequence)
    # Another grid: the layer computes its offsets; a 5 x 3 grid is not the 3 x 5 one.
    other = to_numpy(layer(tokens.reshape(2, 5, 3, 16))).reshape(2, 15, 16)
    assert np.abs(other - sequence).max() > 1e-3


# ---- saving and serving -------------------------------------------------------------


@pytest.mark.parametrize("builder,config", [(keras_vit.VisionTransformer, TINY), (keras_vit.ConViT, {**CONVIT, "num_gpsa_layers": 2})])
def test_keras_file_round_trip_at_another_size(builder, config, tmp_path):
    model = builder(**config, dynamic_image_size=True, dynamic_padding=True)
    set_random_weights(model, scale=0.1)
    x = np.random.default_rng(1).uniform(0, 255, (2, 20, 44, 3)).astype("float32")
    expected = np.asarray(model.predict_on_batch(x))
    assert np.abs(expected).max() > 1e-3
    model.save(str(tmp_path / "model.keras"))
    restored = keras.models.load_model(str(tmp_path / "model.keras"))
    np.testing.assert_array_equal(np.asarray(restored.predict_on_batch(x)), expected)


@pytest.mark.parametrize("builder,config", [(keras_vit.VisionTransformer, TINY), (keras_vit.ConViT, {**CONVIT, "num_gpsa_layers": 2})])
def test_saved_model_serves_any_size(builder, config, tmp_path):
    import tensorflow as tf

    model = builder(**config, dynamic_image_size=True, dynamic_padding=True)
    set_random_weights(model, scale=0.1)
    model.export(str(tmp_path / "saved"), verbose=False)
    loaded_model = tf.saved_model.load(str(tmp_path / "saved"))  # kept: it owns the variables
    signature = loaded_model.signatures["serving_default"].structured_input_signature[1]
    assert signature["images"].shape.as_list() == [None, None, None, 3]
    for seed, size in enumerate([(20, 44), (40, 24)]):
        x = np.random.default_rng(seed).uniform(0, 255, (2, *size, 3)).astype("float32")
        served = loaded_model.serve(tf.constant(x)).numpy()
        np.testing.assert_allclose(served, np.asarray(model.predict_on_batch(x)), atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a run-time check of TensorFlow graphs")
def test_saved_model_refuses_sizes_the_patch_does_not_divide(tmp_path):
    import tensorflow as tf

    keras_vit.VisionTransformer(**TINY, dynamic_image_size=True).export(str(tmp_path / "saved"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "saved"))
    assert served.serve(tf.zeros((1, 24, 40, 3))).shape == (1, 10)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"multiples of the patch size \(patch_size=\(8, 8\)\)"):
        served.serve(tf.zeros((1, 24, 41, 3)))


def test_fits_and_predicts_at_several_sizes():
    model = keras_vit.VisionTransformer(**TINY, dynamic_image_size=True)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (4, 24, 40, 3)).astype("float32")
    assert np.isfinite(model.fit(x, np.arange(4), verbose=0).history["loss"][0])
    for size in [(32, 32), (40, 16)]:
        x = rng.uniform(0, 255, (4, *size, 3)).astype("float32")
        assert model.predict(x, verbose=0).shape == (4, 10)


# ---- the shape check and the layers -----------------------------------------------


def test_sizes_the_patch_does_not_divide_are_named():
    model = keras_vit.VisionTransformer(**TINY, dynamic_image_size=True)
    message = r"patch_size=\(8, 8\)\), which do not divide an image width of 44; received a batch of shape \(2, 32, 44, 3\)"
    with pytest.raises(ValueError, match=message):
        model(images((32, 44)))
    hybrid = keras_vit.VisionTransformer(
        **{**TINY, "image_size": 64, "patch_size": 2}, resnet_stages=(1, 1), dynamic_image_size=True
    )
    with pytest.raises(ValueError, match=r"image height of 72 \(the ResNet turns it into 9 feature-map cells\)"):
        hybrid(images((72, 64)))


def test_image_shape_check_layer():
    x = images((8, 12))
    for config in [
        {"image_size": None, "num_channels": 3, "patch_size": 4},
        {"image_size": (8, None), "num_channels": 3, "patch_size": 4, "feature_stride": 2, "dynamic_padding": True},
    ]:
        np.testing.assert_array_equal(check_layer(ImageShapeCheck, config, x), x)
    layer = ImageShapeCheck(None, 3, patch_size=(4, 5))
    with pytest.raises(ValueError, match=r"patch_size=\(4, 5\)\), which do not divide an image width of 12"):
        layer(x)
    assert ImageShapeCheck(None, 3, patch_size=(4, 5), dynamic_padding=True)(x) is not None
    with pytest.raises(ValueError, match=r"`image_size` must be None, a positive integer or a tuple of 2 positive integers or Nones. Received: image_size='big'"):
        ImageShapeCheck("big", 3)
    with pytest.raises(ValueError, match=r"`dynamic_padding` must be True or False. Received: dynamic_padding=1"):
        ImageShapeCheck(None, 3, dynamic_padding=1)


def test_patches_pad_bottom_and_right():
    x = np.arange(2 * 5 * 7 * 1, dtype="float32").reshape(2, 5, 7, 1) + 1
    out = check_layer(Patches, {"patch_size": 4, "dynamic_padding": True}, x)
    padded = np.pad(x, [(0, 0), (0, 3), (0, 1), (0, 0)])
    expected = padded.reshape(2, 2, 4, 2, 4, 1).transpose(0, 1, 3, 2, 4, 5).reshape(2, 2, 2, 16)
    np.testing.assert_array_equal(out, expected)


def test_patch_encoder_resamples_only_another_grid():
    patches = np.random.default_rng(0).normal(size=(2, 3, 4, 6)).astype("float32")
    config = {"hidden_size": 8, "grid_size": (3, 4), "dynamic_grid": True, "interpolation": "bilinear", "antialias": False}
    layer = PatchEncoder(**config)
    out = check_layer(PatchEncoder, config, patches)
    layer(patches)
    set_random_weights(layer)
    projected = to_numpy(layer.projection(patches))
    grid = to_numpy(layer.position_embedding)
    np.testing.assert_array_equal(to_numpy(layer(patches)), (projected + grid).reshape(2, 12, 8))
    other = np.random.default_rng(1).normal(size=(2, 5, 2, 6)).astype("float32")
    expected = to_numpy(layer.projection(other)) + keras_vit.resample_position_embedding(grid, (5, 2))
    np.testing.assert_allclose(to_numpy(layer(other)), expected.reshape(2, 10, 8), atol=1e-6)
    assert out.shape == (2, 12, 8)
    grid_out = PatchEncoder(8, flatten=False)(patches)
    assert tuple(grid_out.shape) == (2, 3, 4, 8)
    with pytest.raises(ValueError, match=r"built for a \(3, 4\) patch grid.*dynamic_grid=True"):
        PatchEncoder(8, grid_size=(3, 4))(other)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"position_interpolation": "nearest"}, r"`position_interpolation` must be one of \('bilinear', 'bicubic', 'bilinear_scipy'\). Received: position_interpolation='nearest'"),
        ({"position_interpolation": "bilinear_scipy"}, r"`position_antialias=True` needs position_interpolation='bilinear' or 'bicubic'"),
        ({"dynamic_image_size": "yes"}, r"`dynamic_image_size` must be True or False. Received: dynamic_image_size='yes'"),
        ({"dynamic_padding": None}, r"`dynamic_padding` must be True or False. Received: dynamic_padding=None"),
    ],
)
def test_bad_arguments_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.VisionTransformer(**TINY, **overrides)
    with pytest.raises(ValueError, match=message):
        keras_vit.ConViT(**CONVIT, **overrides)


def test_a_fixed_size_the_patch_does_not_divide_is_padded():
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": 30}, dynamic_padding=True)
    assert model.get_layer("patch_encoder").position_embedding.shape == (4, 4, 32)
    assert model(images((30, 30))).shape == (2, 10)

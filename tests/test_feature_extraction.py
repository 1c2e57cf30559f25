"""`features` against timm's `forward_intermediates`; the simple feature pyramid against numpy.

Each timm reference gets random weights, saves them as a safetensors state
dict, and keras_vit loads that file: the intermediates of both must agree to
1e-4 (max abs difference on activations of O(1), as the logits tests).
"""

import functools

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.feature_extraction import features, simple_feature_pyramid
from keras_vit.layers.pyramid import PatchTokenMap, SimpleFeaturePyramidLevel
from runs.reference import timm, torch
from tests.testing import check_layer, np_conv2d_same, np_gelu, np_layer_norm, to_numpy
from tests.weights.checkpoints import TINY, randomize_torch, save_state_dict, timm_convit, timm_hybrid, timm_vit

TOLERANCE = 1e-4


def images(size, seed=0):
    # Already normalized: both models get preprocessing switched off.
    return np.random.default_rng(seed).uniform(-1, 1, (2, *size, 3)).astype("float32")


def timm_intermediates(model, x, **kwargs):
    """timm's intermediates of NHWC images, as channels-last numpy arrays."""
    with torch.no_grad():
        outputs = model.forward_intermediates(
            torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), intermediates_only=True, **kwargs
        )
    arrays = []
    for y in outputs:
        if isinstance(y, tuple):  # return_prefix_tokens: (patch tokens, prefix tokens)
            arrays.append(np.concatenate([y[1].numpy(), y[0].numpy()], axis=1))
        else:
            arrays.append(y.numpy().transpose(0, 2, 3, 1) if y.ndim == 4 else y.numpy())
    return arrays


def assert_close(ours, reference):
    ours = to_numpy(ours)
    assert ours.shape == reference.shape
    assert np.abs(reference).max() > 0.1  # a real signal, not zeros
    np.testing.assert_allclose(ours, reference, atol=TOLERANCE, rtol=0)
    return float(np.abs(ours - reference).max())


def loaded(keras_model, reference, tmp_path):
    keras_vit.load_weights(keras_model, save_state_dict(tmp_path / "weights.safetensors", reference), strict=True)
    return keras_model


# ---- features against timm ----------------------------------------------------------


def test_vit_maps_and_tokens_match_timm(tmp_path):
    # A non-square grid (4 x 6), so a swapped height and width cannot pass.
    reference = randomize_torch(timm_vit(img_size=(32, 48), depth=3))
    model = loaded(
        keras_vit.VisionTransformer(**{**TINY, "image_size": (32, 48), "num_layers": 3}, preprocessing=None),
        reference, tmp_path,
    )
    x = images((32, 48))
    for norm in (False, True):
        maps = features(model, blocks=2, output="maps", norm=norm)(x)
        assert sorted(maps) == ["block_1", "block_2"]
        expected = timm_intermediates(reference, x, indices=2, norm=norm, output_fmt="NCHW")
        for key, reference_map in zip(["block_1", "block_2"], expected):
            assert_close(maps[key], reference_map)
        tokens = features(model, blocks=[0, -1], output="tokens", norm=norm)(x)
        expected = timm_intermediates(reference, x, indices=[0, -1], norm=norm, output_fmt="NLC",
                                      return_prefix_tokens=True)
        for key, reference_tokens in zip(["block_0", "block_2"], expected):
            assert_close(tokens[key], reference_tokens)


def test_distilled_deit_drops_both_prefix_tokens(tmp_path):
    reference = randomize_torch(timm.create_model(
        "deit_tiny_distilled_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
        depth=2, num_heads=2, mlp_ratio=2.0, num_classes=10,
    ))
    model = loaded(
        keras_vit.VisionTransformer(**TINY, distillation=True, initialization="deit", preprocessing=None),
        reference, tmp_path,
    )
    x = images((32, 32))
    ours = features(model, output="maps", norm=True)(x)
    for index, reference_map in enumerate(timm_intermediates(reference, x, norm=True, output_fmt="NCHW")):
        assert_close(ours[f"block_{index}"], reference_map)
    tokens = features(model, blocks=[1], output="tokens")(x)["block_1"]
    assert tuple(tokens.shape) == (2, 2 + 16, 32)
    (expected,) = timm_intermediates(reference, x, indices=[1], output_fmt="NLC", return_prefix_tokens=True)
    assert_close(tokens, expected)


def test_hybrid_blocks_and_resnet_stages_match_timm(tmp_path):
    reference = randomize_torch(timm_hybrid(resnet_stages=(1,), image_size=32))  # patch 1 on the ResNet map
    model = loaded(
        keras_vit.VisionTransformer(**{**TINY, "patch_size": 1}, resnet_stages=(1,), preprocessing=None),
        reference, tmp_path,
    )
    x = images((32, 32))
    ours = features(model, blocks=[-1], output="maps", norm=True, stages=2)(x)
    assert sorted(ours) == ["block_1", "stage_0", "stage_1"]
    (expected,) = timm_intermediates(reference, x, indices=[-1], norm=True, output_fmt="NCHW")
    assert_close(ours["block_1"], expected)
    backbone = reference.patch_embed.backbone
    for index, reference_map in enumerate(timm_intermediates(backbone, x, indices=[0, 1])):
        assert_close(ours[f"stage_{index}"], reference_map)
    # Strides 2 and 4: the root before its max-pool, then the stage.
    assert [tuple(ours[f"stage_{i}"].shape[1:3]) for i in range(2)] == [(16, 16), (8, 8)]
    only_stages = features(model, blocks=[], stages=[0])(x)
    assert sorted(only_stages) == ["stage_0"]


def test_convit_gpsa_blocks_have_no_class_token(tmp_path):
    reference = randomize_torch(timm_convit())  # 3 blocks, the first 2 GPSA
    model = loaded(
        keras_vit.ConViT(**{**TINY, "num_layers": 3, "num_heads": 4}, num_gpsa_layers=2, preprocessing=None),
        reference, tmp_path,
    )
    x = images((32, 32))
    for norm in (False, True):
        ours = features(model, output="maps", norm=norm)(x)
        for index, reference_map in enumerate(timm_intermediates(reference, x, norm=norm, output_fmt="NCHW")):
            assert_close(ours[f"block_{index}"], reference_map)
        tokens = features(model, output="tokens", norm=norm)(x)
        assert [tokens[f"block_{i}"].shape[1] for i in range(3)] == [16, 16, 17]
        # timm's NLC intermediates are the patch tokens, the class token stripped.
        for index, reference_tokens in enumerate(timm_intermediates(reference, x, norm=norm, output_fmt="NLC")):
            assert_close(to_numpy(tokens[f"block_{index}"])[:, -16:], reference_tokens)


def test_features_share_weights_and_save(tmp_path):
    model = keras_vit.VisionTransformer(**TINY, distillation=True)
    extractor = features(model, blocks=[0, 1], norm=True)
    assert all(any(w is v for v in model.weights) for w in extractor.weights)
    x = np.random.default_rng(1).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    path = str(tmp_path / "features.keras")
    extractor.save(path)
    restored = keras.saving.load_model(path)
    expected, outputs = extractor(x), restored(x)
    for key in expected:
        np.testing.assert_array_equal(to_numpy(outputs[key]), to_numpy(expected[key]))
    # A model loaded from a file is found by layer class as well.
    again = features(restored, blocks=1, norm=True)(x)["block_1"]
    np.testing.assert_array_equal(to_numpy(again), to_numpy(expected["block_1"]))


@pytest.mark.parametrize("family", ["vit", "convit"])
def test_variable_image_size_gives_the_grid_of_each_input(family):
    # ConViT's GPSA blocks take a variable-size grid as a map; the ViT's blocks take tokens.
    if family == "vit":
        build = functools.partial(keras_vit.VisionTransformer, **TINY, distillation=True)
        lengths = [2 + 30, 2 + 30]
    else:
        build = functools.partial(keras_vit.ConViT, **{**TINY, "num_layers": 3, "num_heads": 4}, num_gpsa_layers=2)
        lengths = [30, 30, 1 + 30]
    static, dynamic = build(), build(dynamic_image_size=True)
    dynamic.set_weights(static.get_weights())
    x = np.random.default_rng(9).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    expected = features(static, norm=True)(x)
    ours = features(dynamic, norm=True)(x)
    for key in expected:
        np.testing.assert_allclose(to_numpy(ours[key]), to_numpy(expected[key]), atol=1e-5, rtol=0)
    other = np.zeros((2, 48, 40, 3), "float32")  # a 6 x 5 grid
    maps = features(dynamic)(other)
    assert {tuple(v.shape) for v in maps.values()} == {(2, 6, 5, 32)}
    tokens = features(dynamic, output="tokens")(other)
    assert [tuple(tokens[f"block_{i}"].shape) for i in range(len(lengths))] == [(2, n, 32) for n in lengths]
    if family == "vit":
        levels = simple_feature_pyramid(dynamic, out_channels=4)(other)
        # Token stride 8: strides 4 to 32 are 2x up, identity, 2x and 4x max-pooling (rounding down).
        assert {k: tuple(v.shape[1:3]) for k, v in levels.items()} == {
            "p2": (12, 10), "p3": (6, 5), "p4": (3, 2), "p5": (1, 1),
        }


def test_patch_token_map_drops_the_prefix_and_keeps_row_major_order():
    tokens = np.arange(2 * (2 + 6) * 3, dtype="float32").reshape(2, 8, 3)
    layer = PatchTokenMap(2)
    output = to_numpy(layer([tokens, np.zeros((2, 2, 3, 1), "float32")]))
    np.testing.assert_array_equal(output, tokens[:, 2:].reshape(2, 2, 3, 3))
    clone = PatchTokenMap.from_config(layer.get_config())
    assert clone.num_prefix_tokens == 2 and set(layer.get_config()) - set(keras.layers.Layer().get_config()) == {
        "num_prefix_tokens"
    }
    symbolic = layer([keras.KerasTensor((None, None, 3)), keras.KerasTensor((None, None, None, 1))])
    assert tuple(symbolic.shape) == (None, None, None, 3)
    with pytest.raises(ValueError, match=r"Received: num_prefix_tokens=-1"):
        PatchTokenMap(-1)


@pytest.mark.parametrize("blocks", [0, 3, [2], [-3], "1", True, 1.0, [0, None]])
def test_bad_blocks_name_the_range(blocks):
    model = keras_vit.VisionTransformer(**TINY)
    with pytest.raises(ValueError, match=r"`blocks` must be None.*\[1, 2\].*\[-2, 1\].*Received: blocks="):
        features(model, blocks=blocks)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(output="nchw"), r"`output` must be one of \('tokens', 'maps'\). Received: output='nchw'"),
        (dict(norm="yes"), r"Received: norm='yes'"),
        (dict(stages=1), r"`stages` selects the ResNet levels.*Received: stages=1"),
        (dict(blocks=[]), r"Nothing to return.*Received: blocks=\[\]"),
    ],
)
def test_bad_feature_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        features(keras_vit.VisionTransformer(**TINY), **kwargs)


def test_bad_stages_name_the_levels():
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": 64, "patch_size": 1}, resnet_stages=(1, 1))
    with pytest.raises(ValueError, match=r"`stages` must be None \(all 3 ResNet levels\).*Received: stages=4"):
        features(model, stages=4)


def test_other_models_are_refused():
    swin = keras_vit.SwinTransformer(image_size=16, embed_dim=8, depths=(1,), num_heads=(1,), window_size=4,
                                     num_classes=2)
    with pytest.raises(ValueError, match="return_stages=True"):
        features(swin)
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"must be a keras_vit model with one patch grid .* with its blocks \(TransformerBlock, .*AxialTransformerBlock\)"):
        features(plain)
    with pytest.raises(ValueError, match="`model` must be a `keras.Model`"):
        simple_feature_pyramid("vit")


# ---- the simple feature pyramid ---------------------------------------------------


def tiny_vit(image_size, patch_size):
    return keras_vit.VisionTransformer(**{**TINY, "image_size": image_size, "patch_size": patch_size})


def test_pyramid_scales_follow_the_patch_size():
    # Patch 8: the token map has stride 8, so stride 4 is one 2x upsampling and stride 32 a 4x max-pool.
    pyramid = simple_feature_pyramid(tiny_vit((32, 64), 8), out_channels=8, strides=(4, 32))
    assert [pyramid.get_layer(f"pyramid_p{i}").scale for i in (2, 5)] == [2.0, 0.25]
    # Static shapes (that they equal the eager ones is the layer tests' business).
    shapes = [tuple(pyramid.get_layer(f"pyramid_p{i}").output.shape) for i in (2, 5)]
    assert shapes == [(None, 8, 16, 8), (None, 1, 2, 8)]


def test_pyramid_reads_the_chosen_block():
    model = tiny_vit(32, 8)
    pyramid = simple_feature_pyramid(model, out_channels=8, strides=(8,), block=0, norm=True)
    x = np.random.default_rng(2).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    block_map = features(model, blocks=[0], norm=True)(x)["block_0"]
    expected = pyramid.get_layer("pyramid_p3")(block_map)
    np.testing.assert_allclose(to_numpy(pyramid(x)["p3"]), to_numpy(expected), atol=1e-6, rtol=0)


def test_pyramid_strides_at_a_non_square_size_and_keras_round_trip(tmp_path):
    pyramid = simple_feature_pyramid(tiny_vit((64, 96), 16), out_channels=8)
    assert [pyramid.get_layer(f"pyramid_p{i}").scale for i in (2, 3, 4, 5)] == [4.0, 2.0, 1.0, 0.5]
    x = np.random.default_rng(3).uniform(0, 255, (2, 64, 96, 3)).astype("float32")
    expected = pyramid(x)
    # Stride s: (64 / s, 96 / s), from the 4 x 6 stride-16 map.
    assert {k: tuple(v.shape) for k, v in expected.items()} == {
        "p2": (2, 16, 24, 8), "p3": (2, 8, 12, 8), "p4": (2, 4, 6, 8), "p5": (2, 2, 3, 8),
    }
    path = str(tmp_path / "pyramid.keras")
    pyramid.save(path)
    outputs = keras.saving.load_model(path)(x)
    for key in expected:
        np.testing.assert_array_equal(to_numpy(outputs[key]), to_numpy(expected[key]))


@pytest.mark.parametrize(
    "image_size,patch_size,kwargs,message",
    [
        (48, 12, {}, r"power of two.*token stride \(12, 12\)"),
        ((32, 64), (8, 16), {}, r"same power of two along both axes.*token stride \(8, 16\)"),
        (16, 16, {}, r"Stride 32 max-pools the \(1, 1\) token map of stride 16 by 2"),
        (32, 8, dict(strides=(4, 6)), r"`strides` must be .* powers of two.*Received: strides=\(4, 6\)"),
        (32, 8, dict(strides=[]), r"Received: strides=\[\]"),
        (32, 8, dict(strides=[8, 8]), r"distinct powers of two.*Received: strides=\[8, 8\]"),
        (32, 8, dict(strides=[[4]]), r"Received: strides=\[\[4\]\]"),
        (32, 8, dict(out_channels=0), r"Received: out_channels=0"),
        (32, 8, dict(block=2), r"`block` must be a block index in \[-2, 1\]. Received: block=2"),
        (32, 8, dict(norm=1), r"Received: norm=1"),
    ],
)
def test_pyramid_refuses_what_it_cannot_build(image_size, patch_size, kwargs, message):
    model = tiny_vit(image_size, patch_size)
    with pytest.raises(ValueError, match=message):
        simple_feature_pyramid(model, **{"out_channels": 8, **kwargs})


# ---- SimpleFeaturePyramidLevel --------------------------------------------------------


@pytest.mark.parametrize("scale", [4.0, 1, 0.5])
def test_level_config_and_shapes(scale):
    x = np.random.default_rng(4).normal(size=(2, 4, 6, 8)).astype("float32")
    output = check_layer(SimpleFeaturePyramidLevel, dict(out_channels=5, scale=scale), x)
    assert output.shape == (2, int(4 * scale), int(6 * scale), 5)


def test_level_under_mixed_precision():
    layer = SimpleFeaturePyramidLevel(4, 2.0, dtype="mixed_bfloat16")
    output = layer(np.ones((1, 2, 2, 8), "float32"))
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)


@pytest.mark.parametrize("kwargs,message", [
    (dict(out_channels=4, scale=3), r"`scale` must be a power of two.*Received: scale=3"),
    (dict(out_channels=4, scale=0), r"Received: scale=0"),
    (dict(out_channels=4, scale=True), r"Received: scale=True"),
    (dict(out_channels=0, scale=1), r"Received: out_channels=0"),
    (dict(out_channels=4, scale=1, layer_norm_epsilon=-1.0), r"Received: layer_norm_epsilon=-1.0"),
])
def test_level_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SimpleFeaturePyramidLevel(**kwargs)


def np_conv_transpose_2x2(x, kernel, bias):
    """Stride-2 2x2 transposed convolution: input cell (i, j) paints output cells (2i + a, 2j + b)."""
    b, h, w, _ = x.shape
    out = np.zeros((b, 2 * h, 2 * w, kernel.shape[2]))
    for i in range(h):
        for j in range(w):
            for a in range(2):
                for c in range(2):
                    # Keras stores the kernel as (kh, kw, out_channels, in_channels).
                    out[:, 2 * i + a, 2 * j + c] = x[:, i, j] @ kernel[a, c].T
    return out + bias


def np_max_pool_2x2(x):
    b, h, w, c = x.shape
    return x[:, : h // 2 * 2, : w // 2 * 2].reshape(b, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def np_project(x, weights, eps=1e-6):
    """The 1x1 conv, LayerNorm, 3x3 conv, LayerNorm every level ends with."""
    lateral, g1, b1, output, g2, b2 = weights
    x = np_layer_norm(np.einsum("bhwc,co->bhwo", x, lateral[0, 0]), g1, b1, eps)
    return np_layer_norm(np_conv2d_same(x, output, 1), g2, b2, eps)


def hand_set(layer, seed):
    rng = np.random.default_rng(seed)
    weights = [rng.uniform(-0.5, 0.5, w.shape).astype("float32") for w in layer.get_weights()]
    layer.set_weights(weights)
    return [w.astype("float64") for w in weights]


def test_stride_4_level_matches_numpy():
    # ViTDet's stride-4 path: deconv, LayerNorm, GELU, deconv, then the projection.
    x = np.random.default_rng(5).normal(size=(2, 3, 2, 8)).astype("float32")
    layer = SimpleFeaturePyramidLevel(6, 4.0)
    layer.build(x.shape)
    k1, c1, g, b, k2, c2, *projection = hand_set(layer, 6)
    assert k1.shape == (2, 2, 4, 8) and k2.shape == (2, 2, 2, 4)  # channels 8 -> 4 -> 2
    y = np_conv_transpose_2x2(x.astype("float64"), k1, c1)
    y = np_conv_transpose_2x2(np_gelu(np_layer_norm(y, g, b, 1e-6)), k2, c2)
    expected = np_project(y, projection)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=1e-5, rtol=0)


def test_stride_32_level_matches_numpy():
    x = np.random.default_rng(7).normal(size=(1, 5, 4, 8)).astype("float32")  # odd height rounds down
    layer = SimpleFeaturePyramidLevel(6, 0.5)
    layer.build(x.shape)
    expected = np_project(np_max_pool_2x2(x.astype("float64")), hand_set(layer, 8))
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=1e-5, rtol=0)

"""DINOv2, with and without registers, against timm and Hugging Face transformers.

Random-weight files in each reference's layout are written by the reference itself
(timm's `VisionTransformer` with LayerScale, registers and SwiGLU as its
`vit_*_dinov2` builders configure it; transformers' `Dinov2Model` and
`Dinov2WithRegistersModel`), loaded by keras_vit, and the features compared.
Tolerance: max abs difference 1e-4 on float32 features of O(1).
"""

import numpy as np
import pytest

import keras_vit
from keras_vit.models.dinov2 import checkpoints
# The torchvision shim first: timm and transformers import torchvision.
from runs.reference import torch
from tests.testing import to_numpy
from tests.weights.checkpoints import randomize_torch, save_state_dict

TOLERANCE = 1e-4
# Tiny but at the size the issue names: 224 px, a 16 x 16 grid of 14-pixel patches, 32 wide;
# SwiGLU's gated width 48. Files are resampled to 280 px (20 x 20), as the references do.
SIZE, OTHER_SIZE, GRID = 224, 280, 16
TINY = dict(image_size=SIZE, patch_size=14, hidden_size=32, num_layers=2, num_heads=2, preprocessing=None)
MLP = {"gelu": 64, "swiglu": 48}
CASES = [("gelu", 0), ("gelu", 4), ("swiglu", 0), ("swiglu", 4)]


def _images(size, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (2, size, size, 3)).astype("float32")


def _nchw(images):
    return torch.from_numpy(images.transpose(0, 3, 1, 2).copy())


def _keras(mlp_activation, registers, **overrides):
    return keras_vit.DINOv2(**{**TINY, "mlp_dim": MLP[mlp_activation], "mlp_activation": mlp_activation,
                               "num_register_tokens": registers, **overrides})


def _timm(mlp_activation, registers, image_size=SIZE):
    from timm.layers import SwiGLUPacked
    from timm.models.vision_transformer import VisionTransformer

    # As timm's vit_*_patch14[_reg4]_dinov2 builders configure it.
    kwargs = dict(img_size=image_size, patch_size=14, embed_dim=32, depth=2, num_heads=2, init_values=1e-5,
                  num_classes=0, mlp_ratio=MLP[mlp_activation] / 32)
    if mlp_activation == "swiglu":
        kwargs.update(mlp_ratio=2 * MLP["swiglu"] / 32, mlp_layer=SwiGLUPacked, act_layer=torch.nn.SiLU)
    if registers:
        kwargs.update(reg_tokens=registers, no_embed_class=True)
    return randomize_torch(VisionTransformer(**kwargs))


@pytest.mark.parametrize("mlp_activation,registers", CASES)
def test_timm_file_gives_timms_features_and_tokens(tmp_path, mlp_activation, registers):
    reference = _timm(mlp_activation, registers)
    path = save_state_dict(tmp_path / "dinov2.safetensors", reference.state_dict())
    model = _keras(mlp_activation, registers)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.layout == checkpoints.TIMM_DINOV2 and len(report.loaded) == len(model.weights)
    # Parameter for parameter the same model as timm's (registers: no class slot in `pos_embed`).
    assert model.count_params() == sum(p.numel() for p in reference.parameters())
    x = _images(SIZE)
    with torch.no_grad():
        expected_tokens = reference.forward_features(_nchw(x)).numpy()
        expected = reference(_nchw(x)).numpy()
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(to_numpy(model(x)), expected, atol=TOLERANCE, rtol=0)
    # timm's order: class, registers, patches, all after the final norm.
    tokens = to_numpy(keras_vit.backbone(model)(x))
    assert tokens.shape == (2, 1 + registers + GRID * GRID, 32)
    np.testing.assert_allclose(tokens, expected_tokens, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("registers", [0, 4])
def test_timm_file_at_another_size_is_resampled_as_timm_does(tmp_path, registers):
    # timm builds the 280 px model and resamples the 224 px file's embeddings as it loads it
    # (`checkpoint_filter_fn`: bicubic, antialiased); keras_vit does the same when asked so.
    from timm.models.vision_transformer import checkpoint_filter_fn

    trained = _timm("gelu", registers)
    path = save_state_dict(tmp_path / "dinov2.safetensors", trained.state_dict())
    reference = _timm("gelu", registers, image_size=OTHER_SIZE).eval()
    reference.load_state_dict(checkpoint_filter_fn(trained.state_dict(), reference))
    model = _keras("gelu", registers, image_size=OTHER_SIZE)
    report = keras_vit.load_weights(model, path, position_interpolation="bicubic", position_antialias=True)
    assert report.resampled
    x = _images(OTHER_SIZE, seed=1)
    with torch.no_grad():
        expected = reference(_nchw(x)).numpy()
    np.testing.assert_allclose(to_numpy(model(x)), expected, atol=TOLERANCE, rtol=0)


def _transformers(mlp_activation, registers):
    from transformers import Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig, Dinov2WithRegistersModel

    common = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=SIZE, patch_size=14,
                  layerscale_value=1e-5, use_swiglu_ffn=mlp_activation == "swiglu",
                  # SwiGLU's width: int(2 / 3 * 64) = 42, rounded up to a multiple of 8: 48.
                  mlp_ratio=2)
    if registers:
        model = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(**common, num_register_tokens=registers))
    else:
        model = Dinov2Model(Dinov2Config(**common))
    return randomize_torch(model)


def _hub_names(state_dict):
    """The names the hub's files use (transformers' `save_pretrained` before 5.0), from 5.0's module names."""
    renamed, gates = {}, {}
    for key, value in state_dict.items():
        for new, old in (("attention.q_proj", "attention.attention.query"),
                         ("attention.k_proj", "attention.attention.key"),
                         ("attention.v_proj", "attention.attention.value"),
                         ("attention.o_proj", "attention.output.dense"),
                         ("mlp.down_proj", "mlp.weights_out")):
            key = key.replace(new, old)
        if ".mlp.gate_proj." in key or ".mlp.up_proj." in key:
            gates[key] = value
            continue
        renamed[key] = value
    for key in [k for k in gates if ".gate_proj." in k]:
        renamed[key.replace("gate_proj", "weights_in")] = torch.cat([gates[key], gates[key.replace("gate", "up")]])
    return renamed


@pytest.mark.parametrize("mlp_activation,registers", CASES)
@pytest.mark.parametrize("naming", ["modules", "hub"])
def test_transformers_file_gives_its_pooler_output_and_tokens(tmp_path, mlp_activation, registers, naming):
    reference = _transformers(mlp_activation, registers)
    state = reference.state_dict()
    path = save_state_dict(tmp_path / "model.safetensors", _hub_names(state) if naming == "hub" else state)
    model = _keras(mlp_activation, registers)
    report = keras_vit.load_weights(model, path)
    assert report.layout == checkpoints.TRANSFORMERS_DINOV2
    assert [key for key, _ in report.skipped] == ["embeddings.mask_token"] and not report.missing
    x = _images(SIZE)
    with torch.no_grad():
        output = reference(pixel_values=_nchw(x))
    np.testing.assert_allclose(to_numpy(model(x)), output.pooler_output.numpy(), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(
        to_numpy(keras_vit.backbone(model)(x)), output.last_hidden_state.numpy(), atol=TOLERANCE, rtol=0
    )


@pytest.mark.parametrize("registers", [0, 4])
def test_dynamic_size_resamples_as_transformers_does(tmp_path, registers):
    # transformers resamples the position embeddings per call, bicubically, antialiased for
    # the models with registers only (as Meta's hub builds them: `interpolate_antialias`);
    # the DINOv2 builder's default `position_antialias=None` follows the same rule.
    reference = _transformers("gelu", registers)
    path = save_state_dict(tmp_path / "model.safetensors", reference.state_dict())
    model = _keras("gelu", registers, dynamic_image_size=True)
    keras_vit.load_weights(model, path)
    x = _images(OTHER_SIZE, seed=2)
    with torch.no_grad():
        expected = reference(pixel_values=_nchw(x)).pooler_output.numpy()
    np.testing.assert_allclose(to_numpy(model(x)), expected, atol=TOLERANCE, rtol=0)


def test_a_dinov2_file_is_refused_by_a_vit_and_the_other_way_round(tmp_path):
    path = save_state_dict(tmp_path / "dinov2.safetensors", _timm("gelu", 0).state_dict())
    vit = keras_vit.VisionTransformer(image_size=SIZE, patch_size=14, hidden_size=32, num_layers=2, num_heads=2,
                                      mlp_dim=64, include_top=False, preprocessing=None)
    with pytest.raises(ValueError, match="DINOv2 checkpoint .* a ViT, DeiT or hybrid"):
        keras_vit.load_weights(vit, path)
    vit_path = tmp_path / "vit.keras"
    vit.save(vit_path)
    with pytest.raises(ValueError, match="ViT checkpoint .* a DINOv2 model; expected a DINOv2 checkpoint"):
        keras_vit.load_weights(_keras("gelu", 0), vit_path)


@pytest.mark.parametrize("mlp_activation,registers", [("swiglu", 4)])
def test_keras_file_round_trip_and_reload(tmp_path, mlp_activation, registers):
    import keras

    model = _keras(mlp_activation, registers, include_top=True, num_classes=5)
    x = _images(SIZE)
    path = tmp_path / "dinov2.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(loaded(x)), to_numpy(model(x)), atol=1e-6, rtol=0)
    # A .keras file is a checkpoint of its family too.
    fresh = _keras(mlp_activation, registers, include_top=True, num_classes=5)
    report = keras_vit.load_weights(fresh, path, strict=True)
    assert report.exact
    np.testing.assert_allclose(to_numpy(fresh(x)), to_numpy(model(x)), atol=1e-6, rtol=0)


def test_block_maps_skip_the_registers_as_timms_intermediates(tmp_path):
    reference = _timm("gelu", 4)
    model = _keras("gelu", 4)
    keras_vit.load_weights(model, save_state_dict(tmp_path / "dinov2.safetensors", reference.state_dict()))
    assert keras_vit.inspection.prefix_token_counts(model) == [5, 5]
    x = _images(SIZE)
    maps = keras_vit.features(model, blocks=[0])(x)["block_0"]
    with torch.no_grad():
        (expected,) = reference.forward_intermediates(_nchw(x), indices=[0], intermediates_only=True)
    assert tuple(maps.shape) == (2, GRID, GRID, 32)
    np.testing.assert_allclose(to_numpy(maps), expected.numpy().transpose(0, 2, 3, 1), atol=TOLERANCE, rtol=0)


def test_attention_maps_and_rollout_see_the_registers_as_prefix_tokens():
    model = _keras("gelu", 4)
    maps = keras_vit.analysis.attention_maps(model, _images(SIZE))
    tokens = 1 + 4 + GRID * GRID
    assert [m.shape for m in maps] == [(2, 2, tokens, tokens)] * 2
    np.testing.assert_allclose(np.sum(maps[0], axis=-1), 1.0, atol=1e-5)
    rollout = keras_vit.analysis.attention_rollout(maps, (GRID, GRID))
    # The class token's row over the patches alone: the registers are not patches.
    assert rollout.shape == (2, GRID, GRID)
    np.testing.assert_allclose(rollout.sum(axis=(1, 2)), 1.0, atol=1e-5)


def test_saved_model_serves_the_models_probabilities(tmp_path):
    import tensorflow as tf

    model = _keras("swiglu", 4, include_top=True, num_classes=5, preprocessing="imagenet")
    images = np.random.default_rng(3).integers(0, 256, (2, SIZE, SIZE, 3)).astype("uint8")
    path = keras_vit.export.saved_model(model, str(tmp_path / "saved_model"))
    loaded = tf.saved_model.load(path)  # held: its functions reference its variables
    served = loaded.serve(tf.constant(images)).numpy()
    logits = to_numpy(model(images.astype("float32")))
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(served, expected / expected.sum(-1, keepdims=True), atol=1e-5, rtol=0)


def test_known_checkpoint_of_another_variant_is_refused_before_download():
    with pytest.raises(ValueError, match="num_register_tokens=4 vs num_register_tokens=0"):
        keras_vit.build_variant("DINOv2_S14", weights="DINOv2_S14_reg4/lvd142m")


@pytest.mark.parametrize(
    "argument,value",
    [("mlp_activation", "relu"), ("num_register_tokens", -1), ("layer_scale_init", 0)],
)
def test_bad_arguments_are_named(argument, value):
    arguments = {**TINY, "mlp_dim": 64, argument: value}
    with pytest.raises(ValueError, match=f"`{argument}`.*Received: {argument}={value!r}"):
        keras_vit.DINOv2(**arguments)

"""Logits of checkpoints loaded by keras_vit equal those of timm loading the same file.

Tolerance: max abs difference 1e-4 on float32 logits of O(1) (the issue's bar);
the two implementations differ only in float32 summation order and in epsilons
that the following normalizations absorb (weight standardization, GroupNorm).
"""

import numpy as np
import pytest

import keras_vit
from keras_vit.weights.conversion import convert_checkpoint
from runs.reference import timm  # noqa: F401  (imports timm with the torchvision shim)
from tests.testing import parameter_gradients, to_numpy
from tests.weights.checkpoints import (
    TINY,
    official_npz_arrays,
    randomize_torch,
    save_npz,
    save_state_dict,
    timm_convit,
    timm_hybrid,
    timm_vit,
    torch_logits,
)

TOLERANCE = 1e-4


def images(size, seed=0):
    # Already normalized: both models get preprocessing switched off.
    return np.random.default_rng(seed).uniform(-1, 1, (2, size, size, 3)).astype("float32")


def assert_same_logits(keras_model, torch_model, size):
    x = images(size)
    ours, reference = to_numpy(keras_model(x)), torch_logits(torch_model, x)
    assert np.abs(reference).max() > 0.1  # a real signal, not zeros
    np.testing.assert_allclose(ours, reference, atol=TOLERANCE, rtol=0)


def test_vit_safetensors_matches_timm(tmp_path):
    reference = randomize_torch(timm_vit())
    path = save_state_dict(tmp_path / "vit.safetensors", reference)
    model = keras_vit.VisionTransformer(**TINY, preprocessing=None)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.exact and len(report.loaded) == len(model.weights)
    assert_same_logits(model, reference, 32)


def test_hybrid_safetensors_matches_timm(tmp_path):
    reference = randomize_torch(timm_hybrid())
    path = save_state_dict(tmp_path / "hybrid.safetensors", reference)
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": 64, "patch_size": 1}, resnet_stages=(1, 1), preprocessing=None)
    keras_vit.load_weights(model, path, strict=True)
    assert_same_logits(model, reference, 64)


def test_root_only_hybrid_safetensors_matches_timm(tmp_path):
    reference = randomize_torch(_root_only_timm())
    path = save_state_dict(tmp_path / "r_ti.safetensors", reference)
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": 64, "patch_size": 4}, resnet_stages=(), preprocessing=None)
    keras_vit.load_weights(model, path, strict=True)
    assert_same_logits(model, reference, 64)


def _root_only_timm():
    import functools

    from timm.models.vision_transformer_hybrid import HybridEmbed, _resnetv2

    return timm_vit(img_size=64, patch_size=4, embed_layer=functools.partial(HybridEmbed, backbone=_resnetv2(layers=())))


def test_convit_safetensors_matches_timm(tmp_path):
    reference = randomize_torch(timm_convit())
    path = save_state_dict(tmp_path / "convit.safetensors", reference)
    model = keras_vit.ConViT(**{**TINY, "num_layers": 3, "num_heads": 4}, num_gpsa_layers=2, preprocessing=None)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.exact
    assert_same_logits(model, reference, 32)


@pytest.mark.parametrize("big_vision,scanned", [(False, False), (True, False), (True, True)])
def test_vit_npz_matches_timm(tmp_path, big_vision, scanned):
    from timm.models.vision_transformer import _load_weights

    path = save_npz(tmp_path / "vit.npz", official_npz_arrays(big_vision=big_vision, scanned=scanned))
    # big_vision's class token has no position embedding: timm's `no_embed_class`.
    reference = timm_vit(no_embed_class=big_vision).eval()
    _load_weights(reference, path)
    model = keras_vit.VisionTransformer(**TINY, preprocessing=None)
    report = keras_vit.load_weights(model, path)
    assert not report.skipped and not report.resampled
    assert_same_logits(model, reference, 32)


def test_hybrid_npz_matches_timm(tmp_path):
    from timm.models.vision_transformer import _load_weights

    arrays = official_npz_arrays(patch=1, grid=8, resnet_stages=(1, 1))
    path = save_npz(tmp_path / "r50.npz", arrays)
    reference = timm_hybrid().eval()
    _load_weights(reference, path)
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": 64, "patch_size": 1}, resnet_stages=(1, 1), preprocessing=None)
    keras_vit.load_weights(model, path, strict=True)
    assert_same_logits(model, reference, 64)


def test_i21k_npz_with_pre_logits_loads_every_array(tmp_path):
    arrays = official_npz_arrays(pre_logits=24, classes=21)
    path = save_npz(tmp_path / "i21k.npz", arrays)
    model = keras_vit.VisionTransformer(**{**TINY, "num_classes": 21}, representation_size=24, preprocessing=None)
    report = keras_vit.load_weights(model, path, strict=True)
    assert report.exact
    np.testing.assert_array_equal(to_numpy(model.get_layer("pre_logits").kernel), arrays["pre_logits/kernel"])
    q = arrays["Transformer/encoderblock_1/MultiHeadDotProductAttention_1/query/kernel"].reshape(32, 32)
    np.testing.assert_array_equal(to_numpy(model.get_layer("encoderblock_1").attention.qkv.kernel)[:, :32], q)


def test_convit_gradients_match_timm(tmp_path):
    # The GPSA gates, positional projections and the rest train as in timm: the same
    # gradients for the same weights and loss (the equal logits alone would not show
    # a stop-gradient or a detached parameter). In training mode (no dropout or drop
    # path here), so the layer norms' hand-written CPU gradient is the one compared.
    # timm's gradients are put in our layout by the checkpoint converter (transposes,
    # reshapes and the qk fusion: linear maps, so they carry gradients too) and
    # compared element by element. Tolerance: float32 sums in another order.
    import torch

    reference = randomize_torch(timm_convit())
    path = save_state_dict(tmp_path / "convit.safetensors", reference)
    model = keras_vit.ConViT(
        **{**TINY, "num_layers": 3, "num_heads": 4}, num_gpsa_layers=2, preprocessing=None, drop_path_rate=0.0
    )
    keras_vit.load_weights(model, path, strict=True)
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (2, 32, 32, 3)).astype("float32")
    weights = rng.normal(size=(2, 10)).astype("float32")
    ours = parameter_gradients(model, images, weights, training=True)

    reference.zero_grad()
    logits = reference(torch.from_numpy(images.transpose(0, 3, 1, 2).copy()))
    (logits * torch.from_numpy(weights)).sum().backward()
    theirs = convert_checkpoint("safetensors", {name: p.grad.numpy() for name, p in reference.named_parameters()})
    expected = dict(theirs.weights)
    position = [name for name in ours if name.endswith("position_embedding")]
    assert len(position) == 1 and theirs.position is not None
    expected[position[0]] = theirs.position.reshape(ours[position[0]].shape)
    assert sorted(expected) == sorted(ours)
    gates = [name for name in ours if "gating" in name]
    assert len(gates) == 2 and all(np.abs(expected[name]).max() > 1e-4 for name in gates)  # the gates learn
    for name, gradient in ours.items():
        scale = np.abs(expected[name]).max()
        np.testing.assert_allclose(gradient, expected[name], atol=1e-5 + 1e-4 * scale, rtol=1e-4, err_msg=name)

"""The TPU path on an emulated TPU: Pallas's Splash kernel, called by keras_vit, computes what the CPU does.

Under the `emulated_tpu` fixture (tests/conftest.py, runs/tpu_emulator.py) JAX reports a
TPU and Pallas kernels run interpreted, so the step a TPU would trace is traced and run
here. Each model below is a small member of its family with ViT-B's head size (64), at the
token counts a user meets (ViT-B/16 at 224 and 384, DINOv2 at 224, registers, `gap`
pooling at 256 px and 512 px), on both sides of the kernel's 128-token threshold. The
reference is the same model and weights on the CPU path (`keras.ops.dot_product_attention`,
XLA's attention, which the rest of the suite checks against timm and numpy).
"""

import collections
import contextlib
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import attention, tpu_attention
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from tests.testing import set_random_weights

# float32: the kernel's online softmax sums in another order than XLA's softmax.
FEATURES_ATOL = 2e-4  # absolute, on features of magnitude ~1
GRADIENT_RTOL = 2e-3  # of each weight's largest gradient
# mixed_bfloat16: both paths round their activations to bfloat16 (8 bits of mantissa), in
# different places (the kernel keeps its running sums in float32, XLA its softmax): about two
# bfloat16 steps at 1 on the features, 5% of the largest gradient (measured: 0.004 and 1.6%).
BF16_FEATURES_ATOL = 2e-2
BF16_GRADIENT_RTOL = 5e-2

WIDTH = dict(hidden_size=128, num_layers=1, num_heads=2, mlp_dim=256)  # head size 64, as ViT-B


def vit(grid, **kwargs):
    return keras_vit.VisionTransformer(image_size=4 * grid, patch_size=4, include_top=False, **WIDTH, **kwargs)


def dinov2(grid, **kwargs):
    return keras_vit.DINOv2(image_size=4 * grid, patch_size=4, **WIDTH, **kwargs)


def hybrid(grid, **kwargs):
    # BiT's root alone (stride 4), then 1 x 1 patches of its feature map.
    return keras_vit.VisionTransformer(image_size=4 * grid, patch_size=1, resnet_stages=(), include_top=False,
                                       **WIDTH, **kwargs)


def masked_patch_prediction(grid, **kwargs):
    return MaskedPatchPrediction(vit(grid, **kwargs), seed=3)


# (name, builder, patch grid, token count). ViT with its class token or `gap`, DeiT's two
# tokens, DINOv2 with and without its 4 registers, masked patch prediction and a hybrid.
CASES = [
    ("vit_gap", lambda grid, **kw: vit(grid, pooling="gap", **kw), 7, 49),
    ("vit_token", vit, 8, 65),
    ("vit_gap", lambda grid, **kw: vit(grid, pooling="gap", **kw), 14, 196),
    ("vit_token", vit, 14, 197),
    ("deit_distilled", lambda grid, **kw: vit(grid, distillation=True, initialization="deit", **kw), 14, 198),
    ("vit_gap", lambda grid, **kw: vit(grid, pooling="gap", **kw), 16, 256),
    ("dinov2", dinov2, 16, 257),
    ("dinov2_registers", lambda grid, **kw: dinov2(grid, num_register_tokens=4, **kw), 15, 230),
    ("masked_patch_prediction", masked_patch_prediction, 14, 197),
    ("hybrid", hybrid, 12, 145),
    ("vit_token", vit, 24, 577),
    ("vit_gap", lambda grid, **kw: vit(grid, pooling="gap", **kw), 32, 1024),
]


def _first_output(outputs):
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


def step(model, images, weights):
    """The features and every trainable weight's gradient of `sum(features * weights)`, in training."""
    import jax

    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        outputs, _ = model.stateless_call(trainable, frozen, images, training=True)
        features = keras.ops.cast(_first_output(outputs), "float32")
        return keras.ops.sum(features * weights), features

    grad = jax.value_and_grad(loss, has_aux=True)
    (_, features), grads = jax.jit(grad)(trainable)
    program = str(jax.make_jaxpr(grad)(trainable))
    return np.asarray(features), [np.asarray(g, "float32") for g in grads], program


def both_paths(builder, grid, dtype, emulate):
    keras.utils.set_random_seed(0)
    model = builder(grid, dtype=dtype)
    set_random_weights(model, scale=0.2)
    rng = np.random.default_rng(1)
    images = rng.uniform(0, 255, (2, 4 * grid, 4 * grid, 3)).astype("float32")
    shape = _first_output(model(images[:1], training=False)).shape[1:]
    weights = rng.normal(size=(2, *shape)).astype("float32")
    results = {}
    for path in ("cpu", "tpu"):
        with emulate() if path == "tpu" else contextlib.nullcontext():
            attention._KERNELS.clear()
            results[path] = (*step(model, images, weights), set(attention._KERNELS))
    return model, results


def check_equal(model, results, features_atol, gradient_rtol):
    cpu_features, cpu_grads, _, _ = results["cpu"]
    tpu_features, tpu_grads, _, _ = results["tpu"]
    assert np.isfinite(tpu_features).all()
    np.testing.assert_allclose(tpu_features, cpu_features, atol=features_atol, rtol=0)
    for variable, cpu, tpu in zip(model.trainable_variables, cpu_grads, tpu_grads):
        scale = np.abs(cpu).max()
        assert scale > 0, f"{variable.path}: no gradient reaches it, so nothing is compared"
        np.testing.assert_allclose(tpu, cpu, atol=gradient_rtol * scale, rtol=0, err_msg=variable.path)


@pytest.mark.parametrize("name, builder, grid, tokens", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_float32_features_and_gradients_equal_the_cpu_path(name, builder, grid, tokens, emulated_tpu):
    model, results = both_paths(builder, grid, "float32", emulated_tpu)
    _, _, program, kernels = results["tpu"]
    assert results["cpu"][3] == {"keras"}
    if tokens >= tpu_attention.MIN_TOKENS:
        # Splash's forward kernel, and its two backward kernels (dq; dk and dv) in the gradient.
        assert kernels == {"splash (pallas)"}
        assert program.count("pallas_call") >= 3 and "splash" in program
    else:
        assert kernels == {f"xla (fewer than {tpu_attention.MIN_TOKENS} tokens)"}
        assert "pallas_call" not in program
    check_equal(model, results, FEATURES_ATOL, GRADIENT_RTOL)


@pytest.mark.parametrize("name, builder, grid, tokens", [CASES[3], CASES[7]], ids=["vit_token-197", "dinov2_registers-230"])
def test_bfloat16_features_and_gradients_stay_close_to_the_cpu_path(name, builder, grid, tokens, emulated_tpu):
    model, results = both_paths(builder, grid, "mixed_bfloat16", emulated_tpu)
    assert results["tpu"][3] == {"splash (pallas)"}
    check_equal(model, results, BF16_FEATURES_ATOL, BF16_GRADIENT_RTOL)


def _reference(query, key, value):
    logits = np.einsum("bqhd,bkhd->bhqk", query, key)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", probs, value)


def test_each_reason_for_xla_is_warned_once_and_the_kernels_are_counted(emulated_tpu, monkeypatch):
    monkeypatch.setattr(attention, "_KERNELS", collections.Counter())
    rng = np.random.default_rng(2)

    def inputs(length):
        return [rng.normal(size=(1, length, 2, 64)).astype("float32") for _ in range(3)]

    def refuse(*args):
        raise NotImplementedError("no kernel for this shape")

    with emulated_tpu(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for length in (49, 65, 49):
            attention.fused_attention(*inputs(length))
        splash_outputs = attention.fused_attention(*inputs(130))
        monkeypatch.setattr(tpu_attention, "_splash", refuse)
        for length in (130, 200):
            query, key, value = inputs(length)
            outputs = attention.fused_attention(query, key, value)
            np.testing.assert_allclose(np.asarray(outputs), _reference(query, key, value), atol=1e-5)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert "attention over 49 tokens runs as XLA's attention on the TPU" in messages[0]
    assert "Splash kernel refused attention of shape (1, 130, 2, 64) float32 (NotImplementedError: no kernel" \
        in messages[1]
    assert splash_outputs.shape == (1, 130, 2, 64)
    assert attention.attention_kernels() == {"xla (fewer than 128 tokens)": 3, "splash (pallas)": 1,
                                             "xla (splash refused: NotImplementedError)": 2}

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
import json
import os
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import attention, tpu_attention
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from tests.testing import set_random_weights
from tests.xla import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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
    program = jax.make_jaxpr(grad)(trainable)
    return np.asarray(features), [np.asarray(g, "float32") for g in grads], program


def primitives(program, within=None, inside=False):
    """The names of the primitives of a (closed) jaxpr and of every jaxpr nested in its equations.

    With `within`, only those nested inside an equation of that primitive (`"shard_map"`).
    """
    found = []
    jaxpr = getattr(program, "jaxpr", program)
    for equation in jaxpr.eqns:
        name = equation.primitive.name
        if within is None or inside:
            found.append(name)
        for value in equation.params.values():
            for sub in value if isinstance(value, (list, tuple)) else (value,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    found += primitives(sub, within, inside or name == within)
    return found


def both_paths(builder, grid, dtype, emulate, monkeypatch):
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
            monkeypatch.setattr(attention, "_KERNELS", collections.Counter())
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
def test_float32_features_and_gradients_equal_the_cpu_path(name, builder, grid, tokens, emulated_tpu, monkeypatch):
    model, results = both_paths(builder, grid, "float32", emulated_tpu, monkeypatch)
    _, _, program, kernels = results["tpu"]
    assert results["cpu"][3] == {"keras"}
    if tokens >= tpu_attention.MIN_TOKENS:
        # Splash's forward kernel, and its two backward kernels (dq; dk and dv) in the gradient.
        assert kernels == {"splash (pallas)"}
        assert primitives(program).count("pallas_call") >= 3 and "splash" in str(program)
    else:
        assert kernels == {f"xla (fewer than {tpu_attention.MIN_TOKENS} tokens)"}
        assert "pallas_call" not in primitives(program)
    check_equal(model, results, FEATURES_ATOL, GRADIENT_RTOL)


@pytest.mark.parametrize("name, builder, grid, tokens", [CASES[3], CASES[7]], ids=["vit_token-197", "dinov2_registers-230"])
def test_bfloat16_features_and_gradients_stay_close_to_the_cpu_path(name, builder, grid, tokens, emulated_tpu,
                                                                   monkeypatch):
    model, results = both_paths(builder, grid, "mixed_bfloat16", emulated_tpu, monkeypatch)
    assert results["tpu"][3] == {"splash (pallas)"}
    check_equal(model, results, BF16_FEATURES_ATOL, BF16_GRADIENT_RTOL)


def _reference(query, key, value):
    query, key, value = (np.asarray(x, "float64") for x in (query, key, value))
    logits = np.einsum("bqhd,bkhd->bhqk", query, key)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", probs, value)


@pytest.mark.parametrize("dtype, atol", [("float32", 5e-5), ("bfloat16", 3e-2)])
def test_the_kernel_attends_both_ways_unscaled_at_any_length(dtype, atol, emulated_tpu, monkeypatch):
    # Attention alone, against float64 numpy, on logits of spread ~8 (unit normal q and k over 64
    # channels): a causal mask, a scale or a leak of the padding would be off by about 1. In float32
    # logits of up to ~40 carry rounding of ~40 x 2^-24 into the exponentials (1.3e-5 seen at 256
    # tokens); in bfloat16 the tolerance is a few of its steps (2^-8) on outputs of magnitude ~1.
    monkeypatch.setattr(attention, "_KERNELS", collections.Counter())
    rng = np.random.default_rng(3)
    with emulated_tpu():
        for length in (128, 130, 197, 256):
            query, key, value = (keras.ops.cast(rng.normal(size=(2, length, 2, 64)), dtype) for _ in range(3))
            outputs = attention.fused_attention(query, key, value)
            assert outputs.dtype == query.dtype
            np.testing.assert_allclose(np.asarray(outputs, "float32"), _reference(query, key, value), atol=atol,
                                       err_msg=f"{length} tokens")
    assert attention.attention_kernels() == {"splash (pallas)": 4}


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
        monkeypatch.setenv("KERAS_VIT_TPU_ATTENTION", "xla")
        for length in (130, 200):
            attention.fused_attention(*inputs(length))
        monkeypatch.setenv("KERAS_VIT_TPU_ATTENTION", "splash")
        monkeypatch.setattr(tpu_attention, "_splash", refuse)
        for length in (130, 200):
            query, key, value = inputs(length)
            outputs = attention.fused_attention(query, key, value)
            np.testing.assert_allclose(np.asarray(outputs), _reference(query, key, value), atol=1e-5)
        monkeypatch.setenv("KERAS_VIT_TPU_ATTENTION", "pallas")
        with pytest.raises(ValueError, match=r"KERAS_VIT_TPU_ATTENTION must be one of splash, xla. "
                                             r"Received: KERAS_VIT_TPU_ATTENTION='pallas'"):
            attention.fused_attention(*inputs(130))
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 3, messages
    assert "attention over 49 tokens runs as XLA's attention on the TPU" in messages[0]
    assert "as KERAS_VIT_TPU_ATTENTION=xla asks" in messages[1]
    assert "Splash kernel refused attention of shape (1, 130, 2, 64) float32 (NotImplementedError: no kernel" \
        in messages[2]
    assert attention.attention_kernels() == {"xla (fewer than 128 tokens)": 3, "xla (KERAS_VIT_TPU_ATTENTION=xla)": 2,
                                             "xla (splash refused: NotImplementedError)": 2}


# Run in a process of its own over 8 CPU devices (XLA reads the device count when JAX starts).
_OVER_8_DEVICES = """
import json, keras, numpy as np, jax
from keras_vit.layers import attention
from runs.tpu_emulator import emulated_tpu
from tests.layers.test_tpu_attention import primitives, step, vit
from tests.testing import set_random_weights

model = vit(14)  # 197 tokens
set_random_weights(model, scale=0.2)
rng = np.random.default_rng(1)
images = rng.uniform(0, 255, (8, 56, 56, 3)).astype("float32")
weights = rng.normal(size=(8, 128)).astype("float32")
one_device = step(model, images, weights)
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices()))
with emulated_tpu(devices=False):
    features, grads, program = step(model, images, weights)
    unsplit = attention.fused_attention(*(rng.normal(size=(4, 130, 2, 64)).astype("float32") for _ in range(3)))
print(json.dumps({
    "devices": len(jax.devices()),
    "features": float(np.abs(features - one_device[0]).max()),
    "gradients": max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in zip(grads, one_device[1])),
    "kernels": attention.attention_kernels(),
    "inside": primitives(program, within="shard_map").count("pallas_call"),
    "outside": primitives(program).count("pallas_call"),
}))
"""


def test_over_8_devices_the_kernel_runs_per_device_in_shard_map_and_computes_what_one_device_does():
    # A Pallas TPU kernel cannot be partitioned by XLA: under a distribution over several devices,
    # the call must sit in shard_map, or a real TPU refuses to compile the step. Interpreted here, the
    # step would compile either way, so the program is read: the kernels are inside the shard_map.
    if keras.backend.backend() != "jax":
        pytest.skip("the TPU emulator is JAX's: runs in the suite's JAX phase")
    result = subprocess.run([sys.executable, "-c", _OVER_8_DEVICES], capture_output=True, text=True, cwd=ROOT,
                            timeout=300, env={**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": xla_flags(8)})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["devices"] == 8
    assert report["inside"] == report["outside"] >= 3  # every kernel, forward and backward, per device
    assert report["features"] <= FEATURES_ATOL and report["gradients"] <= GRADIENT_RTOL, report
    # 4 examples over 8 devices do not split: XLA's attention, named.
    assert report["kernels"]["splash (pallas)"] >= 1 and report["kernels"]["xla (batch not split over the devices)"] == 1

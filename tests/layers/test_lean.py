"""The accelerator path's lean backward passes, and how the code path is chosen.

References: float64 numpy (the function, and its gradient by central finite
differences, independent of the hand-written formulas), and the CPU path's
gradients (today's, Keras's own GELU and the CPU layer normalization) for whole
blocks. Tolerances: float32 products of O(1) values, 1e-4; bfloat16, whose 8-bit
significand rounds each product's operands to ~4e-3, 5e-2 relative to the
largest gradient of a weight.
"""

import collections

import keras
import numpy as np
import pytest

from keras_vit.layers import TransformerBlock, attention, attention_kernels
from keras_vit.layers.code_paths import code_path
from keras_vit.layers.lean import lean_gelu_dense, lean_layer_norm
from keras_vit.layers.mlp import MLPBlock
from tests.testing import (finite_difference_grads, np_gelu, np_layer_norm, np_softmax, parameter_gradients,
                           set_random_weights, to_numpy)


def _grads(function, arrays, weights):
    """Gradients of `sum(function(*arrays) * weights)` with respect to every array."""
    if keras.backend.backend() == "jax":
        import jax

        loss = lambda *a: (function(*a) * weights).sum()  # noqa: E731
        return [np.asarray(g) for g in jax.grad(loss, argnums=tuple(range(len(arrays))))(*arrays)]
    import tensorflow as tf

    tensors = [tf.constant(a) for a in arrays]
    with tf.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        loss = tf.reduce_sum(function(*tensors) * weights)
    return [g.numpy() for g in tape.gradient(loss, tensors)]


@pytest.mark.parametrize("value, expected", [("cpu", "cpu"), ("accelerator", "accelerator"), ("ACCELERATOR ", "accelerator")])
def test_the_environment_variable_chooses_the_path(monkeypatch, value, expected):
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", value)
    assert code_path() == expected


def test_auto_follows_the_devices(monkeypatch):
    # The test machines have no accelerator.
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", "auto")
    assert code_path() == "cpu"
    monkeypatch.delenv("KERAS_VIT_CODE_PATH")
    assert code_path() == "cpu"


def test_an_unknown_path_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", "gpu")
    with pytest.raises(ValueError, match=r"KERAS_VIT_CODE_PATH must be one of auto, cpu, accelerator\. Received: KERAS_VIT_CODE_PATH='gpu'"):
        code_path()


@pytest.mark.parametrize("offset", [0.0, 50.0])
def test_lean_layer_norm_and_its_gradients_equal_numpy(offset):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(2, 3, 6)) + offset).astype("float32")
    gamma = rng.normal(1.0, 0.5, 6).astype("float32")
    beta = rng.normal(0.0, 0.5, 6).astype("float32")
    weights = rng.normal(size=x.shape).astype("float32")
    np.testing.assert_allclose(
        to_numpy(lean_layer_norm(x, gamma, beta, 1e-5)), np_layer_norm(x.astype("float64"), gamma, beta, 1e-5), atol=1e-4
    )
    expected = finite_difference_grads(lambda *a: np_layer_norm(*a, 1e-5), [x, gamma, beta], weights)
    actual = _grads(lambda *a: lean_layer_norm(*a, 1e-5), [x, gamma, beta], weights)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, atol=2e-4, rtol=1e-4)


def test_lean_layer_norm_keeps_the_input_dtype():
    x = keras.ops.cast(np.random.default_rng(1).normal(3.0, 1.0, (4, 16)), "bfloat16")
    outputs = lean_layer_norm(x, np.ones(16, "float32"), np.zeros(16, "float32"), 1e-6)
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    # Normalized in float32, then rounded once: within bfloat16's half-ulp of numpy's.
    expected = np_layer_norm(to_numpy(keras.ops.cast(x, "float32")).astype("float64"), 1.0, 0.0, 1e-6)
    np.testing.assert_allclose(to_numpy(keras.ops.cast(outputs, "float32")), expected, atol=2e-2)


@pytest.mark.parametrize("use_bias", [True, False])
def test_lean_gelu_dense_and_its_gradients_equal_numpy(use_bias):
    rng = np.random.default_rng(2)
    h = rng.normal(0.0, 1.5, (3, 5)).astype("float32")
    kernel = rng.normal(size=(5, 2)).astype("float32")
    bias = rng.normal(size=(2,)).astype("float32")
    weights = rng.normal(size=(3, 2)).astype("float32")
    arrays = [h, kernel, bias] if use_bias else [h, kernel]

    def reference(h, kernel, bias=0.0):
        return np_gelu(h) @ kernel + bias

    def lean(*a):
        return lean_gelu_dense(*a) if use_bias else lean_gelu_dense(*a, None)

    np.testing.assert_allclose(to_numpy(lean(*arrays)), reference(*arrays), atol=1e-5)
    for a, e in zip(_grads(lean, arrays, weights), finite_difference_grads(reference, arrays, weights)):
        np.testing.assert_allclose(a, e, atol=2e-4, rtol=1e-4)


def _block_gradients(path, monkeypatch, dtype, images, seed=3, **kwargs):
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", path)
    block = TransformerBlock(num_heads=2, mlp_dim=32, dtype=dtype, name="block", **kwargs)
    block.build(images.shape)
    set_random_weights(block, seed=seed)
    weights = np.random.default_rng(seed).normal(size=images.shape).astype("float32")
    return parameter_gradients(block, images, weights, training=True)


def test_block_gradients_equal_the_cpu_paths_in_float32(monkeypatch):
    images = np.random.default_rng(4).normal(size=(2, 5, 16)).astype("float32")
    cpu = _block_gradients("cpu", monkeypatch, "float32", images)
    accelerator = _block_gradients("accelerator", monkeypatch, "float32", images)
    assert cpu.keys() == accelerator.keys()
    for name in cpu:
        np.testing.assert_allclose(accelerator[name], cpu[name], atol=1e-4, rtol=1e-4, err_msg=name)


def test_block_gradients_equal_the_cpu_paths_in_mixed_bfloat16(monkeypatch):
    images = np.random.default_rng(5).normal(size=(2, 5, 16)).astype("float32")
    cpu = _block_gradients("cpu", monkeypatch, "mixed_bfloat16", images)
    accelerator = _block_gradients("accelerator", monkeypatch, "mixed_bfloat16", images)
    reference = _block_gradients("cpu", monkeypatch, "float32", images)
    for name in cpu:
        scale = np.abs(reference[name]).max()
        # Both bfloat16 paths are near the float32 gradient, and near each other.
        for grads in (cpu, accelerator):
            np.testing.assert_allclose(grads[name], reference[name], atol=5e-2 * scale, err_msg=name)
        np.testing.assert_allclose(accelerator[name], cpu[name], atol=5e-2 * scale, err_msg=name)


def test_the_mlp_takes_the_lean_path_only_where_it_computes_the_same(monkeypatch):
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", "accelerator")
    mlp = MLPBlock(8)
    mlp.build((None, 4))
    assert mlp._lean(training=True)
    assert not mlp._lean(training=False)
    dropped = MLPBlock(8, dropout_rate=0.1)
    dropped.build((None, 4))
    assert not dropped._lean(training=True)  # its mask sits between GELU and fc2
    monkeypatch.setenv("KERAS_VIT_CODE_PATH", "cpu")
    assert not mlp._lean(training=True)


def _attention_inputs(dtype="float32"):
    rng = np.random.default_rng(6)
    return [keras.ops.cast(rng.normal(size=(2, 7, 2, 8)), dtype) for _ in range(3)]


def test_a_refused_cudnn_kernel_warns_with_the_reason_and_runs_xlas(monkeypatch):
    # On a CPU cuDNN refuses every call: the GPU branch's refusal, exercised without a GPU.
    if keras.backend.backend() != "jax":
        pytest.skip("cuDNN's fused attention is asked for on JAX only")
    monkeypatch.setattr(attention, "device_platform", lambda: "gpu")
    monkeypatch.setattr(attention, "_KERNELS", collections.Counter())
    query, key, value = _attention_inputs()
    with pytest.warns(RuntimeWarning, match=r"cuDNN's fused attention refused this attention \(query \(2, 7, 2, 8\)"):
        outputs = attention.fused_attention(query, key, value)
    assert attention_kernels() == {"xla (cuDNN refused)": 1}
    probs = np_softmax(np.einsum("bqhd,bkhd->bhqk", *(to_numpy(t) for t in (query, key))))
    np.testing.assert_allclose(to_numpy(outputs), np.einsum("bhqk,bkhd->bqhd", probs, to_numpy(value)), atol=1e-5)


def test_attention_dropout_on_an_accelerator_says_it_takes_the_explicit_path(monkeypatch):
    monkeypatch.setattr(attention, "_KERNELS", collections.Counter())
    layer = attention.MultiHeadSelfAttention(num_heads=2, attention_dropout_rate=0.1)
    tokens = np.random.default_rng(7).normal(size=(2, 5, 8)).astype("float32")
    layer(tokens, training=True)  # on the CPU: no warning, nothing fused is lost
    layer(tokens, training=False)
    assert attention_kernels() == {"keras": 1}
    monkeypatch.setattr(attention, "device_platform", lambda: "tpu")
    with pytest.warns(RuntimeWarning, match=r"attention_dropout_rate=0.1\), which no fused attention kernel"):
        layer(tokens, training=True)
    assert attention_kernels() == {"keras": 1, "explicit (attention dropout)": 1}


@pytest.mark.skipif(
    keras.backend.backend() != "jax" or attention.device_platform() != "gpu", reason="needs JAX on a GPU"
)
def test_on_a_gpu_the_compiled_training_step_has_cudnns_fused_attention():
    import jax

    import keras_vit

    model = keras_vit.ViT_Ti16(image_size=32, num_classes=10, dtype="mixed_bfloat16")
    images = np.zeros((4, 32, 32, 3), "float32")
    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]

    def loss(trainable):
        logits, _ = model.stateless_call(trainable, frozen, images, training=True)
        return keras.ops.mean(keras.ops.cast(logits, "float32"))

    for step in (jax.jit(jax.grad(loss)), jax.jit(loss)):
        assert "cudnn$fmha" in step.lower(trainable).compile().as_text()


def test_fit_takes_the_same_step_on_both_paths(monkeypatch):
    # The whole path as the trainer runs it on an accelerator: `fit` compiled with XLA (TensorFlow's
    # graph, JAX's jit) in mixed_bfloat16; float32 equality is checked block by block above.
    dtype = "mixed_bfloat16"
    import keras_vit

    images = np.random.default_rng(8).normal(size=(4, 16, 16, 3)).astype("float32")
    labels = np.arange(4) % 3
    steps = {}
    for path in ("cpu", "accelerator"):
        monkeypatch.setenv("KERAS_VIT_CODE_PATH", path)
        keras.utils.set_random_seed(0)
        model = keras_vit.VisionTransformer(image_size=16, patch_size=8, hidden_size=32, num_layers=2, num_heads=2,
                                            mlp_dim=64, num_classes=3, dtype=dtype)
        model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=True,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        before = [to_numpy(v) for v in model.trainable_variables]
        model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
        steps[path] = [to_numpy(v) - b for v, b in zip(model.trainable_variables, before)]
    tolerance = 2e-3
    for cpu, accelerator in zip(steps["cpu"], steps["accelerator"]):
        assert np.isfinite(accelerator).all()
        np.testing.assert_allclose(accelerator, cpu, atol=tolerance * max(1.0, np.abs(cpu).max()))

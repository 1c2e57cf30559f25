"""LayerNormalization: Keras's layer normalization, with a hand-written gradient in training.

Each training test runs on both code paths (`keras_vit.layers.code_path`): the
CPU's `_layer_norm_last_axis` and the accelerators' `lean_layer_norm`.

References: a float64 numpy layer norm, and its gradient by central finite
differences (independent of the hand-written formula under test).
"""

import keras
import numpy as np
import pytest

from keras_vit.layers import LayerNormalization, TransformerBlock
from keras_vit.layers import normalization
from tests.testing import (check_layer, finite_difference_grads, np_layer_norm, parameter_gradients,
                           set_random_weights, to_numpy)


@pytest.fixture(params=["cpu", "accelerator"])
def fast_calls(request, monkeypatch):
    """Chooses a code path; returns the list of calls that took its hand-written function."""
    calls = []
    name = {"cpu": "_layer_norm_last_axis", "accelerator": "lean_layer_norm"}[request.param]
    compute = getattr(normalization, name)

    def recorded(*args):
        calls.append(args[0].shape)
        return compute(*args)

    monkeypatch.setenv("KERAS_VIT_CODE_PATH", request.param)
    monkeypatch.setattr(normalization, name, recorded)
    return calls


def _value_and_grads(layer, x, weights, training):
    """`sum(layer(x) * weights)`'s gradients with respect to x, gamma and beta."""
    if keras.backend.backend() == "jax":
        import jax

        # `stateless_call` passes `training` on to `call`, which Keras's own layer lacks.
        kwargs = {"training": training} if isinstance(layer, LayerNormalization) else {}

        def loss(x, gamma, beta):
            outputs, _ = layer.stateless_call([gamma, beta], [], x, **kwargs)
            return (outputs * weights).sum()

        grads = jax.grad(loss, argnums=(0, 1, 2))(x, layer.gamma.value, layer.beta.value)
        return [np.asarray(g) for g in grads]
    import tensorflow as tf

    v = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(v)
        loss = tf.reduce_sum(layer(v, training=training) * weights)
    grads = tape.gradient(loss, [v, layer.gamma.value, layer.beta.value])
    return [g.numpy() for g in grads]


def _layer(channels, seed=0, **kwargs):
    layer = LayerNormalization(**kwargs)
    layer.build((None, channels))
    rng = np.random.default_rng(seed)
    gamma, beta = rng.normal(1.0, 0.5, (channels,)), rng.normal(0.0, 0.5, (channels,))
    layer.set_weights([gamma.astype("float32"), beta.astype("float32")])
    return layer


def test_config_round_trip_and_shapes():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    check_layer(LayerNormalization, {"epsilon": 1e-6}, x)


def test_takes_the_hand_written_path_only_in_training(fast_calls):
    layer = _layer(8)
    x = np.zeros((2, 8), "float32")
    layer(x, training=True)
    assert len(fast_calls) == 1
    for other in (
        lambda: layer(x, training=False),
        lambda: layer(x),
        lambda: LayerNormalization(center=False)(x, training=True),
        lambda: LayerNormalization(axis=0)(x, training=True),
    ):
        other()
    assert len(fast_calls) == 1


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("offset, tolerance", [(0.0, 1e-5), (300.0, 1e-4)])
def test_forward_equals_numpy(fast_calls, training, offset, tolerance):
    # Far from zero (|mean| >> std) the variance must be centred: E[x^2] - E[x]^2
    # would cancel about log2(300^2) of float32's 24 bits. What remains is float32
    # rounding of terms of size ~300 (ulp 3e-5): the mean in the hand-written path,
    # `x * inv - mean * inv` in Keras's (inference); measured up to 4.1e-5.
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(3, 7, 12)) + offset).astype("float32")
    layer = _layer(12, epsilon=1e-5)
    gamma, beta = (to_numpy(w) for w in (layer.gamma, layer.beta))
    expected = np_layer_norm(x.astype("float64"), gamma, beta, 1e-5)
    np.testing.assert_allclose(to_numpy(layer(x, training=training)), expected, atol=tolerance)
    assert len(fast_calls) == int(training)


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 6), (4, 2, 3, 5)])
def test_gradients_equal_finite_differences(fast_calls, shape):
    rng = np.random.default_rng(2)
    x = rng.normal(0.5, 2.0, size=shape).astype("float32")
    weights = rng.normal(size=shape).astype("float32")
    layer = _layer(shape[-1], seed=3, epsilon=1e-5)
    gamma, beta = (to_numpy(w) for w in (layer.gamma, layer.beta))
    expected = finite_difference_grads(lambda *a: np_layer_norm(*a, 1e-5), [x, gamma, beta], weights)
    # float32 gradients of O(1) values against float64 differences.
    for actual, reference in zip(_value_and_grads(layer, x, weights, True), expected):
        np.testing.assert_allclose(actual, reference, atol=2e-4, rtol=1e-4)
    assert fast_calls


def test_training_gradients_equal_keras_layer_norm(fast_calls):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 9, 32)).astype("float32")
    weights = rng.normal(size=x.shape).astype("float32")
    ours = _layer(32, seed=5, epsilon=1e-6)
    reference = keras.layers.LayerNormalization(epsilon=1e-6)
    reference.build((None, 32))
    reference.set_weights(ours.get_weights())
    for a, b in zip(_value_and_grads(ours, x, weights, True), _value_and_grads(reference, x, weights, True)):
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-5)
    assert fast_calls


def test_mixed_precision_normalizes_in_float32(fast_calls):
    x = np.random.default_rng(6).normal(3.0, 1.0, size=(2, 4, 16)).astype("float32")
    layer = LayerNormalization(dtype="mixed_bfloat16")
    outputs = layer(keras.ops.cast(x, "bfloat16"), training=True)
    assert fast_calls
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    expected = np_layer_norm(to_numpy(keras.ops.cast(keras.ops.cast(x, "bfloat16"), "float32")), 1.0, 0.0, 1e-3)
    np.testing.assert_allclose(to_numpy(keras.ops.cast(outputs, "float32")), expected, atol=2e-2)


def test_other_axes_are_keras_layer_norm():
    x = np.random.default_rng(7).normal(size=(2, 5, 6)).astype("float32")
    layer = LayerNormalization(axis=1)
    keras_layer = keras.layers.LayerNormalization(axis=1)
    np.testing.assert_allclose(to_numpy(layer(x, training=True)), to_numpy(keras_layer(x)), atol=1e-6)


def test_weight_files_of_keras_layer_norm_load(tmp_path):
    # A model stores its top-level layers under their class names: a file written
    # with Keras's layer (every keras_vit model before this one) must still load.
    def model(norm):
        inputs = keras.Input((5, 6))
        return keras.Model(inputs, keras.layers.Dense(3)(norm(epsilon=1e-6)(inputs)))

    old, new = model(keras.layers.LayerNormalization), model(LayerNormalization)
    for layer in old.layers[1:]:
        set_random_weights(layer)
    old.save_weights(tmp_path / "old.weights.h5")
    new.load_weights(tmp_path / "old.weights.h5")
    x = np.random.default_rng(8).normal(size=(2, 5, 6)).astype("float32")
    np.testing.assert_allclose(to_numpy(new(x)), to_numpy(old(x)), atol=1e-6)


def test_remat_blocks_keep_the_hand_written_path(fast_calls, monkeypatch):
    # `tf.recompute_grad` reruns the block after the model's training context has
    # ended: the block must pass `training` on, or the rerun would fall back.
    block = TransformerBlock(num_heads=2, mlp_dim=16, remat=True)
    x = np.random.default_rng(9).normal(size=(2, 5, 8)).astype("float32")
    block(x)
    decisions = []
    decide = LayerNormalization._training_path

    def recorded(self, inputs, training):
        decisions.append(decide(self, inputs, training))
        return decisions[-1]

    monkeypatch.setattr(LayerNormalization, "_training_path", recorded)
    parameter_gradients(block, x, np.ones_like(x), training=True)
    assert len(decisions) >= 2 and all(decisions), decisions

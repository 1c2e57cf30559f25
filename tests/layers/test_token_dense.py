"""dense_on_tokens: a Dense layer over flattened tokens, against numpy."""

import keras
import numpy as np
import pytest

from keras_vit.layers.token_dense import dense_on_tokens
from tests.testing import ATOL, to_numpy


def _dense(units, width):
    dense = keras.layers.Dense(units, bias_initializer="random_normal")
    dense.build((None, width))
    return dense


@pytest.mark.parametrize("shape", [(3, 8), (2, 5, 8), (2, 3, 4, 8)])
def test_dense_on_tokens_matches_numpy(shape):
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    dense = _dense(6, 8)
    kernel, bias = to_numpy(dense.kernel), to_numpy(dense.bias)
    expected = x.astype("float64") @ kernel + bias
    np.testing.assert_allclose(to_numpy(dense_on_tokens(dense, x)), expected, atol=ATOL)


def test_dense_on_tokens_keeps_unknown_batch_symbolic():
    dense = _dense(6, 8)
    outputs = dense_on_tokens(dense, keras.Input((5, 8)))
    assert tuple(outputs.shape) == (None, 5, 6)
    outputs = dense_on_tokens(dense, keras.Input((3, 4, 8)))
    assert tuple(outputs.shape) == (None, 3, 4, 6)


def test_dense_on_tokens_kernel_gradient_sums_over_every_token():
    # d/dW sum(y * g) = sum over batch and tokens of x^T g: the weight gradient of
    # the flattened product covers every token of every example.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    g = rng.normal(size=(2, 5, 6)).astype("float32")
    dense = _dense(6, 8)
    expected = np.einsum("btd,btu->du", x.astype("float64"), g)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(dense_on_tokens(dense, x) * g)
        grad = tape.gradient(loss, dense.kernel.value)
    elif backend == "jax":
        import jax

        def loss(kernel):
            with keras.StatelessScope(state_mapping=[(dense.kernel, kernel)]):
                return (dense_on_tokens(dense, x) * g).sum()

        grad = jax.grad(loss)(dense.kernel.value)
    else:
        raise ValueError(f"No gradient helper for this backend. Received: backend={backend}")
    np.testing.assert_allclose(to_numpy(grad), expected, atol=ATOL)

"""SeparableMaxPooling2D: MaxPooling2D's output and gradient, computed from strided slices."""

import keras
import numpy as np
import pytest

from keras_vit.layers import SeparableMaxPooling2D
from tests.testing import check_layer, to_numpy


def numpy_max_pool(x, pool, stride, padding):
    """Plain-numpy max pooling with TensorFlow's padding rule (the extra cell after)."""
    batch, height, width, channels = x.shape
    pads, sizes = [], []
    for size, p, s in zip((height, width), pool, stride):
        if padding == "valid":
            out, total = (size - p) // s + 1, 0
        else:
            out = -(-size // s)
            total = max((out - 1) * s + p - size, 0)
        pads.append((total // 2, total - total // 2))
        sizes.append(out)
    padded = np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=-np.inf)
    out = np.empty((batch, *sizes, channels), x.dtype)
    for i in range(sizes[0]):
        for j in range(sizes[1]):
            window = padded[:, i * stride[0] : i * stride[0] + pool[0], j * stride[1] : j * stride[1] + pool[1]]
            out[:, i, j] = window.max(axis=(1, 2))
    return out


def gradient(layer, x, weights):
    """d sum(layer(x) * weights) / dx, on the current backend."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(lambda v: (layer(v) * weights).sum())(x))
    import tensorflow as tf

    v = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(v)
        y = tf.reduce_sum(layer(v) * weights)
    return tape.gradient(y, v).numpy()


@pytest.mark.parametrize(
    "size, pool, strides, padding",
    [((16, 16), 3, 2, "same"), ((15, 13), 3, 2, "same"), ((14, 9), 2, None, "valid"),
     ((11, 12), (3, 2), (2, 1), "same"), ((9, 10), 3, 2, "valid")],
)
def test_equals_max_pooling_forward_and_backward(size, pool, strides, padding):
    # Distinct values: no ties, so the gradient's routing is unique.
    x = np.random.default_rng(0).permutation(2 * size[0] * size[1] * 3).reshape(2, *size, 3).astype("float32")
    x = x / x.size - 0.5
    layer = SeparableMaxPooling2D(pool, strides, padding)
    pair = (pool, pool) if isinstance(pool, int) else pool
    stride = pair if strides is None else ((strides, strides) if isinstance(strides, int) else strides)
    expected = numpy_max_pool(x, pair, stride, padding)
    output = check_layer(SeparableMaxPooling2D, dict(pool_size=pool, strides=strides, padding=padding), x)
    np.testing.assert_array_equal(output, expected)
    reference = keras.layers.MaxPooling2D(pool, strides, padding)
    np.testing.assert_array_equal(to_numpy(reference(x)), expected)
    weights = np.random.default_rng(1).normal(size=expected.shape).astype("float32")
    np.testing.assert_allclose(gradient(layer, x, weights), gradient(reference, x, weights), atol=1e-6)


def test_ties_send_the_gradient_to_one_input():
    layer = SeparableMaxPooling2D(3, 2, "same")
    x = np.zeros((1, 4, 4, 1), "float32")  # every window is a tie
    grad = gradient(layer, x, np.ones((1, 2, 2, 1), "float32"))
    # Each output's unit gradient reaches exactly one input, as MaxPooling2D's does.
    assert grad.sum() == pytest.approx(4.0) and set(np.unique(grad)) <= {0.0, 1.0, 2.0, 3.0, 4.0}


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"`padding` must be 'valid' or 'same'. Received: padding='full'"):
        SeparableMaxPooling2D(3, 2, "full")
    with pytest.raises(ValueError, match="pool_size"):
        SeparableMaxPooling2D(0)

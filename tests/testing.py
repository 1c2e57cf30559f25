"""Test helpers: generic layer checks and plain-numpy references of the equations."""

import inspect
import math

import keras
import numpy as np

# Float32 tolerance for comparisons with the numpy references: the layers chain a
# few matmuls and softmaxes of O(1) values, whose float32 rounding stays ~1e-6.
ATOL = 1e-5


def to_numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def check_layer(layer_cls, init_kwargs, inputs, call_kwargs=None):
    """Checks what every keras_vit layer must do, and returns its eager output.

    - `get_config` holds exactly the `__init__` arguments (plus the base ones);
    - `from_config` and registered (de)serialization rebuild a layer that, given
      the same weights, computes identical outputs;
    - `compute_output_shape` and the symbolic call agree with the eager shape.
    """
    call_kwargs = call_kwargs or {}
    layer = layer_cls(**init_kwargs)
    output = to_numpy(layer(inputs, **call_kwargs))

    config = layer.get_config()
    own = set(config) - set(keras.layers.Layer().get_config())
    declared = _init_arguments(layer_cls)
    # A subclass of a Keras layer (StandardizedConv2D) also takes its parent's arguments.
    accepted = set().union(*(_init_arguments(c) for c in layer_cls.__mro__ if c is not object))
    assert declared <= own <= accepted, f"get_config keys {own}, __init__ arguments {declared}"

    for clone in (
        layer_cls.from_config(config),
        keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer)),
    ):
        assert type(clone) is layer_cls
        clone(inputs, **call_kwargs)
        clone.set_weights(layer.get_weights())
        np.testing.assert_array_equal(to_numpy(clone(inputs, **call_kwargs)), output)

    assert tuple(layer.compute_output_shape(inputs.shape)) == output.shape
    symbolic = layer(keras.KerasTensor((None, *inputs.shape[1:])), **call_kwargs)
    assert tuple(symbolic.shape) == (None, *output.shape[1:])
    return output


def _init_arguments(cls):
    return set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs"}


def set_random_weights(layer, seed=0, scale=0.5):
    """Replaces every weight by uniform noise, so no zero init hides a bug."""
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.uniform(-scale, scale, w.shape).astype(w.dtype) for w in layer.get_weights()]
    )


def parameter_gradients(model, images, weights, training=False):
    """`{variable path: d sum(model(images) * weights) / d variable}` on the current backend."""
    variables = model.trainable_variables
    if keras.backend.backend() == "jax":
        import jax

        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(values):
            logits, _ = model.stateless_call(values, non_trainable, images, training=training)
            return (logits * weights).sum()

        grads = jax.jit(jax.grad(loss))([v.value for v in variables])
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(images, training=training) * weights)
        grads = tape.gradient(loss, variables)
    return {v.path: to_numpy(g) for v, g in zip(variables, grads)}


# ---- numpy references ---------------------------------------------------------


def finite_difference_grads(function, arrays, weights, step=1e-6):
    """Gradients of `sum(function(*arrays) * weights)` by central differences in float64, one coordinate at a time.

    An independent reference for hand-written gradients: `function` is a numpy one.
    """
    arrays = [np.asarray(a).astype("float64") for a in arrays]
    grads = []
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plus[i][index] += step
            minus[i][index] -= step
            grad[index] = ((function(*plus) - function(*minus)) * weights).sum() / (2 * step)
        grads.append(grad)
    return grads


def np_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def np_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def np_patches(images, ph, pw):
    """Patches by explicit loops: patch (i, j) flattened in (row, col, channel) order."""
    b, h, w, c = images.shape
    out = np.zeros((b, h // ph, w // pw, ph * pw * c), images.dtype)
    for i in range(h // ph):
        for j in range(w // pw):
            out[:, i, j] = images[:, i * ph : (i + 1) * ph, j * pw : (j + 1) * pw].reshape(b, -1)
    return out


def np_conv2d_same(x, kernel, stride):
    """TF/Flax "SAME" convolution by loops (padding split with the extra at the end)."""
    b, h, w, _ = x.shape
    kh, kw, _, cout = kernel.shape
    oh, ow = -(-h // stride), -(-w // stride)
    pad_h = max((oh - 1) * stride + kh - h, 0)
    pad_w = max((ow - 1) * stride + kw - w, 0)
    x = np.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)))
    out = np.zeros((b, oh, ow, cout), np.float64)
    for i in range(oh):
        for j in range(ow):
            window = x[:, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, i, j] = np.einsum("bhwc,hwco->bo", window, kernel)
    return out


def np_group_norm(x, groups, gamma, beta, eps):
    b, h, w, c = x.shape
    g = x.reshape(b, h, w, groups, c // groups)
    mean = g.mean(axis=(1, 2, 4), keepdims=True)
    var = g.var(axis=(1, 2, 4), keepdims=True)
    g = (g - mean) / np.sqrt(var + eps)
    return g.reshape(b, h, w, c) * gamma + beta


def np_standardize(kernel, eps):
    mean = kernel.mean(axis=(0, 1, 2), keepdims=True)
    std = kernel.std(axis=(0, 1, 2), keepdims=True)
    return (kernel - mean) / (std + eps)


def ks_critical(n, m, alpha=0.001):
    """The two-sample Kolmogorov-Smirnov statistic's critical value (asymptotic) at `alpha`.

    0.0616 for 2,000 + 2,000 draws, 0.0872 for 1,000 + 1,000, at alpha = 0.001.
    """
    return math.sqrt(-math.log(alpha / 2) / 2) * math.sqrt((n + m) / (n * m))

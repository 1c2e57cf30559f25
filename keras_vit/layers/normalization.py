"""Layer normalization with a training path for each kind of device.

On the accelerator path (`keras_vit.layers.code_path`) training takes
`keras_vit.layers.lean.lean_layer_norm`, whose backward pass keeps the input in
the compute dtype and two float32 numbers per row. On the CPU path it takes
`_layer_norm_last_axis`, below, for XLA:CPU's sake:
`keras.layers.LayerNormalization` differentiated by XLA:CPU leaves the row
statistics and the scale/offset gradients to XLA's reductions, into which XLA
fuses whatever computed their operands (a residual sum, a patch-merging
transpose, a stochastic-depth mask), and a column sum read through a transpose
runs at a fraction of memory speed. `LayerNormalization` here writes the layer's
gradient out by hand and takes every row statistic as a matrix-vector product
with a constant vector: products are fusion boundaries on XLA:CPU, so the
normalized tensor is formed once, in its own layout, and the remaining column
sums read it contiguously.
"""

import keras
from keras import ops

from keras_vit.layers.code_paths import code_path
from keras_vit.layers.lean import lean_layer_norm, upstream_gradient


def _layer_norm_last_axis(x, gamma, beta, epsilon):
    """`gamma * (x - mean) / sqrt(var + epsilon) + beta` over the last axis, its gradient by hand.

    Args:
        x: float32 tensor `(..., C)` with a static `C`.
        gamma: float32 tensor `(C,)`.
        beta: float32 tensor `(C,)`.
        epsilon: float.

    Returns:
        float32 tensor of the shape of `x`.
    """
    channels = x.shape[-1]

    @ops.custom_gradient
    def normalize(x, gamma, beta):
        shape = ops.shape(x)
        rows = ops.reshape(x, (-1, channels))
        average = ops.full((channels, 1), 1.0 / channels, dtype=rows.dtype)
        mean = ops.matmul(rows, average)
        centred = rows - mean
        # The centred second moment: E[x^2] - E[x]^2 would cancel for inputs far from zero.
        inverse_std = ops.rsqrt(ops.matmul(centred * centred, average) + epsilon)
        normalized = centred * inverse_std
        outputs = ops.reshape(normalized * gamma + beta, shape)

        def grad(*args, upstream=None):
            upstream = ops.reshape(upstream_gradient(args, upstream), (-1, channels))
            scaled = upstream * gamma
            # d/dx of (x - mean) * inverse_std, applied to `scaled`.
            inputs_grad = inverse_std * (
                scaled
                - ops.matmul(scaled, average)
                - normalized * ops.matmul(scaled * normalized, average)
            )
            gamma_grad = ops.sum(upstream * normalized, axis=0)
            beta_grad = ops.sum(upstream, axis=0)
            return ops.reshape(inputs_grad, shape), gamma_grad, beta_grad

        return outputs, grad

    return normalize(x, gamma, beta)


@keras.saving.register_keras_serializable(package="keras_vit")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis, leaner to train on each device.

    The same layer, the same weights (`gamma`, `beta`) and the same arguments as
    Keras's, under the same class name, so that weight files and checkpoints
    written with Keras's layer (where a model stores its layers under their
    class names) load into it. In training, with the defaults `axis=-1`,
    `center=True`, `scale=True` and `rms_scaling=False`, on JAX or TensorFlow,
    it computes the same function with its gradient written by hand, one way
    per code path (`keras_vit.layers.code_path`): on the CPU path
    `_layer_norm_last_axis` (the centred variance, row statistics as
    matrix-vector products; see the module docstring), on the accelerator path
    `lean_layer_norm` (keeps the input in the compute dtype, not float32 copies).
    Everywhere else (inference, so every export; other arguments) it is Keras's
    layer as it is. Float16 and bfloat16 inputs are normalized in float32, as
    Keras does.

    Args:
        axis: int or list of ints. The normalized axes. Defaults to -1.
        epsilon: float. Added to the variance. Defaults to 1e-3, as in Keras.
        center: bool. Whether to add the learned offset `beta`. Defaults to `True`.
        scale: bool. Whether to multiply by the learned scale `gamma`. Defaults
            to `True`.
        rms_scaling: bool. Deprecated by Keras (use `keras.layers.RMSNormalization`);
            accepted because Keras's config holds it. Defaults to `False`.
        **kwargs: The other arguments of `keras.layers.LayerNormalization`
            (initializers, regularizers, constraints) and the base layer's.

    Call arguments:
        inputs: Tensor `(..., C)`.
        training: bool. Whether the layer is being trained.
    """

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, rms_scaling=False, **kwargs):
        super().__init__(
            axis=axis, epsilon=epsilon, center=center, scale=scale, rms_scaling=rms_scaling, **kwargs
        )

    def _training_path(self, inputs, training):
        """`"cpu"`, `"accelerator"` or None (Keras's layer as it is) for this call."""
        axis = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
        last_axis = list(axis) in ([-1], [len(inputs.shape) - 1])
        plain = (
            bool(training)
            and last_axis
            and inputs.shape[-1] is not None
            and self.center
            and self.scale
            and not self.rms_scaling
            and keras.backend.backend() in ("jax", "tensorflow")
        )
        return code_path() if plain else None

    def call(self, inputs, training=None):
        path = self._training_path(inputs, training)
        if path is None:
            return super().call(inputs)
        if path == "accelerator":
            # The input stays in the compute dtype for the backward pass (`lean_layer_norm`).
            return lean_layer_norm(
                ops.cast(inputs, self.compute_dtype), self.gamma, self.beta, self.epsilon
            )
        outputs = _layer_norm_last_axis(
            ops.cast(inputs, "float32"),
            ops.cast(self.gamma, "float32"),
            ops.cast(self.beta, "float32"),
            self.epsilon,
        )
        return ops.cast(outputs, self.compute_dtype)

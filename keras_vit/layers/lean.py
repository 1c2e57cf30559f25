"""Layer normalization and GELU-then-dense whose backward pass keeps only what it needs.

Automatic differentiation keeps every intermediate that a backward formula
reads. For the two elementwise-heavy parts of a transformer block that is far
more than the gradient needs (per token and channel, ViT-B/16 under
`mixed_bfloat16`, traced with JAX, BENCHMARKS.md "Activation memory"):

- Keras's layer normalization computes in float32 and keeps float32 copies of
  its centred input and of the normalized tensor, 8 bytes per channel, where
  the gradient needs only the input in the compute dtype (2 bytes) and two
  float32 numbers per row (mean and inverse standard deviation).
- The MLP keeps its hidden layer `h = fc1(x)` four times over (`h` for GELU's
  derivative, two intermediates of the exact GELU, and `GELU(h)` for the
  second dense layer's kernel gradient). One copy of `h` is enough: `GELU(h)`
  is recomputed in the backward pass, an elementwise op over a tensor the
  backward pass reads anyway, next to the two matrix products it feeds.

The functions here write those gradients out (`keras.ops.custom_gradient`), so
that the residuals are exactly the tensors the closures below read. Nothing
here recomputes a matrix product. `keras_vit.layers.code_path` decides where they
are used: in training on the accelerator path.
"""

import math

from keras import ops

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INVERSE_SQRT_TWO_PI = 1.0 / math.sqrt(2.0 * math.pi)


def upstream_gradient(args, upstream):
    """The output gradient a `keras.ops.custom_gradient` closure receives, on either backend."""
    # TensorFlow passes it as `upstream=`, JAX positionally.
    return args[0] if upstream is None else upstream


def lean_layer_norm(x, gamma, beta, epsilon):
    """`gamma * (x - mean) / sqrt(var + epsilon) + beta` over the last axis, in float32.

    The result equals `keras.layers.LayerNormalization`'s (which normalizes
    float16 and bfloat16 inputs in float32 too); the backward pass keeps `x` as
    it came, in its own dtype, and the float32 mean and inverse standard
    deviation of each row, and recomputes the normalized tensor from them.

    Args:
        x: Tensor `(..., C)`, any float dtype; the output has the same dtype.
        gamma: float32 tensor `(C,)`.
        beta: float32 tensor `(C,)`.
        epsilon: float. Added to the variance.

    Returns:
        Tensor of the shape and dtype of `x`.
    """

    @ops.custom_gradient
    def normalize(x, gamma, beta):
        wide = ops.cast(x, "float32")
        mean = ops.mean(wide, axis=-1, keepdims=True)
        centred = wide - mean
        # The centred second moment: E[x^2] - E[x]^2 would cancel for inputs far from zero.
        inverse_std = ops.rsqrt(ops.mean(ops.square(centred), axis=-1, keepdims=True) + epsilon)
        outputs = ops.cast(centred * inverse_std * gamma + beta, x.dtype)

        def grad(*args, upstream=None):
            upstream = ops.cast(upstream_gradient(args, upstream), "float32")
            normalized = (ops.cast(x, "float32") - mean) * inverse_std
            scaled = upstream * gamma
            # d/dx of (x - mean) * inverse_std, applied to `scaled`.
            inputs_grad = inverse_std * (
                scaled
                - ops.mean(scaled, axis=-1, keepdims=True)
                - normalized * ops.mean(scaled * normalized, axis=-1, keepdims=True)
            )
            rows = tuple(range(len(x.shape) - 1))
            gamma_grad = ops.sum(upstream * normalized, axis=rows)
            beta_grad = ops.sum(upstream, axis=rows)
            return ops.cast(inputs_grad, x.dtype), gamma_grad, beta_grad

        return outputs, grad

    return normalize(x, ops.cast(gamma, "float32"), ops.cast(beta, "float32"))


def erf_gelu(x):
    """Exact GELU, `x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2)))`, written with `erf` on every backend."""
    return 0.5 * x * (1.0 + ops.erf(x * ops.cast(_SQRT_HALF, x.dtype)))


def lean_gelu_dense(h, kernel, bias):
    """`GELU(h) @ kernel + bias` (exact GELU), keeping only `h` for the backward pass.

    `GELU(h)`, which the kernel's gradient reads, is recomputed from `h` in the
    backward pass rather than kept; so is GELU's derivative,
    `Phi(h) + h * phi(h)`. The products and the elementwise ops run in the dtype
    of `h` (the compute dtype), as `Dense` would run them.

    Args:
        h: Tensor `(rows, hidden)`: the MLP's hidden layer before its activation.
        kernel: Tensor `(hidden, units)` in the dtype of `h`.
        bias: Tensor `(units,)` in the dtype of `h`, or None.

    Returns:
        Tensor `(rows, units)`.
    """

    def forward(h, kernel, bias):
        outputs = ops.matmul(erf_gelu(h), kernel)
        return outputs if bias is None else outputs + bias

    def backward(h, kernel, upstream):
        activated = erf_gelu(h)
        kernel_grad = ops.matmul(ops.transpose(activated), upstream)
        wide = ops.cast(h, "float32")
        # d GELU / dh = Phi(h) + h * phi(h), in float32 before the one rounding.
        derivative = 0.5 * (1.0 + ops.erf(wide * _SQRT_HALF)) + wide * _INVERSE_SQRT_TWO_PI * ops.exp(
            -0.5 * wide * wide
        )
        inputs_grad = ops.matmul(upstream, ops.transpose(kernel)) * ops.cast(derivative, h.dtype)
        return inputs_grad, kernel_grad

    # The bias is an input of the custom gradient only when there is one.
    @ops.custom_gradient
    def gelu_dense(h, kernel, *bias):
        def grad(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            grads = backward(h, kernel, upstream)
            return (*grads, ops.sum(upstream, axis=0)) if bias else grads

        return forward(h, kernel, bias[0] if bias else None), grad

    return gelu_dense(h, kernel, *(() if bias is None else (bias,)))

"""Dense projections of token sequences as 2-D matrix products."""

import keras
from keras import ops


def dense_on_tokens(dense, tokens):
    """Applies a `Dense` layer to every token as one `(batch * length, width)` product.

    `Dense` on a `(batch, length, width)` tensor is the same function, but XLA then
    differentiates a dot that contracts the batch and length axes together for the
    weight gradient. On XLA:CPU (Keras on JAX) that product's operand is a transposed
    copy into which XLA fuses the whole chain of residual-stream gradients below it,
    block after block, so the step's fusions grow quadratically with depth
    (BENCHMARKS.md, "JAX backend on the CPU"). Flattening the tokens first makes the
    forward product and both of its gradients plain 2-D matrix products, which take
    the gradient as it is. On TensorFlow, whose `Dense` already multiplies a rank-3
    input as one 2-D `MatMul` (`tensordot`), the layer is applied as it is: there
    the flattening only moved XLA's fusion boundaries around the bias gradients,
    for no measurable gain.

    Args:
        dense: A built `keras.layers.Dense`.
        tokens: Tensor `(batch, ..., width)`.

    Returns:
        Tensor `(batch, ..., dense.units)`.
    """
    if len(tokens.shape) <= 2 or keras.backend.backend() == "tensorflow":
        return dense(tokens)
    # Off TensorFlow every axis but a symbolic batch is static: the batch is -1.
    outputs = dense(ops.reshape(tokens, (-1, tokens.shape[-1])))
    return ops.reshape(outputs, (-1, *tokens.shape[1:-1], dense.units))

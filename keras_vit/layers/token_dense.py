"""Dense projections of token sequences: 2-D matrix products, and their int8 policies in configs."""

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


def with_quantized_dtypes(layer, config):
    """`layer`'s config with the quantized policies of its sublayers under `"dtype"`.

    `model.quantize("int8")` sets a quantized policy on each `Dense` leaf, but a
    `.keras` file rebuilds the leaves inside our layers from the outer layer's
    config alone (`build()` creates them with `dtype=self.dtype_policy`): they
    would come back float and refuse the saved int8 kernels and scales. So the
    outer layer saves a `keras.dtype_policies.DTypePolicyMap` from sublayer path
    to policy, defaulting to its own policy; passed down as every sublayer's
    `dtype`, the map gives each its saved policy by its path when it is built
    (the mechanism of keras-hub's quantized backbones). A float layer's config
    is returned as it is.

    Args:
        layer: A built layer.
        config: dict. `layer`'s config from `Layer.get_config`.

    Returns:
        dict, `config` updated in place.
    """
    Map = keras.dtype_policies.DTypePolicyMap
    quantized = {}
    for sublayer in layer._flatten_layers(include_self=False):
        if sublayer.path is None:
            continue  # never built (weightless, e.g. a dropout that was never called)
        policy = sublayer.dtype_policy
        if isinstance(policy, Map):
            policy = policy[sublayer.path]
        if policy.quantization_mode is not None:
            quantized[sublayer.path] = policy
    if quantized:
        own = layer.dtype_policy
        default = own.default_policy if isinstance(own, Map) else own
        policy_map = Map(default_policy=default, policy_map=quantized)
        config["dtype"] = keras.dtype_policies.serialize(policy_map)
    return config


def resolve_dtype_policies(layer):
    """Gives each built sublayer of `layer` its own policy out of a `DTypePolicyMap`.

    Called at the end of `build()`. A layer restored by `with_quantized_dtypes`
    passes the map down as every sublayer's `dtype`; once built (their paths
    known, int8 variables created), each keeps the one policy the map gives it,
    as `model.quantize` would have set it: Keras' `Dense` reads some settings
    from `dtype_policy` itself (saving the kernel scale of an int8 kernel among
    them), which on a map would be the float default.

    Args:
        layer: The layer whose `build()` is ending.
    """
    if not isinstance(layer.dtype_policy, keras.dtype_policies.DTypePolicyMap):
        return
    for sublayer in layer._flatten_layers(include_self=False):
        policy = sublayer.dtype_policy
        if isinstance(policy, keras.dtype_policies.DTypePolicyMap) and sublayer.path is not None:
            # Assigned directly: the public setter would write into the shared map.
            sublayer._dtype_policy = policy[sublayer.path]

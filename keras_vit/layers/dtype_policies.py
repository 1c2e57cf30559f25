"""Quantized dtype policies of a layer's sublayers, saved in its config and restored in `build()`.

`model.quantize("int8")` gives each `Dense` leaf inside our layers its own
policy, which the outer layer's config must carry for a `.keras` file to
rebuild the leaves quantized (keras-hub's quantized backbones do the same).
"""

import keras


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

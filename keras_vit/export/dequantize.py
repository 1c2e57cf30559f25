"""Keras int8 models (`model.quantize("int8")`) as float models the converters can read.

A model quantized in Keras (int8 kernels with a scale per output unit, inputs
quantized per token) is exported from its int8 kernels: the converter sees them
dequantized, and LiteRT's dynamic-range quantization (at least; `"int8"` also
works) requantizes each to the same int8 values, since LiteRT's per-channel
symmetric scale is the same abs-max rule as Keras'. OpenVINO gets the float
kernels.
"""

import keras


def keras_quantization_mode(model):
    """The Keras quantization of `model`'s layers: `None` (float) or `"int8"`.

    Raises:
        ValueError: for another mode (`int4`, `float8`, `gptq`), which the
            export does not translate.
    """
    modes = {
        layer.quantization_mode
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "quantization_mode", None) is not None
    }
    if not modes:
        return None
    if modes != {"int8"}:
        raise ValueError(
            "LiteRT export translates float models and models quantized with "
            f'`model.quantize("int8")`. Received: quantization modes {sorted(modes)}'
        )
    return "int8"


def dequantized_copy(model):
    """A float copy of a model quantized by `model.quantize("int8")`.

    Each int8 kernel becomes `kernel / kernel_scale` (the Keras int8 layers'
    own dequantization), other weights are copied as they are. The copy
    computes the int8 model's function with float matrix products, a form the
    LiteRT converter can quantize again.

    Args:
        model: A functional Keras model.

    Returns:
        A new float model.
    """
    config = _float_config(keras.saving.serialize_keras_object(model))
    copy = keras.saving.deserialize_keras_object(config)
    targets = {variable.path: variable for variable in copy.variables}
    done = set()
    for layer in model._flatten_layers(include_self=False):
        if getattr(layer, "quantization_mode", None) != "int8":
            continue
        if type(layer) is not keras.layers.Dense:
            raise ValueError(
                "Only int8 `Dense` layers are dequantized for export. "
                f"Received: an int8 {type(layer).__name__} ({layer.path})"
            )
        # Kernel (in, units) int8, kernel_scale (units,): the float kernel is q / scale.
        kernel = keras.ops.convert_to_numpy(layer._kernel).astype("float32")
        scale = keras.ops.convert_to_numpy(layer.kernel_scale).astype("float32")
        targets[layer._kernel.path].assign(kernel / scale)
        done.update((layer._kernel.path, layer.kernel_scale.path))
    for variable in model.variables:
        if variable.path in done:
            continue
        if variable.path in targets:
            targets[variable.path].assign(variable)
        elif "seed_generator" not in variable.path:
            # Random-generator states are named by instance count and unused at inference.
            raise ValueError(
                f"The float copy of the model has no variable {variable.path!r}."
            )
    return copy


def _float_config(config):
    """`config` with every quantized dtype policy replaced by its float source.

    A policy map (the int8 sublayers of one of our layers) becomes its default.
    """
    if isinstance(config, dict):
        if config.get("class_name") == "QuantizedDTypePolicy":
            return config["config"]["source_name"]
        if config.get("class_name") == "DTypePolicyMap":
            return _float_config(config["config"]["default_policy"])
        return {
            key: _float_config(value)
            for key, value in config.items()
            if key != "quantization_config"
        }
    if isinstance(config, list):
        return [_float_config(value) for value in config]
    return config

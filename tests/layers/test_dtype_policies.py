"""with_quantized_dtypes and resolve_dtype_policies: an int8 block's policies survive its config."""

import keras
import numpy as np

from keras_vit.layers import MLPBlock
from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from tests.testing import set_random_weights, to_numpy


def _int8_mlp(x):
    inputs = keras.Input(x.shape[1:])
    model = keras.Model(inputs, MLPBlock(16, name="mlp")(inputs))
    set_random_weights(model)
    model.quantize("int8")
    return model


def test_float_config_is_left_as_it_is():
    block = MLPBlock(16)
    block.build((None, 3, 8))
    config = block.get_config()
    assert with_quantized_dtypes(block, dict(config)) == config
    resolve_dtype_policies(block)  # no map: nothing to resolve
    assert block.fc1.dtype_policy.name == "float32"


def test_quantized_policies_round_trip_through_the_config():
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    model = _int8_mlp(x)
    block = model.get_layer("mlp")
    assert [layer.quantization_mode for layer in (block.fc1, block.fc2)] == ["int8", "int8"]
    config = block.get_config()
    # The outer layer's own policy stays float; the map holds the leaves' int8 ones by path.
    policy_map = keras.dtype_policies.deserialize(config["dtype"])
    assert isinstance(policy_map, keras.dtype_policies.DTypePolicyMap)
    assert policy_map.default_policy.name == "float32"
    assert policy_map[block.fc1.path].quantization_mode == "int8"

    clone = MLPBlock.from_config(config)
    clone.build((None, 3, 8))
    # Resolved at the end of build(): each leaf holds its own policy, not the map.
    for layer in (clone.fc1, clone.fc2):
        assert isinstance(layer.dtype_policy, keras.dtype_policies.QuantizedDTypePolicy), layer.path
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(to_numpy(clone(x)), to_numpy(block(x)))

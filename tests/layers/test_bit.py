"""BiT ResNet parts (weight-standardized convolution, GroupNorm bottleneck) against numpy."""

import numpy as np
import pytest

from keras_vit.layers import BottleneckUnit, ResNetStage, StandardizedConv2D
from tests.testing import (
    check_layer,
    np_conv2d_same,
    np_group_norm,
    np_standardize,
    set_random_weights,
    to_numpy,
)


@pytest.mark.parametrize("size,stride", [(7, 2), (8, 2), (6, 1)])
def test_standardized_conv_matches_numpy(size, stride):
    x = np.random.normal(size=(2, size, size, 3)).astype("float32")
    kwargs = {"filters": 4, "kernel_size": 3, "strides": stride, "padding": "same", "use_bias": False}
    check_layer(StandardizedConv2D, kwargs, x)
    layer = StandardizedConv2D(**kwargs)
    layer(x)
    kernel = np.random.normal(0.3, 2.0, size=(3, 3, 3, 4)).astype("float32")
    layer.set_weights([kernel])
    expected = np_conv2d_same(x, np_standardize(kernel.astype("float64"), 1e-5), stride)
    # Outputs reach ~10 (27 standardized taps); float32 keeps ~1e-6 relative.
    np.testing.assert_allclose(to_numpy(layer(x)), expected, rtol=1e-5, atol=1e-4)


def test_standardized_conv_ignores_kernel_scale_and_shift():
    x = np.random.normal(size=(1, 5, 5, 2)).astype("float32")
    layer = StandardizedConv2D(3, 3, padding="same", use_bias=False)
    layer(x)
    kernel = np.random.normal(size=(3, 3, 2, 3)).astype("float32")
    layer.set_weights([kernel])
    before = to_numpy(layer(x))
    layer.set_weights([kernel * 7.0 + 3.0])
    np.testing.assert_allclose(to_numpy(layer(x)), before, rtol=1e-5, atol=1e-4)


def np_unit(unit, x):
    def conv(layer, z, stride=1):
        return np_conv2d_same(z, np_standardize(to_numpy(layer.kernel).astype("float64"), 1e-5), stride)

    def gn(layer, z):
        return np_group_norm(z, 32, to_numpy(layer.gamma), to_numpy(layer.beta), 1e-6)

    stride = unit.strides[0]
    shortcut = gn(unit.gn_proj, conv(unit.conv_proj, x, stride)) if unit.needs_projection else x
    y = np.maximum(gn(unit.gn1, conv(unit.conv1, x)), 0)
    y = np.maximum(gn(unit.gn2, conv(unit.conv2, y, stride)), 0)
    y = gn(unit.gn3, conv(unit.conv3, y))
    return np.maximum(shortcut + y, 0)


@pytest.mark.parametrize("channels,strides", [(64, 2), (128, 1)])
def test_bottleneck_unit_matches_numpy(channels, strides):
    x = np.random.normal(size=(2, 5, 5, channels)).astype("float32")
    kwargs = {"filters": 32, "strides": strides}
    check_layer(BottleneckUnit, kwargs, x)
    unit = BottleneckUnit(**kwargs)
    unit(x)
    assert unit.needs_projection == (channels != 128 or strides != 1)
    set_random_weights(unit)
    np.testing.assert_allclose(to_numpy(unit(x)), np_unit(unit, x.astype("float64")), atol=1e-4)


def test_bottleneck_unit_starts_as_its_shortcut():
    # The last GroupNorm scale starts at zero (BiT), so a fresh unit is relu(shortcut).
    x = np.random.normal(size=(1, 4, 4, 128)).astype("float32")
    unit = BottleneckUnit(32)
    np.testing.assert_allclose(to_numpy(unit(x)), np.maximum(x, 0), atol=1e-6)


def test_resnet_stage_downsamples_once_and_names_units():
    x = np.random.normal(size=(1, 9, 9, 64)).astype("float32")
    output = check_layer(ResNetStage, {"num_units": 3, "filters": 32, "strides": 2}, x)
    assert output.shape == (1, 5, 5, 128)
    stage = ResNetStage(3, 32, strides=2)
    stage(x)
    assert [unit.name for unit in stage.units] == ["unit1", "unit2", "unit3"]
    assert [unit.strides for unit in stage.units] == [(2, 2), (1, 1), (1, 1)]


def test_bit_layers_reject_bad_arguments():
    with pytest.raises(ValueError, match="`num_units` must be a positive integer. Received: num_units=0"):
        ResNetStage(0, 32)
    with pytest.raises(ValueError, match=r"`strides` must be .* Received: strides=\(1, 2, 3\)"):
        BottleneckUnit(32, strides=(1, 2, 3))

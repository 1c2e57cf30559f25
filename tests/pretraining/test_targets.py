"""Masked patch prediction targets (ViT App. B.1.2) against a numpy reference written from the paper.

The reference loops over patches and pixels with Python integers, so it shares no
reshaping or vectorised arithmetic with the library. Targets are class indices:
they must be equal, not close (the float32 means agree with the reference's
float64 ones far inside one quantization level except at level boundaries, which
integer-valued test images avoid by construction, see `_images`).
"""

import numpy as np
import pytest
from keras import ops

from keras_vit import pretraining


def _images(seed, shape):
    # Pixel values that are multiples of 1/4 keep patch means exact in float32 (sums of
    # at most 256 such values), so no mean lands a rounding error away from a level boundary.
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 1021, shape) / 4.0).astype("float32")


def _reference_patches(image, patch_size):
    height, width, _ = image.shape
    return [image[r:r + patch_size, c:c + patch_size].astype(np.float64)
            for r in range(0, height, patch_size) for c in range(0, width, patch_size)]


def _reference_class(color, bits):
    levels = 2**bits
    value = 0
    for channel in color:
        value = value * levels + min(int(np.floor(channel * levels / 256)), levels - 1)
    return value


def test_mean_color_targets_equal_a_per_patch_reference():
    images = _images(0, (2, 16, 24, 3))
    got = ops.convert_to_numpy(pretraining.mean_color_targets(images, 8))
    expected = [[_reference_class(p.mean(axis=(0, 1)), 3) for p in _reference_patches(image, 8)] for image in images]
    assert got.dtype == np.int32 and got.shape == (2, 6)
    np.testing.assert_array_equal(got, expected)


def test_mean_color_classes_cover_the_range_and_read_as_rgb_digits():
    # Uniform colours: the class is 64 r + 8 g + b of the 3-bit levels, black 0 and white 511.
    colors = np.array([[0, 0, 0], [255, 255, 255], [32, 0, 0], [0, 32, 0], [0, 0, 32], [31, 31, 31]], "uint8")
    images = np.repeat(np.repeat(colors[:, None, None, :], 4, axis=1), 4, axis=2)
    got = ops.convert_to_numpy(pretraining.mean_color_targets(images, 4))
    np.testing.assert_array_equal(got[:, 0], [0, 511, 64, 8, 1, 0])
    assert ops.convert_to_numpy(pretraining.mean_color_targets(images[:, :, :, :1], 4, bits=1)).max() == 1


def test_downsized_targets_equal_the_reference_and_reduce_to_mean_color_at_size_1():
    images = _images(1, (2, 16, 16, 3))
    got = ops.convert_to_numpy(pretraining.downsized_patch_targets(images, 8, size=4))
    expected = [[[_reference_class(p[i:i + 2, j:j + 2].mean(axis=(0, 1)), 3) for i in range(0, 8, 2)
                  for j in range(0, 8, 2)] for p in _reference_patches(image, 8)] for image in images]
    assert got.shape == (2, 4, 16)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(ops.convert_to_numpy(pretraining.downsized_patch_targets(images, 8, size=1))[..., 0],
                                  ops.convert_to_numpy(pretraining.mean_color_targets(images, 8)))


def test_pixel_targets_are_the_patches_in_raster_order_scaled_to_inputs_range():
    images = _images(2, (1, 8, 12, 3))
    got = ops.convert_to_numpy(pretraining.patch_pixel_targets(images, 4))
    expected = np.stack([p.reshape(-1) / 127.5 - 1 for p in _reference_patches(images[0], 4)])
    assert got.shape == (1, 6, 48)
    np.testing.assert_allclose(got[0], expected, atol=1e-6)  # float32 of exact quarters


@pytest.mark.parametrize("call, message", [
    (lambda x: pretraining.mean_color_targets(x, 5), r"multiple of `patch_size`.*Received: patch_size=5"),
    (lambda x: pretraining.mean_color_targets(x, 0), r"positive int. Received: patch_size=0"),
    (lambda x: pretraining.mean_color_targets(x, 4, bits=9), r"in \[1, 8\]. Received: bits=9"),
    (lambda x: pretraining.mean_color_targets(x[0], 4), r"Received: images of shape \(8, 8, 3\)"),
    (lambda x: pretraining.downsized_patch_targets(x, 4, size=3), r"dividing `patch_size` \(4\). Received: size=3"),
    (lambda x: pretraining.num_target_classes("l2"), r"one of \('mean_color', 'downsized', 'pixels'\)"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(np.zeros((1, 8, 8, 3), "uint8"))

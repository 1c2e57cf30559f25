"""Patches and PatchEncoder against numpy (ViT Eq. 1)."""

import numpy as np
import pytest

from keras_vit.layers import PatchEncoder, Patches
from tests.testing import ATOL, check_layer, np_conv2d_same, np_patches, set_random_weights, to_numpy


@pytest.mark.parametrize("patch_size,image_shape", [(4, (8, 12)), ((2, 3), (6, 9)), (1, (3, 5))])
def test_patches_match_loop_extraction(patch_size, image_shape):
    images = np.random.uniform(0, 255, (2, *image_shape, 3)).astype("float32")
    output = check_layer(Patches, {"patch_size": patch_size}, images)
    ph, pw = (patch_size, patch_size) if isinstance(patch_size, int) else patch_size
    np.testing.assert_array_equal(output, np_patches(images, ph, pw))


def test_patches_then_dense_is_the_strided_convolution():
    # The patch embedding of the reference is a PxP convolution with stride P.
    images = np.random.normal(size=(2, 8, 12, 3)).astype("float32")
    kernel = np.random.normal(size=(4, 4, 3, 5)).astype("float32")
    encoder = PatchEncoder(5, use_position_embedding=False)
    patches = Patches(4)(images)
    encoder.build(patches.shape)
    encoder.set_weights([kernel.reshape(-1, 5), np.zeros(5, "float32")])
    output = to_numpy(encoder(patches)).reshape(2, 2, 3, 5)
    np.testing.assert_allclose(output, np_conv2d_same(images, kernel, 4), atol=ATOL)


@pytest.mark.parametrize("image_shape", [(7, 8), (8, 7)])
def test_patches_reject_indivisible_images(image_shape):
    with pytest.raises(ValueError, match=r"multiple of the patch size.*patch_size=\(4, 4\)"):
        Patches(4)(np.zeros((1, *image_shape, 3), "float32"))


@pytest.mark.parametrize("bad", [0, -2, (4,), (4, 0), 2.5])
def test_patches_reject_bad_patch_size(bad):
    with pytest.raises(ValueError, match=r"`patch_size` must be a positive integer.*Received: patch_size="):
        Patches(bad)


def test_patch_encoder_matches_numpy_on_non_square_grid():
    patches = np.random.normal(size=(2, 2, 3, 12)).astype("float32")
    output = check_layer(PatchEncoder, {"hidden_size": 6}, patches)
    encoder = PatchEncoder(6)
    encoder(patches)
    set_random_weights(encoder)
    kernel, bias = to_numpy(encoder.projection.kernel), to_numpy(encoder.projection.bias)
    position = to_numpy(encoder.position_embedding)
    assert position.shape == (2, 3, 6)
    expected = (patches @ kernel + bias + position).reshape(2, 6, 6)
    np.testing.assert_allclose(to_numpy(encoder(patches)), expected, atol=ATOL)
    assert output.shape == (2, 6, 6)


def test_patch_encoder_rejects_another_grid_at_call_time():
    encoder = PatchEncoder(6)
    encoder(np.zeros((1, 2, 2, 12), "float32"))
    with pytest.raises(ValueError, match=r"built for a \(2, 2\) patch grid.*\(3, 2\)"):
        encoder(np.zeros((1, 3, 2, 12), "float32"))


def test_patch_encoder_rejects_bad_width():
    with pytest.raises(ValueError, match="`hidden_size` must be a positive integer. Received: hidden_size=0"):
        PatchEncoder(0)

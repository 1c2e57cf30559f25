"""Resizing by two matrix products against TensorFlow's resize ops, the reference it reproduces."""

import numpy as np
import pytest
import tensorflow as tf

from keras_vit.preprocessing import resize_matrices
from tests.testing import to_numpy

# Float32 rounding of the weights and of the sums, in another order than TensorFlow's: measured
# at most 2.0e-3 grey levels (an antialiased 3x upscale), 3e-4 for the other sizes (TensorFlow;
# JAX's were the same, measured once by hand: this file runs in the TensorFlow phase).
TOLERANCE = 5e-3
# Down, none, up, to one pixel, and by factors that are not integers.
SIZES = [(13, 20), (37, 53), (80, 101), (224, 160), (1, 3)]


@pytest.fixture(scope="module")
def image():
    return np.random.default_rng(0).uniform(0, 255, (2, 37, 53, 3)).astype("float32")


@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear", "nearest"])
@pytest.mark.parametrize("antialias", [True, False])
def test_matches_tensorflows_resize(image, interpolation, antialias):
    # The image, and one a single pixel high (every output row then reads that one row).
    for source in (image, image[:, :1]):
        for size in SIZES:
            expected = tf.image.resize(source, size, method=interpolation, antialias=antialias).numpy()
            got = to_numpy(resize_matrices.resize(source, size, interpolation, antialias))
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, atol=TOLERANCE, rtol=0,
                                       err_msg=f"{source.shape} -> {size}")


def test_each_row_of_weights_sums_to_one_and_reaches_only_nearby_pixels():
    matrix = to_numpy(resize_matrices.resize_matrix(100, 25, "bicubic", antialias=True))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-6)
    # Keys' cubic reaches 2 pixels each way, widened 4x by the downscale: output 10 samples
    # the input at 42, so pixels 34..49 (centres within 8 of 42) and no others.
    assert set(np.flatnonzero(matrix[10])) == set(range(34, 50))


def test_sizes_known_only_at_run_time(image):
    traced = tf.function(
        lambda images, height, width: resize_matrices.resize(images, (height, width), "bicubic", True),
        input_signature=[tf.TensorSpec((None, None, None, 3)), tf.TensorSpec((), tf.int32),
                         tf.TensorSpec((), tf.int32)],
    )
    for size in SIZES:
        expected = tf.image.resize(image, size, method="bicubic", antialias=True).numpy()
        np.testing.assert_allclose(traced(image, *size).numpy(), expected, atol=TOLERANCE, rtol=0)


def test_area_is_refused_by_name():
    with pytest.raises(ValueError, match=r"interpolation.*'area' is TensorFlow's ResizeArea.*interpolation='area'"):
        resize_matrices.resize_matrix(10, 5, "area")

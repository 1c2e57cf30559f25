"""ImageShapeCheck: an identity on images of the model's shape."""

import keras
import numpy as np

from keras_vit.layers import ImageShapeCheck
from tests.testing import check_layer


def test_passes_images_of_the_right_shape_unchanged():
    images = np.random.default_rng(0).uniform(0, 255, (2, 8, 12, 3)).astype("float32")
    output = check_layer(ImageShapeCheck, {"image_size": (8, 12), "num_channels": 3}, images)
    np.testing.assert_array_equal(output, images)


def test_unknown_dimensions_pass():
    layer = ImageShapeCheck(8, 1)
    assert layer.compute_output_shape((None, None, 8, None)) == (None, None, 8, None)
    assert tuple(layer(keras.KerasTensor((None, 8, 8, 1))).shape) == (None, 8, 8, 1)

"""keras_vit.images: reading an image file as a model's input."""

import numpy as np
import pytest
from PIL import Image

from keras_vit.images import load_image


def test_load_image_resizes_and_centre_crops(tmp_path):
    # Left half red, right half blue, 40 x 80: the crop keeps the middle square.
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:, :40, 0] = 255
    pixels[:, 40:, 2] = 255
    Image.fromarray(pixels).save(tmp_path / "image.png")
    image = load_image(str(tmp_path / "image.png"), image_size=20)
    assert image.shape == (20, 20, 3) and image.dtype == np.float32
    assert image[:, :8, 0].min() > 200 and image[:, 12:, 2].min() > 200
    assert load_image(str(tmp_path / "image.png"), image_size=(16, 24)).shape == (16, 24, 3)


def test_load_image_rejects_bad_crop_fraction(tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"`crop_fraction` must be in \(0, 1\]. Received: crop_fraction=0"):
        load_image(str(tmp_path / "a.png"), crop_fraction=0)

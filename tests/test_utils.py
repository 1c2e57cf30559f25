"""keras_vit.utils: image reading, ImageNet class names, top-k decoding."""

import numpy as np
import pytest
from PIL import Image

from keras_vit import utils


def test_load_image_resizes_and_centre_crops(tmp_path):
    # Left half red, right half blue, 40 x 80: the crop keeps the middle square.
    pixels = np.zeros((40, 80, 3), np.uint8)
    pixels[:, :40, 0] = 255
    pixels[:, 40:, 2] = 255
    Image.fromarray(pixels).save(tmp_path / "image.png")
    image = utils.load_image(str(tmp_path / "image.png"), image_size=20)
    assert image.shape == (20, 20, 3) and image.dtype == np.float32
    assert image[:, :8, 0].min() > 200 and image[:, 12:, 2].min() > 200
    assert utils.load_image(str(tmp_path / "image.png"), image_size=(16, 24)).shape == (16, 24, 3)


def test_load_image_rejects_bad_crop_fraction(tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    with pytest.raises(ValueError, match=r"`crop_fraction` must be in \(0, 1\]. Received: crop_fraction=0"):
        utils.load_image(str(tmp_path / "a.png"), crop_fraction=0)


def test_imagenet_class_names_are_the_standard_1000():
    names = utils.imagenet_class_names()
    assert len(names) == 1000 and len({wnid for wnid, _ in names}) == 1000
    assert names[0] == ("n01440764", "tench")
    assert names[1] == ("n01443537", "goldfish")
    assert names[999][0] == "n15075141"
    assert [wnid for wnid, _ in names] == sorted(wnid for wnid, _ in names)


def test_decode_predictions_top_k():
    logits = np.full((2, 1000), -5.0)
    logits[0, [1, 0]] = [3.0, 2.0]
    logits[1, 999] = 4.0
    decoded = utils.decode_predictions(logits, top=2)
    assert [(i, name) for i, name, _ in decoded[0]] == [(1, "goldfish"), (0, "tench")]
    e = np.exp(logits[0] - logits[0].max())
    assert decoded[0][0][2] == pytest.approx(e[1] / e.sum())
    assert decoded[1][0][0] == 999
    probs = utils.decode_predictions(np.array([[0.2, 0.7, 0.1]]), top=1, from_logits=False, class_names=["a", "b", "c"])
    assert probs == [[(1, "b", 0.7)]]


def test_decode_predictions_rejects_mismatched_names():
    with pytest.raises(ValueError, match="`class_names` has 2 names but the predictions have 3 classes"):
        utils.decode_predictions(np.zeros((1, 3)), class_names=["a", "b"])


def test_write_atomically_text_and_bytes(tmp_path):
    path = tmp_path / "file"
    utils.write_atomically(str(path), b"\x00\x01binary")
    assert path.read_bytes() == b"\x00\x01binary"
    utils.write_text_atomically(str(path), "text")
    assert path.read_text() == "text" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_write_atomically_failure_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "file"
    path.write_text("old")
    with pytest.raises(TypeError):
        utils.write_atomically(str(path), 3)  # neither str nor bytes: the write fails
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]

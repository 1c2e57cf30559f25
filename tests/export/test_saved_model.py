"""keras_vit.export.saved_model and keras_file: what a server loads, written atomically, on both backends."""

import os

import keras
import numpy as np
import pytest

import keras_vit.export
from keras_vit.export import saved_model_format
from tests.export.helpers import build, forward, smooth_images


def uint8_images(model, count):
    return np.round(smooth_images(model, count)).astype("uint8")


def softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def test_served_probabilities_are_the_softmax_of_the_logits(tmp_path):
    import tensorflow as tf

    model = build("vit")
    images = uint8_images(model, 3)
    expected = softmax(forward(model, images.astype("float32")).astype("float64"))
    path = str(tmp_path / "saved_model")
    assert keras_vit.export.saved_model(model, path) == path
    assert os.listdir(tmp_path) == ["saved_model"]  # no temporary folder left
    loaded = tf.saved_model.load(path)  # kept: its functions need its variables alive
    served = loaded.serve(tf.constant(images))
    assert served.dtype == tf.float32 and served.shape == expected.shape
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)
    # The batch size is free.
    np.testing.assert_allclose(loaded.serve(tf.constant(images[:1])).numpy(), expected[:1], atol=1e-5)


def test_a_second_export_replaces_the_first(tmp_path):
    import tensorflow as tf

    model = build("vit")
    path = tmp_path / "saved_model"
    keras_vit.export.saved_model(model, str(path))
    (path / "stale.txt").write_text("from the first export")
    keras_vit.export.saved_model(model, str(path))
    assert os.listdir(tmp_path) == ["saved_model"] and not (path / "stale.txt").exists()
    images = uint8_images(model, 2)
    loaded = tf.saved_model.load(str(path))
    served = loaded.serve(tf.constant(images)).numpy()
    np.testing.assert_allclose(served.sum(axis=-1), 1.0, atol=1e-5)


def test_a_failed_export_leaves_the_old_folder_and_no_temporary_one(tmp_path, monkeypatch):
    # Failing to move the new folder in is `keras_vit.files`' part: tests/test_files.py.
    model = build("vit")
    path = tmp_path / "saved_model"
    path.mkdir()
    (path / "saved_model.pb").write_bytes(b"old")

    def fail(model, serve, input_spec, folder):
        os.makedirs(os.path.join(folder, "variables"))  # part of the new export
        raise OSError("disk full")

    monkeypatch.setattr(saved_model_format, "_write_archive", fail)
    with pytest.raises(OSError, match="disk full"):
        keras_vit.export.saved_model(model, str(path))
    assert os.listdir(tmp_path) == ["saved_model"]
    assert os.listdir(path) == ["saved_model.pb"] and (path / "saved_model.pb").read_bytes() == b"old"


def test_keras_file_round_trip_and_a_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    model = build("vit")
    images = smooth_images(model, 2)
    path = str(tmp_path / "model.keras")
    assert keras_vit.export.keras_file(model, path) == path
    assert os.listdir(tmp_path) == ["model.keras"]
    np.testing.assert_array_equal(forward(keras.saving.load_model(path), images), forward(model, images))

    old = (tmp_path / "model.keras").read_bytes()

    def fail(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        keras_vit.export.keras_file(model, path)
    assert os.listdir(tmp_path) == ["model.keras"] and (tmp_path / "model.keras").read_bytes() == old


def test_with_an_image_transform_inside_the_signature_serves_photos_of_any_size(tmp_path):
    import tensorflow as tf

    from keras_vit.preprocessing import EvalConfig, eval_transform

    model = build("vit")
    transform = eval_transform(EvalConfig(image_size=model.input_shape[1], interpolation="bicubic",
                                          crop_fraction=0.875))
    path = keras_vit.export.saved_model(model, str(tmp_path / "served"), image_transform=transform)
    loaded = tf.saved_model.load(path)
    # TensorFlow Serving's default signature is the photos' one too.
    for name in ("serve", "serving_default"):
        spec = loaded.signatures[name].structured_input_signature[1]["images"]
        assert spec.dtype == tf.uint8 and spec.shape.as_list() == [None, None, None, 3], (name, spec)
    rng = np.random.default_rng(0)
    for shape in ((2, 45, 70, 3), (1, 29, 23, 3)):
        photos = rng.integers(0, 256, shape, dtype=np.uint8)
        # The reference: the transform applied to each photo here, then the model's softmax.
        prepared = np.stack([transform(photo).numpy() for photo in photos])
        expected = softmax(forward(model, prepared).astype("float64"))
        np.testing.assert_allclose(loaded.serve(tf.constant(photos)).numpy(), expected, atol=1e-5)
    with pytest.raises(ValueError, match=r"`image_transform` must be a function of one image .* "
                                         r"Received: image_transform='bicubic'"):
        keras_vit.export.saved_model(model, str(tmp_path / "refused"), image_transform="bicubic")
    assert not (tmp_path / "refused").exists()

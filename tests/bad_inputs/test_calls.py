"""Bad inputs at call time: images of the wrong shape, unreadable image files, bad helper arguments.

Run on both backends (KERAS_BACKEND=tensorflow and =jax): the shape check lives
in the model graph (`ImageShapeCheck`), so it must hold wherever the graph runs.
"""

import os
import re

import keras
import numpy as np
import pytest
from PIL import Image

import keras_vit.export
from keras_vit.imagenet import decode_predictions
from keras_vit.images import load_image
from keras_vit.layers import ImageShapeCheck
from keras_vit.models.variants import TESTING_VARIANTS

FAMILIES = sorted(TESTING_VARIANTS)


def build(family, **overrides):
    builder, config = TESTING_VARIANTS[family]
    return builder(**{**config, **overrides})


def batch(shape, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, shape).astype("float32")


# ---- images of the wrong shape ------------------------------------------------


@pytest.mark.parametrize("preprocessing", ["inception", "imagenet", None])
@pytest.mark.parametrize("family", FAMILIES)
def test_one_channel_batch_into_a_three_channel_model(family, preprocessing):
    # Keras lets a trailing axis of 1 through its own input check, and the
    # per-channel ImageNet preprocessing would then broadcast it silently.
    model = build(family, preprocessing=preprocessing)
    size = model.input_shape[1:3]
    shape = (2, *size, 1)
    message = rf"This model takes images with 3 channel\(s\) \(num_channels=3\); received a batch of shape \(2, {size[0]}, {size[1]}, 1\), with 1 channel\(s\)"
    with pytest.raises(ValueError, match=message):
        model(batch(shape))
    with pytest.raises(ValueError, match=r"num_channels=3"):
        model.predict(batch(shape), verbose=0)


def test_one_channel_batch_still_refused_after_a_keras_round_trip(tmp_path):
    model = build("convit", preprocessing="imagenet")
    model.save(str(tmp_path / "m.keras"))
    restored = keras.models.load_model(str(tmp_path / "m.keras"))
    with pytest.raises(ValueError, match=r"\(num_channels=3\); received a batch of shape \(2, 32, 32, 1\)"):
        restored(batch((2, 32, 32, 1)))


def test_rgb_batch_into_a_grayscale_model():
    model = build("vit", num_channels=1)
    with pytest.raises(ValueError, match=r"takes images with 1 channel\(s\) \(num_channels=1\); received a batch of shape \(2, 32, 32, 3\)"):
        model(batch((2, 32, 32, 3)))


def test_one_channel_symbolic_input_when_nesting_the_model():
    model = build("vit")
    with pytest.raises(ValueError, match=r"\(num_channels=3\); received a batch of shape \(None, 32, 32, 1\)"):
        model(keras.Input((32, 32, 1)))


@pytest.mark.parametrize(
    "shape,message",
    [
        ((2, 32, 32, 4), r"\(2, 32, 32, 4\)"),  # four channels into three
        ((2, 64, 32, 3), r"\(2, 64, 32, 3\)"),  # twice the height of a fixed-size model
        ((32, 32, 3), r"\(32, 32, 3\)"),  # a single image without its batch axis
    ],
)
def test_other_shapes_are_refused_naming_the_shape(shape, message):
    # Keras' functional input check (or ours) refuses these; either message shows the shape.
    with pytest.raises(ValueError, match=message):
        build("vit")(batch(shape))


@pytest.mark.parametrize(
    "shape,message",
    [
        ((2, 32, 32, 4), r"takes images with 3 channel\(s\) \(num_channels=3\); received a batch of shape \(2, 32, 32, 4\), with 4"),
        ((2, 64, 32, 3), r"takes images of size \(32, 32\) \(image_size=\(32, 32\)\); received a batch of shape \(2, 64, 32, 3\)"),
        ((2, 32, 48, 3), r"image_size=\(32, 32\)\); received a batch of shape \(2, 32, 48, 3\)"),
        ((32, 32, 3), r"takes a batch of images of shape \(batch, 32, 32, 3\); received a tensor of shape \(32, 32, 3\). For a single image add a batch axis"),
        ((1, 2, 32, 32, 3), r"received a tensor of shape \(1, 2, 32, 32, 3\)"),
    ],
)
def test_image_shape_check_names_what_differs(shape, message):
    layer = ImageShapeCheck((32, 32), 3)
    with pytest.raises(ValueError, match=message):
        layer(batch(shape))
    with pytest.raises(ValueError, match=message):
        layer.compute_output_shape(shape)


# ---- images of the wrong shape into an exported file -----------------------------

# 14x56 has the pixels of 28x28 and was reshaped silently; the others failed inside
# the interpreter, naming neither `images` nor the shape it takes.
WRONG_FILE_INPUTS = [(2, 14, 56, 1), (2, 32, 32, 1), (2, 28, 28, 3), (28, 28, 1), (0, 28, 28, 1)]
FILE_INPUT = r"`images` must be a non-empty batch `\(batch, height, width, channels\)` of the file's input shape \(batch, 28, 28, 1\)"


@pytest.fixture(scope="module")
def litert_file(tmp_path_factory):
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])
    return keras_vit.export.litert(model, str(tmp_path_factory.mktemp("litert") / "tiny.tflite"))


@pytest.mark.parametrize("shape", WRONG_FILE_INPUTS, ids=str)
def test_litert_predict_refuses_images_of_another_shape(litert_file, shape):
    interpreter = keras_vit.export.litert_interpreter(litert_file)
    with pytest.raises(ValueError, match=rf"{FILE_INPUT}\. Received: images of shape {re.escape(str(shape))}$"):
        keras_vit.export.litert_predict(interpreter, batch(shape))
    assert keras_vit.export.litert_predict(interpreter, batch((3, 28, 28, 1))).shape == (3, 2)


@pytest.mark.parametrize("shape", WRONG_FILE_INPUTS, ids=str)
def test_openvino_predict_refuses_images_of_another_shape(shape):
    ov = pytest.importorskip("openvino")
    # Built in OpenVINO directly: its export needs Keras on TensorFlow, the check does not.
    images = ov.opset13.parameter([-1, 28, 28, 1], np.float32)
    compiled = ov.compile_model(ov.Model([ov.opset13.relu(images)], [images]), "CPU")
    with pytest.raises(ValueError, match=rf"{FILE_INPUT}\. Received: images of shape {re.escape(str(shape))}$"):
        keras_vit.export.openvino_predict(compiled, batch(shape))
    assert keras_vit.export.openvino_predict(compiled, batch((3, 28, 28, 1))).shape == (3, 28, 28, 1)


# ---- load_image ---------------------------------------------------------------


def test_load_image_missing_file(tmp_path):
    path = str(tmp_path / "missing.jpg")
    with pytest.raises(ValueError, match=rf"Cannot read the image '{re.escape(str(path))}': the file does not exist"):
        load_image(path)


def test_load_image_directory(tmp_path):
    with pytest.raises(ValueError, match=rf"Cannot read the image '{re.escape(str(tmp_path))}': the file is a directory"):
        load_image(str(tmp_path))


def test_load_image_not_an_image(tmp_path):
    path = tmp_path / "notes.jpg"
    path.write_bytes(os.urandom(512))
    with pytest.raises(ValueError, match=rf"Cannot read the image '{re.escape(str(path))}': not an image Pillow can decode, or a damaged one"):
        load_image(path)


def test_load_image_truncated(tmp_path):
    path = tmp_path / "cut.png"
    pixels = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=rf"Cannot read the image '{re.escape(str(path))}'"):
        load_image(str(path))


def test_load_image_empty_file(tmp_path):
    path = tmp_path / "empty.png"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match=rf"Cannot read the image '{re.escape(str(path))}'"):
        load_image(str(path))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"path": None}, r"`path` must be an image file path. Received: path=None"),
        ({"image_size": "224"}, r"`image_size` must be a positive integer or a tuple of 2 positive integers. Received: image_size='224'"),
        ({"image_size": (0, 224)}, r"Received: image_size=\(0, 224\)"),
        ({"crop_fraction": "0.9"}, r"`crop_fraction` must be in \(0, 1\]. Received: crop_fraction='0.9'"),
        ({"crop_fraction": 1.5}, r"`crop_fraction` must be in \(0, 1\]. Received: crop_fraction=1.5"),
    ],
)
def test_load_image_bad_arguments(tmp_path, kwargs, message):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    with pytest.raises(ValueError, match=message):
        load_image(**{"path": str(tmp_path / "a.png"), **kwargs})


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"top": 0}, r"`top` must be a positive integer. Received: top=0"),
        ({"top": "5"}, r"`top` must be a positive integer. Received: top='5'"),
        ({"predictions": np.zeros(1000)}, r"`predictions` must have shape \(batch, classes\). Received: shape=\(1000,\)"),
    ],
)
def test_decode_predictions_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        decode_predictions(**{"predictions": np.zeros((1, 1000)), **kwargs})


# ---- preprocessing and pretraining arguments (each refused before any work) ----


MIX_CASES = [
    ({"mixup_alpha": -1.0}, r"`mixup_alpha` must be a finite number >= 0 \(0 disables it\)\. Received: mixup_alpha=-1\.0"),
    ({"cutmix_alpha": float("nan")}, r"`cutmix_alpha` must be a finite number >= 0.*Received: cutmix_alpha=nan"),
    ({"mixup_alpha": 0.8, "switch_prob": 2}, r"`switch_prob` must be a probability, a number in \[0, 1\]\. Received: switch_prob=2"),
    ({"mixup_alpha": 0.0}, r"`mixup_alpha` or `cutmix_alpha` must be > 0"),
]


@pytest.mark.parametrize("kwargs, message", MIX_CASES, ids=[str(kwargs) for kwargs, _ in MIX_CASES])
def test_mix_batch_bad_arguments(kwargs, message):
    from keras_vit.preprocessing.mixing import mix_batch

    images, labels = batch((4, 8, 8, 3)), np.eye(4, dtype="float32")
    with pytest.raises(ValueError, match=message):
        mix_batch(images, labels, np.array([1, 2], "int32"), **kwargs)


def test_mix_batch_refuses_labels_for_another_number_of_images():
    import tensorflow as tf

    from keras_vit.preprocessing.mixing import mix_batch

    images, seed = batch((4, 8, 8, 3)), np.array([1, 2], "int32")
    with pytest.raises(ValueError, match=r"`labels` must have one row per image: 4 images\. Received: labels\.shape=\(3, 10\)"):
        mix_batch(images, np.ones((3, 10), "float32"), seed, mixup_alpha=0.8)
    # In a tf.data map with static batches, when the map is traced ...
    with pytest.raises(ValueError, match=r"`labels` must have one row per image: 4 images"):
        tf.data.Dataset.from_tensors((images, np.ones((3, 10), "float32"))).map(
            lambda x, y: mix_batch(x, y, seed, mixup_alpha=0.8))
    # ... and with unknown ones, in the graph when it runs.
    ragged = tf.data.Dataset.from_generator(
        lambda: iter([(images, np.ones((3, 10), "float32"))]),
        output_signature=(tf.TensorSpec((None, 8, 8, 3)), tf.TensorSpec((None, 10))),
    ).map(lambda x, y: mix_batch(x, y, seed, mixup_alpha=0.8))
    with pytest.raises(tf.errors.InvalidArgumentError, match="`labels` must have one row per image"):
        next(iter(ragged))


@pytest.mark.parametrize("size", [(0, 10), (10, -3), (10,), (2.5, 10), "224"])
def test_resize_refuses_a_size_without_two_positive_sides(size):
    from keras_vit.preprocessing import resize

    with pytest.raises(ValueError, match=rf"`size` must be \(height, width\), two positive integers\. Received: size={re.escape(repr(size))}"):
        resize(batch((1, 12, 12, 3)), size)


@pytest.mark.parametrize("kwargs, name", [
    ({"corruption_rate": 1.5}, "corruption_rate"),
    ({"corruption_rate": 0}, "corruption_rate"),
    ({"mask_rate": -0.1}, "mask_rate"),
])
def test_masked_patch_prediction_names_the_rate_it_was_given(kwargs, name):
    from keras_vit.models import MaskedPatchPrediction

    encoder = build("vit")
    value = next(iter(kwargs.values()))
    with pytest.raises(ValueError, match=rf"^`{name}` must be a float in .*\. Received: {name}={re.escape(repr(value))}$"):
        MaskedPatchPrediction(encoder, **kwargs)

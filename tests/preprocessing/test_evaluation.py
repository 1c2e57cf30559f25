"""Evaluation transforms against the reference code, on real photographs.

(About 400 lines: every checkpoint's evaluation transform is tested here against the
reference code it was read from, on the same photographs.)

References: timm's `create_transform(..., is_training=False)` (PIL resize and
torchvision crop, as DeiT, ConViT and Swin evaluate) and `tf.image.resize`
(vit_jax's evaluation, the reference code itself). Hugging Face's image
processors (their PIL form) check `eval_config_from_huggingface`.
"""

import importlib
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_vit.preprocessing.checkpoints import EvalConfig, eval_config
from keras_vit.preprocessing.huggingface import eval_config_from_huggingface
from keras_vit.preprocessing.evaluation import eval_transform
from keras_vit.preprocessing.layers import EvalTransform
from keras_vit.checkpoints import KNOWN_CHECKPOINTS

# Mean absolute difference to timm's transform, in grey levels of [0, 255], over each
# photograph. Measured (timm 1.0.31, Pillow 13, TensorFlow 2.21): at most 0.21 for every
# configuration below; single pixels differ by up to 13 levels at sharp edges, where
# TensorFlow's float kernel weights and PIL's fixed-point ones round apart.
TIMM_MEAN_TOLERANCE = 0.5
# The layer against the function: the layer resizes by matrix products (resize_matrices),
# whose float results are a few 1e-4 from `tf.image.resize`'s (measured max 2e-3) on both
# backends, which flips the rounding of a few pixels by 1 level (measured mean under 1e-4).
LAYER_MEAN_TOLERANCE = 0.01
LAYER_MAX_TOLERANCE_ROUNDED = 1.0
LAYER_MAX_TOLERANCE_FLOAT = 0.01


def _timm_reference(config):
    from PIL import Image

    from runs.reference import timm

    transform = timm.data.create_transform(
        config.image_size,
        is_training=False,
        interpolation=config.interpolation,
        crop_pct=config.crop_fraction,
        crop_mode=config.crop_mode,
        mean=(0.0, 0.0, 0.0),
        std=(1.0, 1.0, 1.0),
    )
    return lambda image: transform(Image.fromarray(image)).numpy().transpose(1, 2, 0) * 255.0


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


# -- The tables ---------------------------------------------------------------------------------


def test_every_known_checkpoint_has_its_authors_and_timms_preprocessing():
    for name, checkpoint in KNOWN_CHECKPOINTS.items():
        assert eval_config(name) is checkpoint.eval_config, name
        assert eval_config(name, reference="timm") is checkpoint.timm_eval_config, name
        for config, authors in ((checkpoint.eval_config, True), (checkpoint.timm_eval_config, False)):
            # DINOv2's authors evaluate their 518 px checkpoints on 224 px crops (the model
            # resamples its position embeddings); every other checkpoint at its own size.
            evaluated_at = 224 if authors and name.startswith("DINOv2") else None
            assert config.image_size == (evaluated_at or checkpoint.config["image_size"]), name
            assert config.source, name


@pytest.mark.parametrize(
    "name, resized, crop_mode, interpolation, antialias, mean",
    [
        # DeiT datasets.py: int(input_size / 0.875); ConViT and Swin: int(256 / 224 * input_size).
        ("DeiT_S16/imagenet", 256, "center", "bicubic", True, (0.485, 0.456, 0.406)),
        ("DeiT_B16_384_distilled/imagenet", 438, "center", "bicubic", True, (0.485, 0.456, 0.406)),
        ("ConViT_S/imagenet", 256, "center", "bicubic", True, (0.485, 0.456, 0.406)),
        ("Swin_T/imagenet", 256, "center", "bicubic", True, (0.485, 0.456, 0.406)),
        # Swin's 384 px configs: TEST.CROP False, a resize of the whole image.
        ("Swin_B384/imagenet21k+imagenet2012", 384, "squash", "bicubic", True, (0.485, 0.456, 0.406)),
        # vit_jax: tf.image.resize(im, [size, size]), bilinear without antialiasing; [-1, 1].
        ("ViT_B16/imagenet21k+imagenet2012", 384, "squash", "bilinear", False, (0.5, 0.5, 0.5)),
        ("ViT_S16/augreg", 224, "squash", "bilinear", False, (0.5, 0.5, 0.5)),
    ],
)
def test_the_authors_settings(name, resized, crop_mode, interpolation, antialias, mean):
    config = eval_config(name)
    assert (config.resized_size, config.crop_mode, config.interpolation) == (resized, crop_mode, interpolation)
    assert config.antialias == antialias and config.round_to_uint8 == antialias
    assert config.mean == mean


def test_timms_table_is_timms_pretrained_cfg():
    from runs.reference import timm

    tagged = {name: record for name, record in KNOWN_CHECKPOINTS.items() if record.timm_tag is not None}
    # timm publishes no copy of two of the original ViT release's 384 px fine-tunes.
    assert len(tagged) == len(KNOWN_CHECKPOINTS) - 2
    for name, record in tagged.items():
        expected = timm.models.get_pretrained_cfg(record.timm_tag)
        config = record.timm_eval_config
        assert config.image_size == expected.input_size[-1], name
        assert config.crop_fraction == expected.crop_pct, name
        assert (config.crop_mode, config.interpolation) == (expected.crop_mode, expected.interpolation), name
        np.testing.assert_allclose(config.mean, expected.mean, err_msg=name)
        np.testing.assert_allclose(config.std, expected.std, err_msg=name)


def test_timm_is_an_option_never_the_default():
    assert eval_config("DeiT_S16/imagenet").crop_fraction == 0.875
    assert eval_config("DeiT_S16/imagenet", reference="timm").crop_fraction == 0.9
    record = KNOWN_CHECKPOINTS["DeiT_S16/imagenet"]
    assert eval_transform("DeiT_S16/imagenet").config == record.eval_config
    assert eval_transform("deit_s16/IMAGENET", reference="timm").config == record.timm_eval_config


# -- Against the reference code -------------------------------------------------------------------

TIMM_CASES = [
    ("DeiT_S16/imagenet", "authors"),
    ("DeiT_B16_384/imagenet", "authors"),
    ("ConViT_S/imagenet", "authors"),
    ("Swin_T/imagenet", "authors"),
    ("Swin_B384/imagenet", "authors"),
    ("DeiT_S16/imagenet", "timm"),
    ("Swin_B384/imagenet", "timm"),
]


@pytest.mark.parametrize("name, reference", TIMM_CASES)
def test_equals_timms_create_transform_on_photographs(photographs, name, reference):
    transform = eval_transform(name, reference=reference)
    expected = _timm_reference(transform.config)
    for photo, image in photographs.items():
        ours = transform(image).numpy()
        theirs = expected(image)
        assert ours.shape == theirs.shape == (transform.config.image_size,) * 2 + (3,)
        assert ours.dtype == np.float32
        assert np.abs(ours - theirs).mean() < TIMM_MEAN_TOLERANCE, photo


@pytest.mark.parametrize("name", ["ViT_B16/augreg", "ViT_L32/imagenet21k+imagenet2012", "ViT_H14/imagenet21k"])
def test_vit_jax_checkpoints_equal_tf_image_resize(photographs, name):
    transform = eval_transform(name)
    size = transform.config.image_size
    for image in photographs.values():
        expected = tf.image.resize(image, [size, size]).numpy()  # vit_jax's evaluation, before (x - 127.5) / 127.5
        np.testing.assert_allclose(transform(image).numpy(), expected, atol=1e-4)


def test_overriding_the_size_rescales_the_resize_as_timm_does(photographs):
    transform = eval_transform("DeiT_S16/imagenet", image_size=384)
    assert transform.config.resized_size == 438
    assert "overridden: image_size=384" in transform.config.source
    expected = _timm_reference(transform.config)
    image = photographs["coffee"]
    assert np.abs(transform(image).numpy() - expected(image)).mean() < TIMM_MEAN_TOLERANCE


def test_float_pixels_in_range_give_the_uint8_result(photographs):
    transform = eval_transform("Swin_T/imagenet")
    image = photographs["chelsea"]
    np.testing.assert_array_equal(transform(image.astype(np.float32)).numpy(), transform(image).numpy())


def test_grayscale_is_repeated_to_rgb(photographs):
    transform = eval_transform("DeiT_S16/imagenet")
    gray = photographs["astronaut"][..., :1]
    np.testing.assert_array_equal(transform(gray).numpy(), transform(np.repeat(gray, 3, axis=-1)).numpy())


# -- Inside tf.data ---------------------------------------------------------------------------------


def test_runs_inside_tf_data_with_unknown_sizes(photographs):
    transform = eval_transform("DeiT_S16/imagenet")
    images = list(photographs.values())
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(images), output_signature=tf.TensorSpec((None, None, 3), tf.uint8)
    ).map(transform)
    assert dataset.element_spec.shape == (224, 224, 3)
    for got, image in zip(dataset, images, strict=True):
        np.testing.assert_array_equal(got.numpy(), transform(image).numpy())


def test_tf_data_with_unknown_channels_converts_grayscale_and_refuses_rgba(photographs):
    transform = eval_transform("ViT_B16/augreg")
    image = photographs["chelsea_small"]
    spec = tf.TensorSpec((None, None, None), tf.uint8)
    gray = tf.data.Dataset.from_generator(lambda: iter([image[..., :1]]), output_signature=spec).map(transform)
    np.testing.assert_array_equal(next(iter(gray)).numpy(), transform(np.repeat(image[..., :1], 3, -1)).numpy())
    rgba = np.concatenate([image, np.full_like(image[..., :1], 255)], axis=-1)
    dataset = tf.data.Dataset.from_generator(lambda: iter([rgba]), output_signature=spec).map(transform)
    with pytest.raises(tf.errors.InvalidArgumentError, match="channels"):
        next(iter(dataset))


def test_tf_data_refuses_float_pixels_outside_0_255(photographs):
    transform = eval_transform("ViT_B16/augreg")
    image = photographs["chelsea_small"].astype(np.float32) * 2.0
    dataset = tf.data.Dataset.from_tensors(image).map(transform)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[0, 255\]"):
        next(iter(dataset))


# -- Bad input --------------------------------------------------------------------------------------


def test_unknown_names_are_refused_with_known_ones():
    with pytest.raises(ValueError, match=r"Close names: \['DeiT_S16/imagenet'.*list_checkpoints\(\) lists all "
                                         r"\d+\. Received: name='DeiT_S16/imagenet2012'"):
        eval_transform("DeiT_S16/imagenet2012")
    with pytest.raises(ValueError, match=r"'<Variant>/<checkpoint>'.*Received: name='resnet50'"):
        eval_transform("resnet50")
    with pytest.raises(ValueError, match=r"`reference` must be one of \('authors', 'timm'\)"):
        eval_transform("DeiT_S16/imagenet", reference="huggingface")


@pytest.mark.parametrize("crop_fraction", [0, 0.0, -0.5, 1.01, float("nan"), True, "0.9"])
def test_crop_fractions_outside_0_1_are_refused(crop_fraction):
    with pytest.raises(ValueError, match=r"`crop_fraction` must be a number in \(0, 1\].*crop_fraction="):
        eval_transform("DeiT_S16/imagenet", crop_fraction=crop_fraction)
    with pytest.raises(ValueError, match="crop_fraction"):
        EvalConfig(224, crop_fraction=crop_fraction)


@pytest.mark.parametrize(
    "override, message",
    [
        (dict(interpolation="lanczos"), "`interpolation` must be one of"),
        (dict(crop_mode="border"), r"`crop_mode` must be one of \('center', 'squash'\)"),
        (dict(image_size=0), "`image_size` must be a positive integer"),
        (dict(antialias="yes"), "`antialias`"),
        (dict(mean=(0.5, 0.5, 0.5)), "Only the transform settings"),
    ],
)
def test_bad_overrides_are_refused(override, message):
    with pytest.raises(ValueError, match=message):
        eval_transform("DeiT_S16/imagenet", **override)


@pytest.mark.parametrize(
    "shape, message",
    [
        ((32, 32, 4), r"1 \(grayscale, repeated to RGB\) or 3 \(RGB\) channels.*\(32, 32, 4\)"),
        ((32, 32, 2), r"\(32, 32, 2\)"),
        ((32, 32), r"one image of shape \(height, width, channels\).*\(32, 32\)"),
        ((2, 32, 32, 3), r"\(2, 32, 32, 3\)"),
        ((0, 32, 3), "positive height and width"),
    ],
)
def test_images_of_other_shapes_are_refused(shape, message):
    with pytest.raises(ValueError, match=message):
        eval_transform("DeiT_S16/imagenet")(np.zeros(shape, np.uint8))


@pytest.mark.parametrize("low, high", [(0.0, 255.5), (-1.0, 1.0), (0.0, float("nan"))])
def test_float_pixels_outside_0_255_are_refused(low, high):
    image = np.full((16, 16, 3), low, np.float32)
    image[0, 0, 0] = high
    with pytest.raises(ValueError, match=r"values must lie in \[0, 255\].*float32"):
        eval_transform("DeiT_S16/imagenet")(image)
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        eval_transform("DeiT_S16/imagenet")(tf.constant(image))


def test_non_numeric_images_are_refused():
    with pytest.raises(ValueError, match="integer or floating point pixels"):
        eval_transform("DeiT_S16/imagenet")(np.zeros((8, 8, 3), bool))


# -- Hugging Face preprocessor_config.json -----------------------------------------------------------

# As facebook/deit-small-patch16-224 and google/vit-base-patch16-224 file them.
HF_DEIT = {
    "crop_size": 224, "do_center_crop": True, "do_normalize": True, "do_resize": True,
    "feature_extractor_type": "DeiTFeatureExtractor", "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225], "resample": 3, "size": 256,
}
HF_VIT = {
    "do_normalize": True, "do_resize": True, "feature_extractor_type": "ViTFeatureExtractor",
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2, "size": 224,
}


def _write(tmp_path, settings):
    path = tmp_path / "preprocessor_config.json"
    path.write_text(json.dumps(settings))
    return path


def test_reads_hugging_face_configs(tmp_path):
    deit = eval_config_from_huggingface(_write(tmp_path, HF_DEIT))
    assert (deit.image_size, deit.resized_size, deit.crop_mode, deit.interpolation) == (224, 256, "squash", "bicubic")
    assert deit.mean == (0.485, 0.456, 0.406)
    vit = eval_config_from_huggingface(_write(tmp_path, HF_VIT))
    assert (vit.image_size, vit.crop_fraction, vit.crop_mode, vit.interpolation) == (224, 1.0, "squash", "bilinear")
    shortest = {
        "image_processor_type": "DeiTImageProcessor", "size": {"shortest_edge": 248},
        "crop_size": {"height": 224, "width": 224},
    }
    _write(tmp_path, shortest)
    config = eval_config_from_huggingface(tmp_path)  # the directory holding preprocessor_config.json
    assert (config.image_size, config.resized_size, config.crop_mode) == (224, 248, "center")


@pytest.mark.parametrize("settings, processor", [(HF_DEIT, "DeiTImageProcessorPil"), (HF_VIT, "ViTImageProcessorPil")])
def test_hugging_face_configs_give_hugging_faces_pixels(tmp_path, photographs, settings, processor):
    # runs.reference declares torchvision's ops, which transformers imports, first.
    importlib.import_module("runs.reference")
    from transformers.models.deit.image_processing_pil_deit import DeiTImageProcessorPil
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    classes = {"DeiTImageProcessorPil": DeiTImageProcessorPil, "ViTImageProcessorPil": ViTImageProcessorPil}
    reference = classes[processor](**{k: v for k, v in settings.items() if k != "feature_extractor_type"})
    transform = eval_transform(eval_config_from_huggingface(_write(tmp_path, settings)))
    for photo, image in photographs.items():
        pixels = reference(image, do_normalize=False, return_tensors="np")["pixel_values"][0]
        # Measured: at most 0.21 grey level.
        assert np.abs(transform(image).numpy() - pixels.transpose(1, 2, 0) * 255.0).mean() < TIMM_MEAN_TOLERANCE, photo


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(resample=1), r"`resample`.*Received: resample=1 \(LANCZOS\)"),
        (dict(size={"height": 224, "width": 256}), "`size`.*square"),
        (dict(do_resize=False), "`do_resize`"),
        (dict(feature_extractor_type="CLIPImageProcessor"), "`image_processor_type` .*CLIPImageProcessor"),
        (dict(rescale_factor=1.0), "`rescale_factor`"),
        (dict(crop_size=300), "`crop_size`.*must not exceed"),
    ],
)
def test_hugging_face_settings_it_cannot_reproduce_are_refused(tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        eval_config_from_huggingface(_write(tmp_path, {**HF_DEIT, **change}))


# -- The Keras layer ------------------------------------------------------------------------------------


def test_layer_config_round_trip():
    layer = EvalTransform(160, interpolation="bilinear", crop_fraction=0.9, crop_mode="squash", antialias=False,
                          round_to_uint8=False, name="pixels")
    config = layer.get_config()
    assert {k: config[k] for k in ("image_size", "interpolation", "crop_fraction", "crop_mode", "antialias",
                                   "round_to_uint8")} == {
        "image_size": 160, "interpolation": "bilinear", "crop_fraction": 0.9, "crop_mode": "squash",
        "antialias": False, "round_to_uint8": False,
    }
    assert EvalTransform.from_config(config).get_config() == config


# A landscape, a portrait and an upscaled image: enough for the layer, and JAX's eager resize is slow.
LAYER_PHOTOS = ("coffee", "rocket_portrait", "chelsea_small")


@pytest.mark.parametrize("name", ["DeiT_S16/imagenet", "Swin_B384/imagenet", "ViT_B16/augreg"])
def test_layer_equals_the_function(photographs, name):
    transform = eval_transform(name)
    layer = EvalTransform.from_eval_config(transform.config)
    most = LAYER_MAX_TOLERANCE_ROUNDED if transform.config.round_to_uint8 else LAYER_MAX_TOLERANCE_FLOAT
    for photo in LAYER_PHOTOS:
        image = photographs[photo]
        got = _numpy(layer(image[None]))[0]
        assert got.dtype == np.float32
        difference = np.abs(got - transform(image).numpy())
        assert difference.mean() < LAYER_MEAN_TOLERANCE and difference.max() <= most, photo


def test_layer_converts_grayscale_and_refuses_rgba_and_single_images(photographs):
    layer = EvalTransform(64)
    gray = photographs["chelsea_small"][None, ..., :1]
    np.testing.assert_array_equal(_numpy(layer(gray)), _numpy(layer(np.repeat(gray, 3, axis=-1))))
    with pytest.raises(ValueError, match=r"1 \(grayscale, repeated to RGB\) or 3 \(RGB\) channels"):
        layer(np.zeros((1, 32, 32, 4), np.uint8))
    with pytest.raises(ValueError, match=r"batch of shape \(batch, height, width, channels\)"):
        layer(np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="crop_fraction"):
        EvalTransform(64, crop_fraction=1.5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="traced unknown sizes exist on TensorFlow only")
def test_layer_traces_unknown_sizes_on_tensorflow(photographs):
    layer = EvalTransform(224)
    traced = tf.function(layer, input_signature=[tf.TensorSpec((None, None, None, 3), tf.uint8)])
    transform = eval_transform(EvalConfig(224))
    for image in (photographs["rocket_portrait"], photographs["coffee"]):
        got = traced(image[None])
        assert got.shape == (1, 224, 224, 3)
        difference = np.abs(got[0].numpy() - transform(image).numpy())
        assert difference.mean() < LAYER_MEAN_TOLERANCE and difference.max() <= LAYER_MAX_TOLERANCE_ROUNDED


def test_a_model_with_the_layer_in_front_survives_a_keras_round_trip(tmp_path, photographs):
    inputs = keras.Input((None, None, 3), dtype="uint8")
    pixels = EvalTransform(32, crop_fraction=0.875)(inputs)
    features = keras.layers.GlobalAveragePooling2D()(keras.layers.Rescaling(1 / 255.0)(pixels))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(features))
    images = np.stack([photographs["chelsea"], photographs["chelsea"][::-1]])
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored.layers[1], EvalTransform)
    np.testing.assert_allclose(_numpy(restored(images)), _numpy(model(images)), rtol=1e-6, atol=1e-6)
    sequential = keras.Sequential([keras.Input((None, None, 3), dtype="uint8"), EvalTransform(32)])
    assert sequential(images).shape == (2, 32, 32, 3)

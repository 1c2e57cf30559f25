"""Photo to label: a checkpoint's model with its own evaluation transform inside, and top-k decoding.

    classifier = keras_vit.image_classifier("ViT_B16/augreg")   # downloads the checkpoint
    keras_vit.classify(classifier, "photo.jpg")                  # [[(index, name, probability), ...]]

`image_classifier` puts the checkpoint's evaluation transform (`EvalTransform`, the
computation of `keras_vit.preprocessing.eval_transform`) in front of the model, so the
model takes raw pixels of any size, as the checkpoint's authors fed theirs, and exports
with it (`keras_vit.export.saved_model` then serves uint8 photographs of any size).
`classify` reads files, takes arrays of different sizes, and decodes the top-k labels.
"""

import os

import keras
import numpy as np

from keras_vit.imagenet import decode_predictions
from keras_vit.models.variants import build_variant
from keras_vit.preprocessing.checkpoints import EvalConfig, checkpoint_key, eval_config
from keras_vit.preprocessing.layers import EvalTransform


def image_classifier(checkpoint, model=None, reference="authors"):
    """A classifier taking raw RGB images of any size, with `checkpoint`'s evaluation transform inside.

    Args:
        checkpoint: str or `EvalConfig`. A known checkpoint, `"Variant/name"`
            (e.g. `"ViT_B16/augreg"`, `"DeiT_S16/imagenet"`; the keys of
            `keras_vit.weights.KNOWN_CHECKPOINTS`): its evaluation transform
            is put in front, and without `model` its weights are downloaded.
            Or an explicit transform (e.g. a training run's, the
            `eval_transform` of its `summary.json`), with `model`.
        model: A keras_vit model to put the transform in front of (e.g. one
            loaded from a file or fine-tuned), or None to build the
            checkpoint's variant with its weights. Defaults to None. A model
            of grayscale images (1 channel) gets the transform's first
            channel and takes 1-channel images.
        reference: str. `"authors"` (the transform the checkpoint's authors
            evaluated with) or `"timm"` (timm's `pretrained_cfg`), for a
            checkpoint name; unused with an `EvalConfig`. Defaults to
            `"authors"`.

    Returns:
        A `keras.Model` mapping a batch `(batch, height, width, channels)` of
        uint8 or float pixels in [0, 255], any height and width, to the
        model's logits; `channels` is the model's (3, or 1 for a grayscale
        model).

    Raises:
        ValueError: for an unknown checkpoint name (any case matches) or `reference`, an
            `EvalConfig` without `model`, or a `model` whose input size is not the
            transform's output size.
    """
    if isinstance(checkpoint, EvalConfig):
        if model is None:
            raise ValueError(
                "An explicit evaluation transform needs the `model` to put it in front of. "
                f"Received: checkpoint={checkpoint!r} and model=None"
            )
        config, named = checkpoint, "the given evaluation transform"
    else:
        checkpoint = checkpoint_key(checkpoint, argument="checkpoint")  # the registry's spelling
        config, named = eval_config(checkpoint, reference), f"the evaluation transform of {checkpoint!r}"
    if model is None:
        variant = checkpoint.split("/")[0]
        model = build_variant(variant, weights=checkpoint)
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a keras_vit `keras.Model` or None. Received: model={model!r}")
    channels = model.input_shape[-1]
    expected = (config.image_size, config.image_size, channels)
    if channels not in (1, 3) or tuple(model.input_shape[1:]) not in (expected, (None, None, channels)):
        raise ValueError(
            f"{named[0].upper()}{named[1:]} gives {expected[:2]} images of 1 or 3 channels, and "
            "`model` takes "
            f"{tuple(model.input_shape[1:])}. Build the model at image_size={config.image_size}, or with "
            f"dynamic_image_size=True. Received: model={model.name!r}"
        )
    images = keras.Input((None, None, channels), name="images")
    prepared = EvalTransform.from_eval_config(config, name="eval_transform")(images)
    if channels == 1:  # the transform repeats a gray image to RGB: its channels are equal
        prepared = prepared[..., :1]
    return keras.Model(images, model(prepared), name=f"{model.name}_classifier")


def classify(classifier, images, top=5, class_names=None):
    """The top-k labels of each image, from files or arrays of any sizes.

    Args:
        classifier: A model taking images of any size, e.g. from
            `image_classifier`, returning logits. A classifier of 1-channel
            images (a grayscale model) gets each image as Pillow's luma.
        images: An image file path, an array `(height, width, 3)` (or 1
            channel, repeated to RGB) of pixels in [0, 255], or a list of
            them; each may have its own size (each size is one call).
        top: int. Labels per image. Defaults to 5.
        class_names: list of names, or None for ImageNet-1k's (a head of
            1000 classes).

    Returns:
        One list per image of `(class_index, name, probability)`, most
        probable first.

    Raises:
        ValueError: naming the image, for an unreadable file or an array of
            another rank or channel count; for `top` or `class_names` as
            `keras_vit.imagenet.decode_predictions` refuses them.
    """
    single = isinstance(images, (str, os.PathLike)) or (isinstance(images, np.ndarray) and images.ndim in (2, 3))
    batch = [images] if single else list(images)
    gray = classifier.input_shape[-1] == 1
    results = []
    for index, image in enumerate(batch):
        array = _rgb_array(image, index)
        if gray:
            array = _luma(array)
        logits = keras.ops.convert_to_numpy(classifier.predict_on_batch(array[None]))
        results.extend(decode_predictions(logits, top=top, from_logits=True, class_names=class_names))
    return results


def _luma(rgb):
    """Float32 RGB pixels as Pillow's `convert("L")` of their uint8 rounding: `(height, width, 1)`."""
    from PIL import Image

    pixels = np.clip(np.round(rgb), 0, 255).astype("uint8")
    return np.asarray(Image.fromarray(pixels).convert("L"), dtype="float32")[..., None]


def _rgb_array(image, index):
    """An image file or array as float32 `(height, width, 3)`, or a ValueError naming it."""
    from keras_vit.images import read_rgb

    if isinstance(image, (str, os.PathLike)):
        return np.asarray(read_rgb(image), dtype="float32")
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[-1] not in (1, 3) or not np.issubdtype(array.dtype, np.number):
        raise ValueError(
            f"`images` must be image file paths or arrays (height, width, 3) (or 1 channel) of pixels in "
            f"[0, 255]. Received: image {index} of shape {array.shape} and dtype {array.dtype}"
        )
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    return array.astype("float32")

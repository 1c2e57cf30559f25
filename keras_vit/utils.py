"""Helpers to try a pretrained model: read an image, ImageNet-1k class names, top-k decoding."""

import functools
import importlib.resources

import numpy as np


def load_image(path, image_size=224, crop_fraction=1.0):
    """Reads an image file as a float32 RGB array in [0, 255], resized for a model.

    The shorter side is resized to `image_size / crop_fraction` (bilinear), then
    the centre is cropped to `image_size`. `crop_fraction=1.0` (the default)
    resizes without cropping away more than the aspect ratio needs, as the ViT
    evaluation does; timm's usual evaluation uses 0.875-0.9.

    Args:
        path: str. Any format Pillow reads.
        image_size: int or tuple `(height, width)`. Defaults to 224.
        crop_fraction: float in (0, 1]. Defaults to 1.

    Returns:
        Array of shape `(height, width, 3)`.
    """
    from PIL import Image

    if not 0.0 < crop_fraction <= 1.0:
        raise ValueError(f"`crop_fraction` must be in (0, 1]. Received: crop_fraction={crop_fraction}")
    height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
    with Image.open(path) as image:
        image = image.convert("RGB")
        scale = max(height / image.height, width / image.width) / crop_fraction
        resized = image.resize(
            (max(width, round(image.width * scale)), max(height, round(image.height * scale))),
            Image.BILINEAR,
        )
    left = (resized.width - width) // 2
    top = (resized.height - height) // 2
    return np.asarray(resized.crop((left, top, left + width, top + height)), dtype="float32")


@functools.lru_cache(maxsize=1)
def imagenet_class_names():
    """The 1000 ImageNet-1k class names, in the standard (sorted WordNet id) order.

    Returns:
        List of 1000 `(wordnet_id, name)` tuples.
    """
    text = importlib.resources.files("keras_vit").joinpath("data/imagenet_classes.txt").read_text()
    return [tuple(line.split("\t")) for line in text.splitlines()]


def decode_predictions(predictions, top=5, from_logits=True, class_names=None):
    """Top-k classes of a batch of predictions.

    Args:
        predictions: array `(batch, classes)` of logits or probabilities.
        top: int. How many classes per example. Defaults to 5.
        from_logits: bool. Apply a softmax first. Defaults to `True`.
        class_names: list of names, or None for ImageNet-1k's.

    Returns:
        One list per example of `(class_index, name, probability)` tuples, most
        probable first.
    """
    predictions = np.asarray(predictions, dtype="float64")
    if predictions.ndim != 2:
        raise ValueError(
            f"`predictions` must have shape (batch, classes). Received: shape={predictions.shape}"
        )
    if class_names is None:
        class_names = [name for _, name in imagenet_class_names()]
    if len(class_names) != predictions.shape[1]:
        raise ValueError(
            f"`class_names` has {len(class_names)} names but the predictions have "
            f"{predictions.shape[1]} classes."
        )
    if from_logits:
        predictions = np.exp(predictions - predictions.max(axis=1, keepdims=True))
        predictions /= predictions.sum(axis=1, keepdims=True)
    order = np.argsort(-predictions, axis=1, kind="stable")[:, :top]
    return [[(int(i), class_names[i], float(row[i])) for i in idx] for row, idx in zip(predictions, order)]

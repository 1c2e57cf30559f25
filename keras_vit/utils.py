"""Helpers: read an image, ImageNet-1k class names, top-k decoding, atomic writes."""

import functools
import hashlib
import importlib.resources
import numbers
import os

import numpy as np

from keras_vit.layers.validation import check_positive_int, to_pair


def load_image(path, image_size=224, crop_fraction=1.0):
    """Reads an image file as a float32 RGB array in [0, 255], resized for a model.

    The shorter side is resized to `image_size / crop_fraction` (bilinear), then
    the centre is cropped to `image_size`. `crop_fraction=1.0` (the default)
    resizes without cropping away more than the aspect ratio needs, as the ViT
    evaluation does; timm's usual evaluation uses 0.875-0.9.

    Args:
        path: str or path. Any format Pillow reads.
        image_size: int or tuple `(height, width)`. Defaults to 224.
        crop_fraction: float in (0, 1]. Defaults to 1.

    Returns:
        Array of shape `(height, width, 3)`.

    Raises:
        ValueError: naming the file, when it is missing or not a readable image.
    """
    from PIL import Image

    if isinstance(crop_fraction, bool) or not isinstance(crop_fraction, numbers.Real) or not 0.0 < crop_fraction <= 1.0:
        raise ValueError(f"`crop_fraction` must be in (0, 1]. Received: crop_fraction={crop_fraction!r}")
    height, width = to_pair(image_size, "image_size")
    image = _read_rgb(path)
    scale = max(height / image.height, width / image.width) / crop_fraction
    resized = image.resize(
        (max(width, round(image.width * scale)), max(height, round(image.height * scale))),
        Image.BILINEAR,
    )
    left = (resized.width - width) // 2
    top = (resized.height - height) // 2
    return np.asarray(resized.crop((left, top, left + width, top + height)), dtype="float32")


def _read_rgb(path):
    """Decodes the whole image file as RGB, or raises a ValueError naming the file."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"`path` must be an image file path. Received: path={path!r}")
    if not os.path.isfile(path):
        what = "is a directory, not an image file" if os.path.isdir(path) else "does not exist"
        raise ValueError(f"Cannot read the image {os.fspath(path)!r}: the file {what}.")
    try:
        with Image.open(path) as image:
            # convert() decodes every pixel, so a truncated file fails here, inside the try.
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as error:
        raise ValueError(
            f"Cannot read the image {os.fspath(path)!r}: not an image Pillow can decode, "
            f"or a damaged one ({type(error).__name__}: {error})."
        ) from None


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
    check_positive_int(top, "top")
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


def _remote_files(path):
    """`tf.io.gfile` for a path with a scheme (`gs://`, `ram://`); None for a local path."""
    if "://" not in str(path):
        return None
    import tensorflow as tf

    return tf.io.gfile


def write_atomically(path, data):
    """Writes `data` (str or bytes) to a temporary file beside `path`, syncs it and renames it onto `path`.

    A reader sees the old file or the new one, never a partial write; a failed
    write (a full disk) removes its temporary file. Paths with a scheme
    (`gs://...`) go through `tf.io.gfile`, where the rename is the store's.
    """
    tmp = f"{path}.tmp-{os.getpid()}"
    mode = "wb" if isinstance(data, bytes) else "w"
    gfile = _remote_files(path)
    if gfile is not None:
        try:
            with gfile.GFile(tmp, mode) as f:
                f.write(data)
            gfile.rename(tmp, path, overwrite=True)
        except BaseException:
            if gfile.exists(tmp):
                gfile.remove(tmp)
            raise
        return
    try:
        with open(tmp, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_text_atomically(path, text):
    """`write_atomically` for text (the name the trainer and the weights code use)."""
    write_atomically(path, text)


def file_sha256(path):
    """The sha256 of a file's bytes, as a hex string, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    gfile = _remote_files(path)
    with (gfile.GFile(path, "rb") if gfile is not None else open(path, "rb")) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

"""Reading an image file as a model's input: decoded as RGB, resized and centre-cropped."""

import numbers
import os

import numpy as np

from keras_vit.layers.validation import to_pair


def load_image(path, image_size=224, crop_fraction=1.0):
    """Reads an image file as a float32 RGB array in [0, 255], resized for a model.

    The image is scaled (bilinear, Pillow) so that it covers `image_size / crop_fraction`
    on both sides, keeping its aspect ratio, and its centre is cropped to `image_size`. With
    `crop_fraction=1.0` (the default) only what the aspect ratio needs is cut away. This is a
    generic reader, not any checkpoint's own evaluation: the official ViT checkpoints resize
    the whole image to the model's size (no crop), and timm's crop 0.875-0.9 with bicubic
    filters. For a known checkpoint's exact pixels use
    `keras_vit.preprocessing.eval_transform(checkpoint)` on the image file's array.

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
    image = read_rgb(path)
    scale = max(height / image.height, width / image.width) / crop_fraction
    resized = image.resize(
        (max(width, round(image.width * scale)), max(height, round(image.height * scale))),
        Image.BILINEAR,
    )
    left = (resized.width - width) // 2
    top = (resized.height - height) // 2
    return np.asarray(resized.crop((left, top, left + width, top + height)), dtype="float32")


def read_rgb(path):
    """Decodes the whole image file as an RGB PIL image, or raises a ValueError naming the file."""
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

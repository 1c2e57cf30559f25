"""What the LiteRT and OpenVINO exporters share: argument checks, and running a file batch by batch."""

import numpy as np


def check_positive_or_none(value, name):
    """Raises a ValueError unless `value` is a positive integer or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"`{name}` must be a positive integer or None. Received: {name}={value!r}")


def check_single_input(model, exporter):
    """Raises a ValueError unless `model` takes one input (the images); `exporter` names the format."""
    if len(model.inputs) != 1:
        raise ValueError(
            f"{exporter} export takes a model with one image input. "
            f"Received: a model with {len(model.inputs)} inputs"
        )


def check_image_batch(images, input_shape):
    """Raises a ValueError unless `images` is a non-empty batch that the file's input takes.

    The interpreters reshape a batch with the right number of pixels silently
    (14x56 images into a 28x28 model) and fail on others deep inside, so the
    shape is checked here. The number of images is free: a file with a fixed
    batch size runs them in chunks of it.

    Args:
        images: numpy array.
        input_shape: tuple `(batch, height, width, channels)`, the file's
            input; `None` where a size is free.
    """
    expected = tuple(input_shape[1:])
    fits = (
        images.ndim == 4
        and len(images) > 0
        and all(size is None or size == got for size, got in zip(expected, images.shape[1:]))
    )
    if not fits:
        sizes = ", ".join("None" if size is None else str(size) for size in expected)
        raise ValueError(
            "`images` must be a non-empty batch `(batch, height, width, channels)` of the file's "
            f"input shape (batch, {sizes}). Received: images of shape {images.shape}"
        )


def predict_in_chunks(run, images, chunk):
    """`run` on `images` in batches of `chunk`, the last one padded with its last image; outputs cut back.

    A file with a fixed batch size takes only batches of that size.
    """
    outputs = []
    for start in range(0, len(images), chunk):
        batch = images[start : start + chunk]
        count = len(batch)
        if count < chunk:
            batch = np.concatenate([batch, np.repeat(batch[-1:], chunk - count, axis=0)])
        outputs.append(run(batch)[:count])
    return np.concatenate(outputs)

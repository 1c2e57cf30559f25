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

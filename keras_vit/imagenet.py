"""ImageNet-1k class names (package data `keras_vit/data/imagenet_classes.txt`) and top-k decoding."""

import functools
import importlib.resources

import numpy as np

from keras_vit.layers.validation import check_positive_int


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

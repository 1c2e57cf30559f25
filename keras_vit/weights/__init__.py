"""Pretrained weights: readers, converters, position-embedding resampling, loading."""

from keras_vit.weights.loading import LoadReport, load_weights
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.weights.registry import KNOWN_CHECKPOINTS, KnownCheckpoint

__all__ = [
    "KNOWN_CHECKPOINTS",
    "KnownCheckpoint",
    "LoadReport",
    "load_weights",
    "resample_position_embedding",
]

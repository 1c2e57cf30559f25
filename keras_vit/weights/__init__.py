"""Pretrained weights: readers, converters, position-embedding and Swin bias-table resampling, loading."""

from keras_vit.weights.loading import LoadReport, load_weights
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.weights.registry import KNOWN_CHECKPOINTS, KnownCheckpoint
from keras_vit.weights.swin import resample_bias_table

__all__ = [
    "KNOWN_CHECKPOINTS",
    "KnownCheckpoint",
    "LoadReport",
    "load_weights",
    "resample_bias_table",
    "resample_position_embedding",
]

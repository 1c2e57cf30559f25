"""Pretrained weights: readers, converters (official ViT, timm, transformers, Swin), resampling, loading."""

from keras_vit.weights.loading import load_weights
from keras_vit.weights.report import LoadReport
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.weights.registry import KNOWN_CHECKPOINTS, CheckpointDownloadError, KnownCheckpoint
from keras_vit.weights.position_embedding import resample_bias_table

__all__ = [
    "KNOWN_CHECKPOINTS",
    "CheckpointDownloadError",
    "KnownCheckpoint",
    "LoadReport",
    "load_weights",
    "resample_bias_table",
    "resample_position_embedding",
]

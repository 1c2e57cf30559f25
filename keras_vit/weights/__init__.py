"""Pretrained weights: readers, converters (official ViT, timm, transformers, Swin), resampling, loading."""

from keras_vit.weights.loading import load_weights
from keras_vit.weights.report import LoadReport
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.checkpoints import KNOWN_CHECKPOINTS, KnownCheckpoint, get_checkpoint, list_checkpoints
from keras_vit.weights.registry import CheckpointDownloadError
from keras_vit.weights.position_embedding import resample_bias_table

__all__ = [
    "KNOWN_CHECKPOINTS",
    "CheckpointDownloadError",
    "KnownCheckpoint",
    "LoadReport",
    "get_checkpoint",
    "list_checkpoints",
    "load_weights",
    "resample_bias_table",
    "resample_position_embedding",
]

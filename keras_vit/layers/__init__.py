"""Registered Keras layers of keras_vit."""

from keras_vit.layers.attention import GPSA, MultiHeadSelfAttention
from keras_vit.layers.bit import BottleneckUnit, ResNetStage, StandardizedConv2D
from keras_vit.layers.image_check import ImageShapeCheck
from keras_vit.layers.patching import (
    ClassToken,
    DistillationToken,
    DistillationTokenPooling,
    PatchEncoder,
    Patches,
)
from keras_vit.layers.pooling import ClassTokenPooling
from keras_vit.layers.position import AbsolutePositionEmbedding
from keras_vit.layers.swin import (
    PatchMerging,
    SwinPatchEmbedding,
    SwinTransformerBlock,
    WindowAttention,
)
from keras_vit.layers.transformer import MLPBlock, StochasticDepth, TransformerBlock

__all__ = [
    "AbsolutePositionEmbedding",
    "BottleneckUnit",
    "ClassToken",
    "ClassTokenPooling",
    "DistillationToken",
    "DistillationTokenPooling",
    "GPSA",
    "ImageShapeCheck",
    "MLPBlock",
    "MultiHeadSelfAttention",
    "PatchEncoder",
    "PatchMerging",
    "Patches",
    "ResNetStage",
    "StandardizedConv2D",
    "StochasticDepth",
    "SwinPatchEmbedding",
    "SwinTransformerBlock",
    "TransformerBlock",
    "WindowAttention",
]

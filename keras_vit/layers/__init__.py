"""Registered Keras layers of keras_vit shared by its families.

A family's own layers are in its folder's package: `keras_vit.models.convit`
(`GPSA`, `GPSABlock`), `keras_vit.models.swin` (`SwinTransformerBlock`,
`WindowAttention`, ...), `keras_vit.models.axial`, `keras_vit.models.dinov2`.
"""

from keras_vit.layers.attention import MultiHeadSelfAttention, attention_kernels
from keras_vit.layers.code_paths import code_path
from keras_vit.layers.bit import BottleneckUnit, ResNetStage, StandardizedConv2D
from keras_vit.layers.image_check import ImageShapeCheck
from keras_vit.layers.patching import PatchEncoder, Patches
from keras_vit.layers.masking import PatchCorruption
from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.pooling import ClassTokenPooling, SeparableMaxPooling2D
from keras_vit.layers.position import AbsolutePositionEmbedding, TokenPositionEmbedding
from keras_vit.layers.pyramid import PatchTokenMap, SimpleFeaturePyramidLevel
from keras_vit.layers.relative_attention import RelativeSelfAttention
from keras_vit.layers.tokens import ClassToken, DistillationToken, DistillationTokenPooling
from keras_vit.layers.mlp import MLPBlock
from keras_vit.layers.transformer import StochasticDepth, TransformerBlock

__all__ = [
    "AbsolutePositionEmbedding",
    "BottleneckUnit",
    "ClassToken",
    "ClassTokenPooling",
    "DistillationToken",
    "DistillationTokenPooling",
    "ImageShapeCheck",
    "LayerNormalization",
    "MLPBlock",
    "MultiHeadSelfAttention",
    "PatchCorruption",
    "PatchEncoder",
    "PatchTokenMap",
    "Patches",
    "RelativeSelfAttention",
    "ResNetStage",
    "SeparableMaxPooling2D",
    "SimpleFeaturePyramidLevel",
    "StandardizedConv2D",
    "StochasticDepth",
    "TokenPositionEmbedding",
    "TransformerBlock",
    "attention_kernels",
    "code_path",
]

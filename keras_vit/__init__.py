"""keras_vit: Vision Transformers (ViT, hybrid ResNet+ViT, DeiT, ConViT, Swin, DINOv2) for Keras 3."""

from keras_vit import (
    analysis, evaluation, export, few_shot, inspection, layers, preprocessing, pretraining, schedules, utils, weights,
)
from keras_vit.classification import classify, image_classifier
from keras_vit.distribution import layout_map
from keras_vit.feature_extraction import features, simple_feature_pyramid
from keras_vit.models import (
    VARIANTS,
    AxialViT,
    AxialViT_B16,
    AxialViT_B32,
    ConViT,
    DINOv2,
    MaskedPatchPrediction,
    SwinTransformer,
    VisionTransformer,
    backbone,
    build_variant,
    distillation_heads,
    head,
)
from keras_vit.models.dinov2 import (
    DINOv2_B14,
    DINOv2_B14_reg4,
    DINOv2_G14,
    DINOv2_G14_reg4,
    DINOv2_L14,
    DINOv2_L14_reg4,
    DINOv2_S14,
    DINOv2_S14_reg4,
)
from keras_vit.models.variants import (
    ConViT_B,
    ConViT_B_plus,
    ConViT_S,
    ConViT_S_plus,
    ConViT_Ti,
    ConViT_Ti_plus,
    DeiT_B16,
    DeiT_B16_384,
    DeiT_B16_384_distilled,
    DeiT_B16_distilled,
    DeiT_S16,
    DeiT_S16_distilled,
    DeiT_Ti16,
    DeiT_Ti16_distilled,
    R26_ViT_B32,
    R26_ViT_S32,
    R50_ViT_B16,
    R50_ViT_L32,
    R_ViT_Ti16,
    Swin_B,
    Swin_B384,
    Swin_L,
    Swin_L384,
    Swin_S,
    Swin_T,
    ViT_B8,
    ViT_B16,
    ViT_B32,
    ViT_H14,
    ViT_L16,
    ViT_L32,
    ViT_S16,
    ViT_Ti16,
)
from keras_vit.layers.position import INTERPOLATIONS as POSITION_INTERPOLATIONS
from keras_vit.version import __version__
from keras_vit.weights import load_weights, resample_position_embedding

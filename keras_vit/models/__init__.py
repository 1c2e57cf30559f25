"""Model builders: the general `VisionTransformer`, `ConViT`, `SwinTransformer`, `AxialViT` and `DINOv2`, the named variants, the backbone/head split, DeiT's `distillation_heads` and ViT's `MaskedPatchPrediction` pretraining."""

from keras_vit.models.backbone import backbone, head
from keras_vit.models.convit import ConViT
from keras_vit.models.deit import distillation_heads
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from keras_vit.models.swin import SwinTransformer

from keras_vit.models.variants import VARIANTS, build_variant
from keras_vit.models.vit import VisionTransformer

# The families in folders register themselves on import (`keras_vit.models.registration`).
from keras_vit.models.axial import AxialViT, AxialViT_B16, AxialViT_B32
from keras_vit.models.dinov2 import DINOv2

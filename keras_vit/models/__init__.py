"""Model builders: the general `VisionTransformer`, `ConViT`, `SwinTransformer`, `AxialViT` and `DINOv2`, the named variants, the backbone/head split, DeiT's `distillation_heads` and ViT's `MaskedPatchPrediction` pretraining."""

from keras_vit.models.backbone import backbone, head
from keras_vit.models.distillation import distillation_heads
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from keras_vit.models.variants import BUILDERS, VARIANTS, build_variant

# Every family's builders by name (`VisionTransformer`, `ViT_B16`, ...); importing them
# registers the family folders, in the order of the table.
import keras_vit.models.builders as _builders
from keras_vit.models.builders import *  # noqa: F401,F403

__all__ = ["BUILDERS", "VARIANTS", "MaskedPatchPrediction", "backbone", "build_variant", "distillation_heads", "head"]
__all__ += _builders.__all__

"""Model builders: the general `VisionTransformer`, `ConViT`, `SwinTransformer`, `AxialViT` and `DINOv2`, the named variants, the backbone/head split, DeiT's `distillation_heads` and ViT's `MaskedPatchPrediction` pretraining."""

from keras_vit.models.backbone import backbone, head
from keras_vit.models.distillation import distillation_heads
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from keras_vit.models.variants import VARIANTS, build_variant

# The families in folders register themselves on import (`keras_vit.models.registration`),
# in the order of the table; their builders join it (`variants.BUILDERS`, `NAMED_BUILDERS`).
from keras_vit.models import convit  # noqa: F401
from keras_vit.models import swin  # noqa: F401
from keras_vit.models import axial  # noqa: F401
from keras_vit.models import dinov2  # noqa: F401
from keras_vit.models.variants import BUILDERS, NAMED_BUILDERS

# Every general builder (`VisionTransformer`, ...) and named variant (`ViT_B16`, ...), from the table.
globals().update(BUILDERS)
globals().update(NAMED_BUILDERS)

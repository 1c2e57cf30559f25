"""Model builders: the general `VisionTransformer`, `ConViT` and `SwinTransformer`, and the named variants."""

from keras_vit.models.convit import ConViT
from keras_vit.models.swin import SwinTransformer

from keras_vit.models.variants import VARIANTS, build_variant
from keras_vit.models.vit import VisionTransformer

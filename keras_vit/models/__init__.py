"""Model builders: the general `VisionTransformer` and `ConViT`, and the named variants."""

from keras_vit.models.convit import ConViT

from keras_vit.models.variants import VARIANTS, build_variant
from keras_vit.models.vit import VisionTransformer

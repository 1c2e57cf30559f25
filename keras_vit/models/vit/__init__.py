"""ViT (Dosovitskiy et al. 2021), the hybrid ResNet+ViT and DeiT (Touvron et al. 2021).

The builder shared by the three (`builder.py`: `VisionTransformer`, with the
hybrid's BiT ResNet stem and DeiT's distillation token as arguments) and their
published checkpoints (`checkpoints.py`: one record per file), registered once
here. Its builders by name (`ViT_B16`, ...) are in `named.py`.
"""

from keras_vit.models.vit import checkpoints
from keras_vit.models.vit.builder import VisionTransformer, resnet_feature_size, resnet_stride
from keras_vit.checkpoints import register_checkpoints

register_checkpoints(checkpoints.CHECKPOINTS)

__all__ = ["VisionTransformer", "resnet_feature_size", "resnet_stride"]

"""keras_vit: Vision Transformers (ViT, hybrid ResNet+ViT, DeiT, ConViT, Swin, DINOv2) for Keras 3.

The general builders (`keras_vit.VisionTransformer`, ...) and the named variants
(`keras_vit.ViT_B16`, ...) come from the variant table (`keras_vit.models`), a
registered family's with the rest; `__init__.pyi` beside this file lists them
for IDEs and type checkers (written by `python -m keras_vit.stubs`).
"""

from keras_vit import (
    analysis, export, few_shot, inspection, layers, models, preprocessing, pretraining, schedules, utils,
    weights,
)
from keras_vit.classification import classify, image_classifier
from keras_vit.distribution import layout_map
from keras_vit.feature_extraction import features, simple_feature_pyramid
from keras_vit.layers.position import INTERPOLATIONS as POSITION_INTERPOLATIONS
from keras_vit.models import (
    VARIANTS,
    MaskedPatchPrediction,
    backbone,
    build_variant,
    distillation_heads,
    head,
)
from keras_vit.version import __version__
from keras_vit.weights import get_checkpoint, list_checkpoints, load_weights, resample_position_embedding

globals().update(models.BUILDERS)
globals().update(models.NAMED_BUILDERS)

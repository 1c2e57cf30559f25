"""keras_vit: Vision Transformers (ViT, hybrid ResNet+ViT, DeiT, ConViT, Swin, DINOv2) for Keras 3.

The general builders (`keras_vit.VisionTransformer`, ...) and the named variants
(`keras_vit.ViT_B16`, ...) are each family's (`keras_vit.models.builders`), bound
by name in its folder's `named` module, where IDEs and type checkers read them.
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
import keras_vit.models.builders as _builders
from keras_vit.models.builders import *  # noqa: F401,F403

# The public names, as type checkers read a typed package's (an import alone is private there).
__all__ = [
    "analysis", "export", "few_shot", "inspection", "layers", "models", "preprocessing", "pretraining", "schedules",
    "utils", "weights", "classify", "image_classifier", "layout_map", "features", "simple_feature_pyramid",
    "POSITION_INTERPOLATIONS", "VARIANTS", "MaskedPatchPrediction", "backbone", "build_variant", "distillation_heads",
    "head", "__version__", "get_checkpoint", "list_checkpoints", "load_weights", "resample_position_embedding",
]
__all__ += _builders.__all__

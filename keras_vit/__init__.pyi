# Written by `python -m keras_vit.stubs keras_vit/__init__.pyi` from the imported package: do not edit.
"""keras_vit's public names, for IDEs and type checkers (see `keras_vit.stubs`)."""

from typing import Any

import keras

from keras_vit import analysis as analysis, export as export, few_shot as few_shot, inspection as inspection, layers as layers, models as models, preprocessing as preprocessing, pretraining as pretraining, schedules as schedules, utils as utils, weights as weights
from keras_vit.classification import classify as classify, image_classifier as image_classifier
from keras_vit.distribution import layout_map as layout_map
from keras_vit.feature_extraction import features as features, simple_feature_pyramid as simple_feature_pyramid
from keras_vit.layers.position import INTERPOLATIONS as POSITION_INTERPOLATIONS
from keras_vit.models import VARIANTS as VARIANTS, MaskedPatchPrediction as MaskedPatchPrediction, backbone as backbone, build_variant as build_variant, distillation_heads as distillation_heads, head as head
from keras_vit.version import __version__ as __version__
from keras_vit.weights import get_checkpoint as get_checkpoint, list_checkpoints as list_checkpoints, load_weights as load_weights, resample_position_embedding as resample_position_embedding
from keras_vit.models.vit.builder import VisionTransformer as VisionTransformer
from keras_vit.models.convit.builder import ConViT as ConViT
from keras_vit.models.swin.builder import SwinTransformer as SwinTransformer
from keras_vit.models.axial.builder import AxialViT as AxialViT
from keras_vit.models.dinov2.builder import DINOv2 as DINOv2


def ViT_Ti16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_Ti16 (hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768, patch_size=16).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_Ti16 (['augreg']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_S16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_S16 (hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=16).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_S16 (['augreg']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_B16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_B16 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_B16 (['augreg', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_B32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_B32 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=32).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_B32 (['augreg', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_B8(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_B8 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=8).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_B8.
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_L16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_L16 (hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096, patch_size=16).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_L16 (['augreg', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_L32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_L32 (hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096, patch_size=32).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_L32 (['imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ViT_H14(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ViT_H14 (hidden_size=1280, num_layers=32, num_heads=16, mlp_dim=5120, patch_size=14).

    Args:
        weights: A checkpoint file or a known checkpoint name of ViT_H14 (['imagenet21k']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def R_ViT_Ti16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds R_ViT_Ti16 (hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768, patch_size=8, resnet_stages=()).

    Args:
        weights: A checkpoint file or a known checkpoint name of R_ViT_Ti16 (['augreg']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def R26_ViT_S32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds R26_ViT_S32 (hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=1, resnet_stages=(2, 2, 2, 2)).

    Args:
        weights: A checkpoint file or a known checkpoint name of R26_ViT_S32 (['augreg']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def R26_ViT_B32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds R26_ViT_B32 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=1, resnet_stages=(2, 2, 2, 2)).

    Args:
        weights: A checkpoint file or a known checkpoint name of R26_ViT_B32.
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def R50_ViT_B16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds R50_ViT_B16 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=1, resnet_stages=(3, 4, 9)).

    Args:
        weights: A checkpoint file or a known checkpoint name of R50_ViT_B16 (['imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def R50_ViT_L32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds R50_ViT_L32 (hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096, patch_size=1, resnet_stages=(3, 4, 6, 3)).

    Args:
        weights: A checkpoint file or a known checkpoint name of R50_ViT_L32.
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_Ti16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_Ti16 (hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=False).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_Ti16 (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_S16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_S16 (hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=False).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_S16 (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_B16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_B16 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=False).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_B16 (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_B16_384(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_B16_384 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16, image_size=384, preprocessing=imagenet, initialization=deit, distillation=False).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_B16_384 (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_Ti16_distilled(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_Ti16_distilled (hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=True).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_Ti16_distilled (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_S16_distilled(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_S16_distilled (hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=True).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_S16_distilled (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_B16_distilled(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_B16_distilled (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16, image_size=224, preprocessing=imagenet, initialization=deit, distillation=True).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_B16_distilled (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DeiT_B16_384_distilled(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DeiT_B16_384_distilled (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16, image_size=384, preprocessing=imagenet, initialization=deit, distillation=True).

    Args:
        weights: A checkpoint file or a known checkpoint name of DeiT_B16_384_distilled (['imagenet']).
        **kwargs: Any argument of `VisionTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_Ti(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_Ti (hidden_size=192, num_layers=12, num_heads=4, mlp_dim=768, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_Ti (['imagenet']).
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_S(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_S (hidden_size=432, num_layers=12, num_heads=9, mlp_dim=1728, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_S (['imagenet']).
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_B(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_B (hidden_size=768, num_layers=12, num_heads=16, mlp_dim=3072, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_B (['imagenet']).
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_Ti_plus(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_Ti_plus (hidden_size=256, num_layers=12, num_heads=4, mlp_dim=1024, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_Ti_plus.
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_S_plus(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_S_plus (hidden_size=576, num_layers=12, num_heads=9, mlp_dim=2304, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_S_plus.
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def ConViT_B_plus(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds ConViT_B_plus (hidden_size=1024, num_layers=12, num_heads=16, mlp_dim=4096, num_gpsa_layers=10).

    Args:
        weights: A checkpoint file or a known checkpoint name of ConViT_B_plus.
        **kwargs: Any argument of `ConViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_T(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_T (image_size=224, embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), window_size=7).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_T (['imagenet', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_S(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_S (image_size=224, embed_dim=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24), window_size=7).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_S (['imagenet', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_B(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_B (image_size=224, embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), window_size=7).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_B (['imagenet', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_L(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_L (image_size=224, embed_dim=192, depths=(2, 2, 18, 2), num_heads=(6, 12, 24, 48), window_size=7).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_L (['imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_B384(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_B384 (image_size=384, embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), window_size=12).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_B384 (['imagenet', 'imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def Swin_L384(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds Swin_L384 (image_size=384, embed_dim=192, depths=(2, 2, 18, 2), num_heads=(6, 12, 24, 48), window_size=12).

    Args:
        weights: A checkpoint file or a known checkpoint name of Swin_L384 (['imagenet21k', 'imagenet21k+imagenet2012']).
        **kwargs: Any argument of `SwinTransformer`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def AxialViT_B16(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds AxialViT_B16 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=16).

    Args:
        weights: None: Axial-ViT has no published checkpoints (the ViT authors released none); any other value raises a `ValueError`.
        **kwargs: Any argument of `AxialViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def AxialViT_B32(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds AxialViT_B32 (hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=32).

    Args:
        weights: None: Axial-ViT has no published checkpoints (the ViT authors released none); any other value raises a `ValueError`.
        **kwargs: Any argument of `AxialViT`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_S14(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_S14 (mlp_activation=gelu, hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=14, num_register_tokens=0).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_S14 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_S14_reg4(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_S14_reg4 (mlp_activation=gelu, hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536, patch_size=14, num_register_tokens=4).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_S14_reg4 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_B14(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_B14 (mlp_activation=gelu, hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=14, num_register_tokens=0).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_B14 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_B14_reg4(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_B14_reg4 (mlp_activation=gelu, hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072, patch_size=14, num_register_tokens=4).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_B14_reg4 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_L14(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_L14 (mlp_activation=gelu, hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096, patch_size=14, num_register_tokens=0).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_L14 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_L14_reg4(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_L14_reg4 (mlp_activation=gelu, hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096, patch_size=14, num_register_tokens=4).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_L14_reg4 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_G14(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_G14 (mlp_activation=swiglu, hidden_size=1536, num_layers=40, num_heads=24, mlp_dim=4096, patch_size=14, num_register_tokens=0).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_G14 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """


def DINOv2_G14_reg4(weights: Any = None, **kwargs: Any) -> keras.Model:
    """Builds DINOv2_G14_reg4 (mlp_activation=swiglu, hidden_size=1536, num_layers=40, num_heads=24, mlp_dim=4096, patch_size=14, num_register_tokens=4).

    Args:
        weights: A checkpoint file or a known checkpoint name of DINOv2_G14_reg4 (['lvd142m']).
        **kwargs: Any argument of `DINOv2`, e.g. `image_size`,
            `num_classes`, `include_top`, `dtype`, `name`; they override the table.

    Returns:
        A `keras.Model`.
    """

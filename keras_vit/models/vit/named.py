"""ViT's, the hybrid's and DeiT's builders by name: the general one and one per size (`keras_vit.architectures`).

Importing this module imports the folder's `__init__` first, which puts the
family's sizes and records in the shared tables that each docstring is
written from. `keras_vit.models` and `keras_vit` give these names as they are
(`keras_vit.models.builders`), so IDEs and type checkers find them here.
"""

from keras_vit.models.vit.builder import VisionTransformer
from keras_vit.models.variants import named_builder

__all__ = [
    "VisionTransformer",
    "ViT_Ti16",
    "ViT_S16",
    "ViT_B16",
    "ViT_B32",
    "ViT_B8",
    "ViT_L16",
    "ViT_L32",
    "ViT_H14",
    "R_ViT_Ti16",
    "R26_ViT_S32",
    "R26_ViT_B32",
    "R50_ViT_B16",
    "R50_ViT_L32",
    "DeiT_Ti16",
    "DeiT_S16",
    "DeiT_B16",
    "DeiT_B16_384",
    "DeiT_Ti16_distilled",
    "DeiT_S16_distilled",
    "DeiT_B16_distilled",
    "DeiT_B16_384_distilled",
]

ViT_Ti16 = named_builder("ViT_Ti16")
ViT_S16 = named_builder("ViT_S16")
ViT_B16 = named_builder("ViT_B16")
ViT_B32 = named_builder("ViT_B32")
ViT_B8 = named_builder("ViT_B8")
ViT_L16 = named_builder("ViT_L16")
ViT_L32 = named_builder("ViT_L32")
ViT_H14 = named_builder("ViT_H14")
R_ViT_Ti16 = named_builder("R_ViT_Ti16")
R26_ViT_S32 = named_builder("R26_ViT_S32")
R26_ViT_B32 = named_builder("R26_ViT_B32")
R50_ViT_B16 = named_builder("R50_ViT_B16")
R50_ViT_L32 = named_builder("R50_ViT_L32")
DeiT_Ti16 = named_builder("DeiT_Ti16")
DeiT_S16 = named_builder("DeiT_S16")
DeiT_B16 = named_builder("DeiT_B16")
DeiT_B16_384 = named_builder("DeiT_B16_384")
DeiT_Ti16_distilled = named_builder("DeiT_Ti16_distilled")
DeiT_S16_distilled = named_builder("DeiT_S16_distilled")
DeiT_B16_distilled = named_builder("DeiT_B16_distilled")
DeiT_B16_384_distilled = named_builder("DeiT_B16_384_distilled")

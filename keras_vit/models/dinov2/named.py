"""DINOv2's builders by name: the general one and one per named size (`sizes.ARCHITECTURES`).

Importing this module imports the folder's `__init__` first, which puts the
family's sizes and records in the shared tables that each docstring is
written from. `keras_vit.models` and `keras_vit` give these names as they are
(`keras_vit.models.builders`), so IDEs and type checkers find them here.
"""

from keras_vit.models.dinov2.builder import DINOv2
from keras_vit.models.variants import named_builder

__all__ = [
    "DINOv2",
    "DINOv2_S14",
    "DINOv2_S14_reg4",
    "DINOv2_B14",
    "DINOv2_B14_reg4",
    "DINOv2_L14",
    "DINOv2_L14_reg4",
    "DINOv2_G14",
    "DINOv2_G14_reg4",
]

DINOv2_S14 = named_builder("DINOv2_S14")
DINOv2_S14_reg4 = named_builder("DINOv2_S14_reg4")
DINOv2_B14 = named_builder("DINOv2_B14")
DINOv2_B14_reg4 = named_builder("DINOv2_B14_reg4")
DINOv2_L14 = named_builder("DINOv2_L14")
DINOv2_L14_reg4 = named_builder("DINOv2_L14_reg4")
DINOv2_G14 = named_builder("DINOv2_G14")
DINOv2_G14_reg4 = named_builder("DINOv2_G14_reg4")

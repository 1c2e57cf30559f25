"""Swin's builders by name: the general one and one per named size (`sizes.ARCHITECTURES`).

Importing this module imports the folder's `__init__` first, which puts the
family's sizes and records in the shared tables that each docstring is
written from. `keras_vit.models` and `keras_vit` give these names as they are
(`keras_vit.models.builders`), so IDEs and type checkers find them here.
"""

from keras_vit.models.swin.builder import SwinTransformer
from keras_vit.models.variants import named_builder

__all__ = [
    "SwinTransformer",
    "Swin_T",
    "Swin_S",
    "Swin_B",
    "Swin_L",
    "Swin_B384",
    "Swin_L384",
]

Swin_T = named_builder("Swin_T")
Swin_S = named_builder("Swin_S")
Swin_B = named_builder("Swin_B")
Swin_L = named_builder("Swin_L")
Swin_B384 = named_builder("Swin_B384")
Swin_L384 = named_builder("Swin_L384")

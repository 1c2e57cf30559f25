"""Axial-ViT's builders by name: the general one and one per named size (`sizes.ARCHITECTURES`).

Importing this module imports the folder's `__init__` first, which puts the
family's sizes and records in the shared tables that each docstring is
written from. `keras_vit.models` and `keras_vit` give these names as they are
(`keras_vit.models.builders`), so IDEs and type checkers find them here.
"""

from keras_vit.models.axial.builder import AxialViT
from keras_vit.models.variants import named_builder

__all__ = [
    "AxialViT",
    "AxialViT_B16",
    "AxialViT_B32",
]

AxialViT_B16 = named_builder("AxialViT_B16")
AxialViT_B32 = named_builder("AxialViT_B32")

"""ConViT's builders by name: the general one and one per named size (`sizes.ARCHITECTURES`).

Importing this module imports the folder's `__init__` first, which puts the
family's sizes and records in the shared tables that each docstring is
written from. `keras_vit.models` and `keras_vit` give these names as they are
(`keras_vit.models.builders`), so IDEs and type checkers find them here.
"""

from keras_vit.models.convit.builder import ConViT
from keras_vit.models.variants import named_builder

__all__ = [
    "ConViT",
    "ConViT_Ti",
    "ConViT_S",
    "ConViT_B",
    "ConViT_Ti_plus",
    "ConViT_S_plus",
    "ConViT_B_plus",
]

ConViT_Ti = named_builder("ConViT_Ti")
ConViT_S = named_builder("ConViT_S")
ConViT_B = named_builder("ConViT_B")
ConViT_Ti_plus = named_builder("ConViT_Ti_plus")
ConViT_S_plus = named_builder("ConViT_S_plus")
ConViT_B_plus = named_builder("ConViT_B_plus")

"""Axial-ViT (Dosovitskiy et al. 2021, App. D.5): ViT with row and column attention.

The whole family lives in this folder: its layers (`layers.py`), builder
(`builder.py`, and by name in `named.py`), named sizes (`sizes.py`), FLOP counts (`flops.py`) and what
the shared inspection asks of a built model (`inspection.py`). No checkpoint
was published, so it has no converters and no checkpoint records. This
`__init__` registers it with the shared code, once
(`keras_vit.models.registration`).
"""

from keras_vit.families import FamilySpec
from keras_vit.models.axial.builder import AxialViT
from keras_vit.models.axial.flops import axial_block_macs, axial_vit_forward_macs, layer_macs
from keras_vit.models.axial.inspection import architecture_of
from keras_vit.models.axial.layers import AxialSelfAttention, AxialTransformerBlock
from keras_vit.models.axial.sizes import ARCHITECTURES, NO_CHECKPOINTS
from keras_vit.models.registration import register_family

SPEC = FamilySpec(
    name="AxialViT",
    builders={"AxialViT": AxialViT},
    architectures=ARCHITECTURES,
    block_classes=(AxialTransformerBlock,),
    architecture_of=architecture_of,
    layer_macs=layer_macs,
    without_checkpoints=NO_CHECKPOINTS,
    attends_within=(
        "an Axial-ViT, whose blocks attend within one row or one column of the patch grid (ViT App. D.5)"
    ),
)

register_family(SPEC)

__all__ = [
    "AxialViT", "AxialSelfAttention", "AxialTransformerBlock", "SPEC", "axial_block_macs", "axial_vit_forward_macs",
]

"""A checkpoint's layout, told from its keys, and its translation to keras_vit weight paths.

`convert_checkpoint` picks the converter of the layout: the official ViT and
big_vision `.npz`, timm state dicts and keras_vit's own names
(`keras_vit.weights.converters`), Hugging Face transformers' ViT and DeiT
(`keras_vit.weights.huggingface`), and a registered family's own
(`keras_vit.families`: Swin's three layouts, DINOv2's). Nothing here reads
files or touches a model.
"""

import dataclasses

from keras_vit.families import FAMILIES, family_of_checkpoint, family_of_keras_file
from keras_vit.inspection import VIT_FAMILY
from keras_vit.weights.converters import CONVERTERS
from keras_vit.weights.huggingface import (
    TRANSFORMERS_VIT_LAYOUTS,
    convert_transformers_vit,
    transformers_vit_layout,
)

OFFICIAL_VIT, TIMM_VIT, KERAS_VIT = "official ViT", "timm ViT", "keras_vit"
EXPECTED_FILES = {
    VIT_FAMILY: (
        "a ViT, DeiT or hybrid checkpoint: an official ViT or big_vision .npz, a timm "
        "ViT/DeiT/hybrid or transformers ViT/DeiT state dict (.safetensors) or a "
        "keras_vit .keras file of one"
    ),
}


@dataclasses.dataclass
class Conversion:
    """A checkpoint translated to keras_vit weight paths.

    Attributes:
        layout: str. The layout the keys were read in, e.g. `"timm Swin"`.
        family: str or None. `"ViT"` (ViT, DeiT, hybrid) or a registered
            family's name (`"ConViT"`, `"Swin"`, ...); None for a `.keras` file of none.
        weights: dict. keras_vit paths to arrays in Keras layout.
        position: array or None. The patch position embeddings (ViT's, or
            Swin's absolute one) as a sequence or a grid.
        unused: dict. File keys that no weight takes, with the reason.
        origins: dict. keras_vit path -> `(file key, file_shape)` for
            messages about a weight, `file_shape(model shape)` the shape the
            entry must have; empty where the names already say it.
    """

    layout: str
    family: str
    weights: dict
    position: object = None
    unused: dict = dataclasses.field(default_factory=dict)
    origins: dict = dataclasses.field(default_factory=dict)


def checkpoint_layout(fmt, arrays):
    """The layout of a checkpoint's keys and its model family, as `(layout, family)`.

    The registered families (`keras_vit.families`) are asked first.
    """
    if fmt == "keras":
        registered = family_of_keras_file(arrays)
        if registered is not None:
            return KERAS_VIT, registered
        return KERAS_VIT, VIT_FAMILY if "patch_encoder/projection/kernel" in arrays else None
    spec, layout = family_of_checkpoint(fmt, arrays)
    if spec is not None:
        return layout, spec.name
    layout = transformers_vit_layout(arrays)
    if layout is not None:
        return layout, VIT_FAMILY
    return (OFFICIAL_VIT if fmt == "npz" else TIMM_VIT), VIT_FAMILY


def convert_checkpoint(fmt, arrays):
    """Tells the layout of a checkpoint read as `fmt` and translates it.

    Args:
        fmt: str. `"npz"`, `"safetensors"` or `"keras"` (see `read_checkpoint`).
        arrays: dict. The file's arrays by key.

    Returns:
        A `Conversion`.

    Raises:
        ValueError: for a layout keras_vit does not read or a malformed entry,
            naming the entry (not the file: the caller adds it).
    """
    layout, family = checkpoint_layout(fmt, arrays)
    if family in FAMILIES and layout != KERAS_VIT:
        return Conversion(layout, family, *FAMILIES[family].convert(layout, arrays))
    if layout in TRANSFORMERS_VIT_LAYOUTS:
        return Conversion(layout, family, *convert_transformers_vit(arrays))
    weights, position, unused = CONVERTERS[fmt](arrays)
    return Conversion(layout, family, weights, position, unused)

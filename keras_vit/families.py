"""The registered model families: what a family folder tells the shared code about itself.

A family that lives in its folder (`keras_vit/models/<family>/`, DINOv2 first)
describes itself once with a `FamilySpec` and registers it with
`keras_vit.models.registration.register_family`, from the folder's
`__init__`. The shared code then asks this table, never the family's name or
classes: the weight loader for the family's checkpoint layouts and converter,
`keras_vit.inspection` for which family a built model is (its blocks say, by
their `checkpoint_family`), the variant table for its named sizes.

This module imports nothing of keras_vit, so that the lowest layers (the
weight conversion, the inspection) can read it; registering fills it when
`keras_vit.models` is imported, which `import keras_vit` does first.
"""

import dataclasses
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class FamilySpec:
    """A model family's one registration.

    Attributes:
        name: str. The family's name, e.g. `"DINOv2"`: what its checkpoints'
            conversions and its blocks' `checkpoint_family` say.
        builders: dict. Builder name -> builder function, e.g.
            `{"DINOv2": DINOv2}`.
        architectures: dict. Variant name -> `(builder name, arguments)`,
            entries of `keras_vit.architectures.ARCHITECTURES`.
        checkpoint_layout: callable `(format, arrays) -> str or None`: the
            layout of a checkpoint file of this family, or None for another
            family's file.
        convert: callable `(layout, arrays) -> (weights, position, unused)`,
            as the ViT converters return them.
        is_keras_file: callable `arrays -> bool`: whether a keras_vit `.keras`
            file's weights are of this family.
        known_checkpoints: dict. `"Variant/name"` -> `KnownCheckpoint`.
        preprocessing: dict. `"Variant/name"` -> the authors' `EvalConfig`.
        timm_preprocessing: dict. `"Variant/name"` -> timm's `EvalConfig`.
        timm_tags: dict. `"Variant/name"` -> the timm model tag of the same
            weights, e.g. `"vit_small_patch14_dinov2.lvd142m"`.
        expected_files: str. The files a model of the family loads, for the
            message that refuses another family's.
    """

    name: str
    builders: dict
    architectures: dict
    checkpoint_layout: Callable
    convert: Callable
    is_keras_file: Callable
    known_checkpoints: dict = dataclasses.field(default_factory=dict)
    preprocessing: dict = dataclasses.field(default_factory=dict)
    timm_preprocessing: dict = dataclasses.field(default_factory=dict)
    timm_tags: dict = dataclasses.field(default_factory=dict)
    expected_files: str = ""


FAMILIES = {}
"""Family name -> `FamilySpec`, in the order registered."""


def family_of_checkpoint(fmt, arrays):
    """`(spec, layout)` of the registered family whose layout a checkpoint is in, or `(None, None)`."""
    for spec in FAMILIES.values():
        layout = spec.checkpoint_layout(fmt, arrays)
        if layout is not None:
            return spec, layout
    return None, None


def family_of_keras_file(arrays) -> Optional[str]:
    """The name of the registered family a keras_vit `.keras` file's weights belong to, or None."""
    return next((spec.name for spec in FAMILIES.values() if spec.is_keras_file(arrays)), None)

"""The registered model families: what a family folder tells the shared code about itself.

A family that lives in its folder (`keras_vit/models/<family>/`, DINOv2 first)
describes itself once with a `FamilySpec` and registers it with
`keras_vit.models.registration.register_family`, from the folder's
`__init__`. The shared code then asks this table, never the family's name or
classes: the weight loader for the family's checkpoint layouts and converter,
`keras_vit.inspection` for which family a built model is and what its
builder's arguments were, the FLOP count for its layers and the variant
table for its named sizes. A family's own layers and functions are public in
its package only (`keras_vit.models.swin.SwinTransformerBlock`).

Two questions about a built model are answered by its blocks. Which checkpoint
family it is (`keras_vit.inspection.family`): a block class's
`checkpoint_family` attribute, which a family whose checkpoints are its own
sets to its spec's `name` (Swin, ConViT, DINOv2); a family whose weights are
named as ViT's (Axial-ViT) leaves it unset. Which registered family's hooks
apply (`keras_vit.inspection.registered_family`): the spec whose
`block_classes` the model has.

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
            family's file. None for a family without checkpoints.
        convert: callable `(layout, arrays) -> (weights, position, unused)`,
            as the ViT converters return them, or with a fourth item,
            `origins`: `{weight path: (file key, file_shape)}`, where
            `file_shape(model shape)` is the shape the file's entry must have
            (for the message on a mismatch; Swin's). None for a family without
            checkpoints.
        is_keras_file: callable `arrays -> bool`: whether a keras_vit `.keras`
            file's weights are of this family. None where the weight loader
            reads the family's files as ViT's (its weights are named as ViT's).
        checkpoints: dict. `"Variant/name"` -> `KnownCheckpoint`: one record
            per published file (its URL, builder arguments, layout,
            evaluation transforms and reported top-1).
        expected_files: str. The files a model of the family loads, for the
            message that refuses another family's.
        model_kind: str. What that message calls a model of the family, with
            its article (`"a SwinTransformer"`); `"a <name> model"` when empty.
        block_classes: tuple. The family's own block layer classes, where
            they are not `TransformerBlock`s: `keras_vit.inspection.blocks`
            lists them with the others.
        feature_blocks: bool. Whether the `block_classes` take the patch
            tokens of one grid, as ViT's blocks do, so that
            `keras_vit.features` taps them. Defaults to True.
        architecture_of: callable `model -> (builder name, arguments)` of a
            model whose blocks are among `block_classes`: the builder
            arguments that fix its weights, for
            `keras_vit.inspection.model_architecture`.
        layer_macs: callable `layer -> int or None`: forward MACs per image of
            one of the family's layers, None for a layer not its own
            (`keras_vit.analysis.forward_macs`).
        without_checkpoints: str. Non-empty for a family of which no
            checkpoint was published: why, the start of the message that
            refuses a checkpoint name for its models.
        attends_within: str. Non-empty for a family whose blocks do not
            attend over the whole token sequence: the model, with its article,
            and what its blocks attend within (`"an Axial-ViT, whose blocks
            ..."`), optionally with where to turn instead, for the messages
            that refuse attention rollout and a single patch grid.
        position_weight: str. The path of the model's patch position
            embedding when it is not ViT's (`patch_encoder/...`): the weight
            a checkpoint's position embeddings (a converter's `position`)
            are fitted to.
        resample_position: callable `(grid, (rows, cols)) -> grid`: how the
            model's position embedding (`position_weight`, or ViT's) is
            resampled to another grid by default. None: as the model's patch
            encoder resamples per call (its `position_interpolation`).
        weight_fitters: callable `model -> {weight path: fit}`: the model's
            weights a checkpoint may give in another shape, each with
            `fit(array, model shape, file key) -> array` (raising a
            ValueError that names the key when it cannot).
        features_refusal: str. Non-empty for a family `keras_vit.features`
            does not tap: why, and what to use instead.
        ablation_defaults: dict. Builder name -> `{argument: published
            value}` of the switches that change its weights or what they mean
            (`keras_vit.architectures.ABLATION_DEFAULTS`).
        normalize_architecture: callable `fields -> dict`: fields of
            `keras_vit.architectures.architecture` for the family's builders
            brought to the one form a built model is read back in.
        architecture_keys: tuple. Builder arguments of the family that fix
            its weights or what they compute, added to
            `keras_vit.architectures.ARCHITECTURE_KEYS`.
        testing_variants: dict. Name -> `(builder, arguments)` of a
            few-thousand-parameter model, for tests and quick trials
            (`keras_vit.models.variants.TESTING_VARIANTS`).
        attention_grid: callable `model -> (grid, patch_pixels)`: what
            `keras_vit.analysis.attention_grid` answers for a model whose
            blocks attend on grids of their own (Swin's windows). None: the
            patch grid.
        check_values: callable `(model, values, source)`: raises a ValueError
            naming `source` when checkpoint values about to be assigned to
            `model` would silently make it another model (ConViT's frozen
            gates).
    """

    name: str
    builders: dict
    architectures: dict
    checkpoint_layout: Optional[Callable] = None
    convert: Optional[Callable] = None
    is_keras_file: Optional[Callable] = None
    checkpoints: dict = dataclasses.field(default_factory=dict)
    expected_files: str = ""
    model_kind: str = ""
    block_classes: tuple = ()
    feature_blocks: bool = True
    architecture_of: Optional[Callable] = None
    layer_macs: Optional[Callable] = None
    without_checkpoints: str = ""
    attends_within: str = ""
    position_weight: str = ""
    resample_position: Optional[Callable] = None
    weight_fitters: Optional[Callable] = None
    features_refusal: str = ""
    ablation_defaults: dict = dataclasses.field(default_factory=dict)
    normalize_architecture: Optional[Callable] = None
    architecture_keys: tuple = ()
    testing_variants: dict = dataclasses.field(default_factory=dict)
    check_values: Optional[Callable] = None
    attention_grid: Optional[Callable] = None


FAMILIES = {}
"""Family name -> `FamilySpec`, in the order registered."""


def family_of_checkpoint(fmt, arrays):
    """`(spec, layout)` of the registered family whose layout a checkpoint is in, or `(None, None)`."""
    for spec in FAMILIES.values():
        layout = spec.checkpoint_layout(fmt, arrays) if spec.checkpoint_layout else None
        if layout is not None:
            return spec, layout
    return None, None


def family_of_keras_file(arrays) -> Optional[str]:
    """The name of the registered family a keras_vit `.keras` file's weights belong to, or None."""
    return next((spec.name for spec in FAMILIES.values() if spec.is_keras_file and spec.is_keras_file(arrays)), None)


def block_classes(feature_blocks_only=False):
    """The registered families' own block classes (those that tap as ViT's blocks only, if asked)."""
    return tuple(cls for spec in FAMILIES.values() if spec.feature_blocks or not feature_blocks_only
                 for cls in spec.block_classes)


def family_of_blocks(layers):
    """The spec of the registered family one of whose `block_classes` is among `layers`, or None."""
    for spec in FAMILIES.values():
        if spec.block_classes and any(isinstance(layer, spec.block_classes) for layer in layers):
            return spec
    return None


def layer_macs(layer):
    """Forward MACs of `layer` counted by the registered family it belongs to, or None."""
    for spec in FAMILIES.values():
        macs = spec.layer_macs(layer) if spec.layer_macs else None
        if macs is not None:
            return macs
    return None


def position_weights():
    """The registered families' own position embedding paths (`FamilySpec.position_weight`)."""
    return [spec.position_weight for spec in FAMILIES.values() if spec.position_weight]

"""Registers a family folder's `FamilySpec` with the shared tables, once.

`register_family` is the one call a family makes (from its folder's
`__init__`): it records the spec in `keras_vit.families.FAMILIES`, which the
weight loader and the inspection read, and adds the family's named sizes and
its checkpoint records to the tables every other family's entries live in, so
that `build_variant`, `weights=` names, `eval_config` and the parameter-count
test see them like any other. Registering a name twice,
or a variant or checkpoint another family holds, is refused.
"""

import importlib

from keras_vit import architectures, checkpoints
from keras_vit.families import FAMILIES, FamilySpec
from keras_vit.models import variants


def _check_free(table, entries, what, family):
    taken = sorted(set(entries) & set(table))
    if taken:
        raise ValueError(f"Family {family!r} registers {what} that exist already: {taken}")


def _check_hooks(spec):
    """Refuses hooks that need a partner the spec lacks, before the loader would fail on them."""
    pairs = (("checkpoint_layout", "convert"), ("convert", "checkpoint_layout"),
             ("position_weight", "resample_position"))
    for given, needed in pairs:
        if getattr(spec, given) and not getattr(spec, needed):
            raise ValueError(f"Family {spec.name!r} gives `{given}` without `{needed}`.")


def register_family(spec):
    """Adds a family to keras_vit's tables.

    Args:
        spec: `keras_vit.families.FamilySpec`.

    Raises:
        ValueError: for a spec that is not a `FamilySpec`, a family
            registered already, a variant, builder or checkpoint name
            another family (or `keras_vit.models.variants`) holds, or a hook
            without its partner (a layout without a converter, a position
            weight without its resampling). Nothing is registered then.
    """
    if not isinstance(spec, FamilySpec):
        raise ValueError(f"`spec` must be a keras_vit.families.FamilySpec. Received: spec={spec!r}")
    if spec.name in FAMILIES:
        raise ValueError(f"Family {spec.name!r} is registered already.")
    unknown = sorted({builder for builder, _ in spec.architectures.values()} - set(spec.builders))
    if unknown:
        raise ValueError(f"Family {spec.name!r} has variants of builders it does not give: {unknown}")
    _check_hooks(spec)
    named = {name: (spec.builders[builder], config) for name, (builder, config) in spec.architectures.items()}
    tables = (
        (variants.BUILDERS, spec.builders, "builders"),
        (architectures.ARCHITECTURES, spec.architectures, "variants"),
        (variants.VARIANTS, named, "variants"),
        (architectures.ABLATION_DEFAULTS, spec.ablation_defaults, "ablation defaults"),
        (variants.TESTING_VARIANTS, spec.testing_variants, "testing variants"),
        (architectures.NORMALIZERS,
         dict.fromkeys(spec.builders, spec.normalize_architecture) if spec.normalize_architecture else {},
         "architecture normalizers"),
    )
    # Every table is checked before any is written: a refused family leaves none half-filled.
    for table, entries, what in tables:
        _check_free(table, entries, what, spec.name)
    # The family's `named` module gives its builders to `keras_vit.models` and `keras_vit`
    # (`keras_vit.models.builders`): a name those modules already have would be replaced.
    models_package = importlib.import_module("keras_vit.models")
    _check_free({*vars(variants), *vars(models_package)}, [*spec.builders, *spec.architectures], "names", spec.name)
    # The records are checked (taken names included) as they are registered, before any other table is written.
    checkpoints.register_checkpoints(spec.checkpoints)
    for table, entries, _ in tables:
        table.update(entries)
    architectures.ARCHITECTURE_KEYS.extend(
        key for key in spec.architecture_keys if key not in architectures.ARCHITECTURE_KEYS)
    if spec.without_checkpoints:
        variants.WITHOUT_CHECKPOINTS.update(dict.fromkeys(spec.builders, spec.without_checkpoints))
    FAMILIES[spec.name] = spec

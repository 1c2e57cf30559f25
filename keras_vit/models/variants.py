"""The named variants: the table of `keras_vit.architectures` and thin builders on it."""

import difflib
import inspect
import os
import sys
from typing import Any, Protocol, Union

import keras

from keras_vit.architectures import ARCHITECTURES, architecture
from keras_vit.models.vit import VisionTransformer
from keras_vit.weights.registry import check_fits, is_checkpoint_file
from keras_vit.checkpoints import find_checkpoint, list_checkpoints

# Builder name -> builder; a registered family adds its own (`register_family`).
BUILDERS = {"VisionTransformer": VisionTransformer}
# Builder name -> why no checkpoint of its models was published (a registered
# family's `without_checkpoints`): such builders refuse `weights` themselves,
# with the reason, before the registry would be asked for a name it cannot know.
WITHOUT_CHECKPOINTS = {}

# name -> (builder, keyword arguments), from the one table.
VARIANTS = {name: (BUILDERS[builder], config) for name, (builder, config) in ARCHITECTURES.items()}
"""Every named variant: `name -> (builder, table arguments)`, from
`keras_vit.architectures.ARCHITECTURES`.
"""

# A few-thousand-parameter model of each family, for tests and quick trials; a registered
# family adds its own (`FamilySpec.testing_variants`).
TESTING_VARIANTS = {
    "vit": (VisionTransformer, dict(image_size=32, patch_size=8, hidden_size=32, num_layers=2,
                                    num_heads=2, mlp_dim=64, num_classes=10)),
    "hybrid": (VisionTransformer, dict(image_size=64, patch_size=1, hidden_size=32, num_layers=2,
                                       num_heads=2, mlp_dim=64, num_classes=10,
                                       resnet_stages=(1, 1))),
    "deit": (VisionTransformer, dict(image_size=32, patch_size=8, hidden_size=32, num_layers=2,
                                     num_heads=2, mlp_dim=64, num_classes=10, preprocessing="imagenet",
                                     initialization="deit", distillation=True)),
}


def build_variant(variant, /, weights=None, **kwargs):
    """Builds the named variant; keyword arguments override the table.

    Args:
        variant: str. A key of `VARIANTS`, e.g. `"ViT_B16"`. Positional only, so
            that `name=` names the model, as in the builders.
        weights: str, path or None. A checkpoint file, or a known checkpoint
            (e.g. `"imagenet21k+imagenet2012"`, or `"ViT_B16/imagenet21k"`; see
            `keras_vit.weights.KNOWN_CHECKPOINTS`) whose training settings
            (classes, resolution, pre-logits) become the defaults. A known
            checkpoint is checked against the variant before anything is built
            or downloaded. Variants of a family without checkpoints
            (Axial-ViT) take None only.
        **kwargs: Any argument of the variant's builder (`VisionTransformer`,
            or a registered family's: `ConViT`, `SwinTransformer`, ...).

    Returns:
        A `keras.Model`.

    Raises:
        ValueError: for an unknown variant, an unknown checkpoint name, a
            known checkpoint of another architecture, or any `weights` for a
            variant of a family without checkpoints.
        TypeError: for a keyword argument the variant's builder does not take.
    """
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise ValueError(
            f"Unknown variant. Expected one of {sorted(VARIANTS)}. Received: variant={variant!r}"
        )
    builder, config = VARIANTS[variant]
    _check_keywords(variant, builder, kwargs)
    if weights is not None and builder.__name__ not in WITHOUT_CHECKPOINTS and not is_checkpoint_file(weights):
        key, known = find_checkpoint(weights, variant)
        kwargs = {**known.config, **kwargs}
        check_fits(key, architecture(builder.__name__, {**config, **kwargs}), variant)
        # The full name, since `name=` may have renamed the model.
        weights = key
    return builder(**{"name": variant.lower(), **config, **kwargs}, weights=weights)


def _check_keywords(variant, builder, kwargs):
    """Raises a TypeError naming any keyword the builder does not take, with a near match."""
    accepted = set(inspect.signature(builder).parameters) - {"weights"}
    for key in sorted(set(kwargs) - accepted):
        close = difflib.get_close_matches(key, accepted, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise TypeError(
            f"{variant} (a {builder.__name__}) got an unexpected keyword argument {key!r}.{hint} "
            f"Accepted: {sorted(accepted)}"
        )


class NamedBuilder(Protocol):
    """What `named_builder` returns: a named variant's builder, as IDEs and type checkers see it."""

    def __call__(self, weights: Union[str, os.PathLike, None] = None, **kwargs: Any) -> keras.Model:
        ...


def named_builder(variant: str) -> NamedBuilder:
    """The builder of the named variant `variant`, its docstring written from the table.

    A family's `named` module binds one per size, each to the variant's name
    (`ViT_B16 = named_builder("ViT_B16")`), after the family is registered:
    the name is then in the source, where IDEs and type checkers read it,
    and the sizes and checkpoints in the docstring come from the table.

    Args:
        variant: str. A key of `VARIANTS`.

    Returns:
        A function `(weights=None, **kwargs) -> keras.Model` named `variant`,
        calling `build_variant(variant, weights=weights, **kwargs)`.

    Raises:
        ValueError: for a name that is not a key of `VARIANTS` (its family
            not registered yet, or a misspelling).
    """
    if variant not in VARIANTS:
        raise ValueError(f"Unknown variant. Expected one of {sorted(VARIANTS)}. Received: variant={variant!r}")
    builder, config = VARIANTS[variant]
    sizes = ", ".join(f"{key}={value}" for key, value in config.items())
    own = [key.split("/", 1)[1] for key in list_checkpoints(variant)]

    def build(weights=None, **kwargs):
        return build_variant(variant, weights=weights, **kwargs)

    build.__name__ = build.__qualname__ = variant
    # The module that binds it, as `collections.namedtuple` finds it: where pickle and `help` look.
    build.__module__ = sys._getframe(1).f_globals.get("__name__", __name__)
    if builder.__name__ in WITHOUT_CHECKPOINTS:
        weights_doc = f"None: {WITHOUT_CHECKPOINTS[builder.__name__]}; any other value raises a `ValueError`"
    else:
        weights_doc = f"A checkpoint file or a known checkpoint name of {variant}{f' ({own})' if own else ''}"
    build.__doc__ = (
        f"Builds {variant} ({sizes}).\n\n"
        f"Args:\n    weights: {weights_doc}.\n"
        f"    **kwargs: Any argument of `{builder.__name__}`, e.g. `image_size`,\n"
        f"        `num_classes`, `include_top`, `dtype`, `name`; they override the table.\n\n"
        "Returns:\n    A `keras.Model`.\n"
    )
    return build

"""The known checkpoints: one record per published file, registered by its family.

Names are `"<Variant>/<checkpoint>"`, e.g. `"ViT_B16/imagenet21k+imagenet2012"`.
Each is one `KnownCheckpoint`, written beside its family's code
(`keras_vit/models/<family>/checkpoints.py`) and registered with
`register_checkpoints` when the family is imported: where the file is, the
builder arguments it was trained with, its layout (which picks its converter),
its evaluation transform as its authors ran it and as timm re-tuned it, and the
top-1 its authors report. `keras_vit.load_weights` (downloading through
`keras_vit.weights.registry`), `image_classifier`, the preprocessing
(`keras_vit.preprocessing.eval_config`) and the site's checkpoint table read
these records; `list_checkpoints` and `get_checkpoint` give them to users.

This module is plain data and lookups, low in the import order, so that the
preprocessing and the weight loader can both read it.
"""

import dataclasses
import difflib
import os

from keras_vit.architectures import ARCHITECTURES
from keras_vit.layers.validation import key_ignoring_case


@dataclasses.dataclass(frozen=True)
class KnownCheckpoint:
    """A published checkpoint: everything keras_vit knows of one file.

    Attributes:
        url: str. Where to download it from.
        sha256: str or None. The file's pinned sha256 (hex); None for
            trust-on-first-use verification (`keras_vit.weights.registry`).
        config: dict. Builder arguments the checkpoint was trained with (e.g.
            `num_classes`, `representation_size`, `image_size`, `num_channels`);
            they are the defaults when a builder is given this checkpoint's name.
            Its architecture is that of the variant the name starts with
            (`variant`), whose builder and table arguments
            `keras_vit.VARIANTS[variant]` gives.
        top1: float or None. The ImageNet-1k validation top-1 (%) its authors
            report for this file; None where they report none for it (a
            pre-training head, a features-only model, a file whose figure was
            not published beside it).
        top1_source: str. Where `top1` is reported (paper table or release
            page), or why there is none. Defaults to `""`.
        name: str. `"<Variant>/<checkpoint>"`; `register_checkpoints` fills it
            from the table's key.
        layout: str. How the file's keys are laid out (e.g. `"official ViT"`,
            `"timm Swin"`): it picks the converter, and a downloaded file of
            another layout is refused.
        eval_config: `keras_vit.preprocessing.EvalConfig`. The evaluation
            transform its authors ran, with the code it was read from.
        timm_eval_config: `EvalConfig` or None. timm's re-tuned values
            (`pretrained_cfg`) for the same weights; None where timm has none.
        timm_tag: str or None. The timm model tag of the same weights (e.g.
            `"deit_small_patch16_224.fb_in1k"`); None where timm publishes no
            copy.
    """

    url: str
    sha256: str = None
    config: dict = dataclasses.field(default_factory=dict)
    top1: float = None
    top1_source: str = ""
    name: str = ""
    layout: str = ""
    eval_config: object = None
    timm_eval_config: object = None
    timm_tag: str = None

    @property
    def variant(self):
        """The named variant whose architecture the checkpoint has, e.g. `"ViT_B16"`."""
        return self.name.split("/")[0]


_HF = "https://huggingface.co/timm"
# Every known checkpoint takes RGB images; stated so that a model of other
# channels is refused before the download, not after it.
RGB = {"num_channels": 3}


def timm_hub(model_tag, top1=None, top1_source="", **config):
    """A checkpoint on the timm hub (`huggingface.co/timm/<model_tag>`), of RGB images and `config`."""
    return KnownCheckpoint(f"{_HF}/{model_tag}/resolve/main/model.safetensors", config={**RGB, **config},
                           top1=top1, top1_source=top1_source)


KNOWN_CHECKPOINTS = {}
"""Every checkpoint `weights=` can name, as `"<variant>/<name>"` (e.g. `"ViT_B16/imagenet21k"`):
its `KnownCheckpoint` record, registered by its family (`register_checkpoints`). The site's
checkpoint table is generated from it (`keras_vit.catalog`).
"""


def register_checkpoints(records):
    """Adds a family's checkpoint records to `KNOWN_CHECKPOINTS`, each named by its key.

    Args:
        records: dict. `"<Variant>/<checkpoint>"` -> `KnownCheckpoint`, each
            with its `layout` and `eval_config`.

    Returns:
        The records as registered (with their `name`).

    Raises:
        ValueError: for a name registered already, a record that is not a
            `KnownCheckpoint`, a name of another form, or a record without its
            layout or evaluation transform. Nothing is registered then.
    """
    named = {}
    for key, record in records.items():
        if not isinstance(record, KnownCheckpoint):
            raise ValueError(f"Checkpoint {key!r} must be a KnownCheckpoint. Received: {record!r}")
        if not isinstance(key, str) or key.count("/") != 1 or record.name not in ("", key):
            raise ValueError(f"A checkpoint's name must be its key, '<Variant>/<checkpoint>'. "
                             f"Received: key={key!r}, name={record.name!r}")
        missing = [field for field in ("layout", "eval_config") if not getattr(record, field)]
        if missing:
            raise ValueError(f"Checkpoint {key!r} has no {' or '.join(missing)}.")
        named[key] = dataclasses.replace(record, name=key)
    # Names are looked up in any case, so two that differ only in case would hide one another.
    seen = {}
    for key in [*KNOWN_CHECKPOINTS, *named]:
        seen.setdefault(key.lower(), []).append(key)
    taken = sorted(key for keys in seen.values() if len(keys) > 1 for key in keys[1:])
    if taken:
        raise ValueError(f"Checkpoints registered already (names compare in any case): {taken}")
    KNOWN_CHECKPOINTS.update(named)
    return named


def named_records(records):
    """`records` (`{"<Variant>/<checkpoint>": KnownCheckpoint}`) with each record's `name` set to its key."""
    return {key: dataclasses.replace(record, name=key) for key, record in records.items()}


def _of_variant(variant):
    """The known checkpoints of `variant` (any case), sorted; empty for any other string."""
    return sorted(key for key in KNOWN_CHECKPOINTS if key.split("/")[0].lower() == variant.lower())


def list_checkpoints(variant=None):
    """The names of the known checkpoints, of every variant or of one.

    Args:
        variant: str or None. A named variant (e.g. `"ViT_B16"`, any case) to
            list the checkpoints of; None for all.

    Returns:
        A sorted list of `"<Variant>/<checkpoint>"` names, each readable with
        `get_checkpoint` and accepted as `weights=`; empty for a variant of
        which none was published.

    Raises:
        ValueError: for a `variant` that is neither None nor a named variant,
            with close names.
    """
    if variant is None:
        return sorted(KNOWN_CHECKPOINTS)
    if not isinstance(variant, str):
        raise ValueError(f"`variant` must be a variant name or None. Received: variant={variant!r}")
    found = _of_variant(variant)
    # A variant without checkpoints (Axial-ViT's) has none; a misspelt name is refused, not empty.
    if not found and key_ignoring_case(variant, ARCHITECTURES) is None:
        lower = {name.lower(): name for name in ARCHITECTURES}
        close = [lower[name] for name in difflib.get_close_matches(variant.lower(), lower, n=3, cutoff=0.6)]
        hint = f" Close: {close}." if close else ""
        raise ValueError(f"Unknown variant.{hint} Expected a named variant such as 'ViT_B16' (keras_vit.VARIANTS) "
                         f"or None. Received: variant={variant!r}")
    return found


def get_checkpoint(name):
    """The record of a known checkpoint.

    Args:
        name: str. `"<Variant>/<checkpoint>"` (any case), e.g.
            `"DeiT_S16/imagenet"`.

    Returns:
        Its `KnownCheckpoint`: URL, SHA-256, builder arguments, layout,
        evaluation transforms and reported top-1.

    Raises:
        ValueError: for an unknown name, with close names.
    """
    return find_checkpoint(name, argument="name", accepts_files=False)[1]


def known_checkpoint(variant, name):
    """Returns the `KnownCheckpoint` for `name` ("Variant/ckpt", or "ckpt" with `variant`), or None."""
    key = known_checkpoint_key(variant, name)
    return None if key is None else KNOWN_CHECKPOINTS[key]


def known_checkpoint_key(variant, name):
    """The `KNOWN_CHECKPOINTS` key that `name` means (case-insensitive), or None."""
    if not isinstance(name, str):
        return None
    return key_ignoring_case(name if "/" in name else f"{variant}/{name}", KNOWN_CHECKPOINTS)


# What a path to a checkpoint file ends with; a known name ends with none of these.
_FILE_SUFFIXES = (".npz", ".safetensors", ".keras", ".h5", ".bin", ".pth", ".pt", ".ckpt")


def _looks_like_a_path(name):
    return name.lower().endswith(_FILE_SUFFIXES) or name.startswith(("/", ".", "~")) or name.count("/") > 1


def find_checkpoint(weights, variant=None, argument="weights", accepts_files=True):
    """Resolves a known checkpoint name; nothing is downloaded.

    Args:
        weights: The `weights` argument: `"Variant/ckpt"`, or `"ckpt"` for a
            model of `variant`.
        variant: str or None. The variant (or model) name that a short name
            belongs to; compared case-insensitively.
        argument: str. The caller's argument that holds `weights`, for the
            message. Defaults to `"weights"`.
        accepts_files: bool. Whether the caller takes a file path too (and
            has found none at `weights`), or full names only. Defaults to True.

    Returns:
        Tuple `(key, KnownCheckpoint)`, `key` as spelled in `KNOWN_CHECKPOINTS`.

    Raises:
        ValueError: for anything else: a path that does not exist says so
            first; an unknown name gets the variant's own names and close
            ones.
    """
    what = "a checkpoint file path or a known checkpoint name" if accepts_files else "a known checkpoint name"
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(f"`{argument}` must be {what}. Received: {argument}={weights!r} "
                         f"(of type {type(weights).__name__})")
    key = known_checkpoint_key(variant or "", weights)
    if key is not None:
        return key, KNOWN_CHECKPOINTS[key]
    name = os.fspath(weights)
    if isinstance(weights, os.PathLike) or _looks_like_a_path(name):
        if not accepts_files:
            raise ValueError(f"`{argument}` must be a known checkpoint name, '<Variant>/<checkpoint>' (e.g. "
                             f"'ViT_B16/augreg'), not a file path. Received: {argument}={name!r}")
        if not os.path.exists(os.path.expanduser(name)):
            raise ValueError(
                f"`{argument}` file not found: {name!r} does not exist (a known checkpoint name has no file "
                f"extension, e.g. 'ViT_B16/augreg'). Received: {argument}={name!r}"
            )
    # The checkpoints of the variant the name starts with, or of the model's own variant.
    own_variant = name.split("/")[0] if "/" in name else variant
    own = _of_variant(own_variant) if own_variant else []
    hint = f"; {own[0].split('/')[0]}'s are {[k.split('/', 1)[1] for k in own]}" if own else ""
    close = difflib.get_close_matches(name if "/" in name else f"{variant or ''}/{name}", KNOWN_CHECKPOINTS,
                                      n=3, cutoff=0.6)
    close_hint = f" Close names: {close}." if close else ""
    short = f" (or its part after '/' for a model built by that variant's builder{hint})" if accepts_files else (
        f" ({hint[2:]})" if hint else "")
    raise ValueError(
        f"`{argument}` must be {'a checkpoint file or ' if accepts_files else ''}a known checkpoint name{short}."
        f"{close_hint} keras_vit.list_checkpoints() lists all {len(KNOWN_CHECKPOINTS)}. Received: {argument}={name!r}"
    )

"""`load_weights`: a checkpoint file or known name into a keras_vit model, checked and reported.

The steps, each a function below: find the file (`resolve_checkpoint`), read
and translate it (`keras_vit.weights.readers`, `keras_vit.weights.conversion`),
refuse a checkpoint of the other family, fit the position embeddings to the
model's grid, swap a head of another size for a fresh one, match every other
weight by path (resampling what the model's family can fit: Swin's bias tables
of another window), and assign all values at once or none.
"""

import functools
import math
import os

import keras
import numpy as np
from keras import ops

from keras_vit import inspection
from keras_vit.families import FAMILIES
from keras_vit.layers.position import check_interpolation
from keras_vit.layers.validation import check_bool
from keras_vit.weights.conversion import EXPECTED_FILES, convert_checkpoint
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.weights.readers import read_checkpoint
from keras_vit.weights.registry import check_fits, fetch, is_checkpoint_file
from keras_vit.checkpoints import find_checkpoint
from keras_vit.weights.report import LoadReport

_POSITION = "patch_encoder/position_embedding"
# Model weights a checkpoint may lack without an error: the classifiers (feature
# checkpoints, head surgery) and DeiT's distillation token (a distilled student
# may start from a checkpoint without one).
_OPTIONAL_PREFIXES = ("head/", "pre_logits/", "head_dist/", "distillation_token/")
_HEADS = ("head", "head_dist")


def resolve_checkpoint(checkpoint, model):
    """`(path, record)`: a local path (record None), or the cached download of a known checkpoint that fits `model`.

    A known name is resolved once, to its record, and checked against the
    model's architecture first, so that a checkpoint of another size is refused
    before anything is downloaded.
    """
    if is_checkpoint_file(checkpoint):
        return os.fspath(checkpoint), None
    spec = inspection.registered_family(model)
    if spec is not None and spec.without_checkpoints:
        # Before the registry's list of names, none of which could fit.
        raise ValueError(
            f"{spec.without_checkpoints}, so `checkpoint` must be a file of this model's weights (a `.keras` "
            f"file, or `.weights.h5` for `model.load_weights`). Received: checkpoint={checkpoint!r}"
        )
    key, known = find_checkpoint(checkpoint, model.name, argument="checkpoint")
    check_fits(key, inspection.model_architecture(model), f"the model {model.name!r}")
    return fetch(known), known


def _check_family(conversion, model, source):
    """Refuses a checkpoint of one family (ViT or a registered one) for a model of another."""
    family = inspection.family(model)
    if family is None or conversion.family is None or conversion.family == family:
        return
    if family in FAMILIES:
        spec = FAMILIES[family]
        kind, expected = spec.model_kind or f"a {family} model", spec.expected_files
    else:
        kind, expected = "a ViT, DeiT or hybrid", EXPECTED_FILES[family]
    raise ValueError(
        f"{source} holds a {conversion.family} checkpoint ({conversion.layout} layout) and "
        f"cannot be loaded into the model {model.name!r}, {kind}; expected {expected}."
    )


def _shape_error(source, name, array, variable, origin):
    """The error for a checkpoint weight whose shape is not the model's."""
    if origin is None:
        return ValueError(
            f"{source}: weight {name!r} has shape {tuple(array.shape)} in the checkpoint "
            f"but {tuple(variable.shape)} in the model (a checkpoint of another model size?)."
        )
    key, file_shape = origin
    expected, received = file_shape(variable.shape), file_shape(array.shape)
    return ValueError(
        f"{source}: entry {key!r} does not fit the model's {name!r}: expected shape "
        f"{expected} (a checkpoint of another model size?). Received: shape={received}"
    )


def _grid_of(position, model_grid, source):
    """The (rows, cols, D) grid of a checkpoint's patch position embeddings."""
    if position.ndim == 3:
        return position
    count, width = position.shape
    side = math.isqrt(count)
    if side * side == count:
        rows_cols = (side, side)
    elif count == model_grid[0] * model_grid[1]:
        rows_cols = tuple(model_grid)
    else:
        raise ValueError(
            f"{source}: cannot tell the patch grid of position embeddings with {count} "
            f"positions (not square, and not the model's {tuple(model_grid)} grid)."
        )
    return position.reshape(*rows_cols, width)


def load_weights(
    model,
    checkpoint,
    strict=False,
    keep_pre_logits=False,
    position_interpolation=None,
    position_antialias=False,
):
    """Loads a checkpoint into a keras_vit model and reports what was done.

    Formats: official ViT / hybrid `.npz` (with i21k `pre_logits`), big_vision
    `.npz` (`params/` prefix, scanned blocks), timm-style `.safetensors` state
    dicts (ViT, DeiT with its distillation token, hybrid, ConViT), Hugging Face
    `transformers` ViT and DeiT state dicts (`ViTModel`,
    `ViTForImageClassification`, `DeiTForImageClassificationWithTeacher`, ...;
    see `keras_vit.weights.huggingface`), Swin state dicts in timm's,
    Microsoft's or transformers' layout (see `keras_vit.models.swin.checkpoints`) and
    keras_vit `.keras` files. A checkpoint of one family (ViT, DeiT, hybrid;
    or a registered family's: ConViT, Swin, DINOv2) is refused for a model of
    another.

    - Position embeddings of another grid are resampled in 2D (ViT Sec. 3.2):
      by default bilinearly for a ViT (PyTorch's `align_corners=False`, as
      timm's `.npz` loader), whose class slot is kept as it is; bicubically for
      Swin's absolute position embedding, as Swin's own fine-tuning does.
      `position_interpolation` picks another mode, e.g. the one of the
      checkpoint's own code (table in `keras_vit.weights.position_embedding`):
      `"bilinear_scipy"` for the official ViT `.npz`, `"bicubic"` with
      `position_antialias=True` for timm's files. A registered family
      (`keras_vit.families`) may set its own default (ConViT: a ViT's;
      Swin: bicubic); one that sets none (DINOv2) resamples with its
      model's `position_interpolation` and `position_antialias`.
    - Swin relative position bias tables of another window are resampled
      bicubically (`keras_vit.weights.position_embedding.resample_bias_table`); another
      image size with the same window needs nothing.
    - A checkpoint head of another size is dropped and the model gets a
      zero-initialized head (ViT App. B.1.1), DeiT's distillation head with
      it; `pre_logits` goes with it unless `keep_pre_logits=True`.
    - DeiT's distillation token and head may be absent from the checkpoint
      (a distilled model started from a plain ViT): they are reported as
      missing and left as initialized; a distilled checkpoint's are skipped
      by a model without them.
    - Nothing is assigned unless every check passes: on any error the model's
      weights are unchanged.

    Args:
        model: A keras_vit `keras.Model`.
        checkpoint: str or path. A file path or a known name (see
            `KNOWN_CHECKPOINTS`; `"imagenet21k"` alone works for a model named
            by its builder). A known name is checked against the model's
            architecture before it is downloaded.
        strict: bool. Raise on anything but an exact match (resampling, head
            surgery, skipped or missing weights). Defaults to `False`.
        keep_pre_logits: bool. Keep the checkpoint's pre-logits layer when the
            head is replaced. Defaults to `False`.
        position_interpolation: str or None. How position embeddings of another
            grid are resampled: `"bilinear"`, `"bicubic"` or `"bilinear_scipy"`
            (see `keras_vit.resample_position_embedding`); None for the
            defaults above. Swin's bias tables are always bicubic.
        position_antialias: bool. PyTorch's antialiased form of `"bilinear"`
            or `"bicubic"`. Defaults to `False`.

    Returns:
        A `LoadReport`.

    Raises:
        ValueError: for an unreadable, malformed or unknown file, a known name
            of another architecture (before downloading), a downloaded file in
            another layout than its record's, a weight of another
            shape (a checkpoint of another model size), a model weight the
            checkpoint lacks, or, with `strict`, any mismatch; the message names
            the file and the keys.
    """
    if not isinstance(model, keras.Model):
        raise ValueError(
            "`model` must be a keras_vit `keras.Model` (the first argument; the "
            f"checkpoint is the second). Received: model={model!r}"
        )
    check_bool(strict, "strict")
    check_bool(keep_pre_logits, "keep_pre_logits")
    if position_interpolation is not None or position_antialias:
        check_interpolation(
            position_interpolation, position_antialias, ("position_interpolation", "position_antialias")
        )
    source, known = resolve_checkpoint(checkpoint, model)
    fmt, arrays = read_checkpoint(source)
    try:
        conversion = convert_checkpoint(fmt, arrays)
    except ValueError as error:
        # Converters see arrays only; the file belongs in the message too.
        raise ValueError(f"{source}: {error}") from None
    if known is not None and known.layout and conversion.layout != known.layout:
        # The record's layout picks the converter: a file of another layout is not the checkpoint.
        raise ValueError(
            f"{source} holds a checkpoint in the {conversion.layout} layout, but {known.name!r} was published "
            f"in the {known.layout} layout: the file is not that checkpoint. Delete it (and the .sha256 record "
            "beside it) to download it again."
        )
    _check_family(conversion, model, source)
    report = LoadReport(source=source, format=fmt, layout=conversion.layout)
    report.skipped.extend(conversion.unused.items())
    variables = {v.path: v for v in model.weights}
    weights = dict(conversion.weights)
    spec = FAMILIES.get(inspection.family(model))
    position_name, resample = _POSITION, resample_position_embedding
    if spec is not None and spec.position_weight:
        # The family's own position embedding (Swin's absolute one).
        position_name = spec.position_weight
    if spec is not None and spec.resample_position is not None:
        # The family's own default (Swin's: bicubic; ConViT's: ViT's bilinear).
        resample = spec.resample_position
    elif spec is not None and position_interpolation is None:
        # A registered ViT-like family's model resamples a checkpoint's grid as it
        # resamples per call: its builder set that as the reference does (DINOv2).
        encoder = inspection.patch_encoder(model)
        position_interpolation, position_antialias = encoder.interpolation, encoder.antialias
    if position_interpolation is not None:
        resample = functools.partial(resample_position_embedding, interpolation=position_interpolation,
                                     antialias=position_antialias)
    values = _fit_position(conversion.position, variables, position_name, resample, source, report)
    replaced_head = _replace_head(weights, variables, keep_pre_logits, source, values, report)
    fitters = spec.weight_fitters(model) if spec is not None and spec.weight_fitters else {}
    _match_weights(weights, variables, conversion.origins, fitters, source, values, report)
    _complete(variables, values, replaced_head, source, report)
    if strict and not report.exact:
        problems = [n for n, *_ in report.resampled + report.skipped + report.missing]
        raise ValueError(f"{source}: strict loading found mismatches for {problems}\n{report.table()}")
    if spec is not None and spec.check_values is not None:
        # What the family refuses to assign (ConViT's learned gates into frozen ones).
        spec.check_values(model, values, source)
    _assign_all(variables, values)
    return report


def _fit_position(position, variables, name, resample, source, report):
    """The checkpoint's patch position embeddings on the model's grid (ViT Sec. 3.2).

    `name` is the model's position weight, `resample(grid, (rows, cols))` how
    a grid of another size is fitted to it.

    Returns:
        Dict of values to assign: the model's position weight, or nothing when
        the checkpoint has none (or the model has none: then reported skipped).
    """
    if position is None:
        return {}
    if name not in variables:
        report.skipped.append(("position embeddings", "the model has no position embeddings"))
        return {}
    target = tuple(variables[name].shape)
    grid = _grid_of(position, target[:2], source)
    if grid.shape[-1] != target[-1]:
        raise ValueError(
            f"{source}: the position embeddings are {grid.shape[-1]} wide but the "
            f"model's {name!r} is {target[-1]} wide (a checkpoint of another "
            "model size)."
        )
    if grid.shape[:2] == target[:2]:
        return {name: grid}
    report.resampled.append((name, grid.shape, target))
    return {name: resample(grid, target[:2])}


def _replace_head(weights, variables, keep_pre_logits, source, values, report):
    """Drops a checkpoint head of another number of classes for a fresh zero one (ViT App. B.1.1).

    Removes the dropped entries from `weights` and puts the new heads in
    `values`. Returns whether the head was replaced.
    """
    head = variables.get("head/kernel")
    source_head = weights.get("head/kernel")
    if source_head is not None and source_head.ndim != 2:
        # Checked before the surgery, which would otherwise take a malformed
        # head for one of another number of classes and drop it.
        raise ValueError(
            f"{source}: weight 'head/kernel' has shape {tuple(source_head.shape)} in the "
            "checkpoint; expected a 2-D (features, classes) kernel."
        )
    if head is None or source_head is None or tuple(source_head.shape) == tuple(head.shape):
        return False
    reason = (
        f"num_classes differs ({source_head.shape[-1]} in the checkpoint, {head.shape[-1]} "
        "in the model): fresh zero-initialized head (ViT App. B.1.1)"
    )
    heads = [f"{head_name}/{part}" for head_name in _HEADS for part in ("kernel", "bias")]
    dropped = heads if keep_pre_logits else [*heads, "pre_logits/kernel", "pre_logits/bias"]
    for name in dropped:
        if weights.pop(name, None) is not None:
            why = reason if name.startswith("head") else "dropped with the head; keep_pre_logits=True keeps it"
            report.skipped.append((name, why))
    for name in heads:
        if name in variables:
            values[name] = np.zeros(variables[name].shape, "float32")
            report.missing.append((name, "zero-initialized new head"))
    return True


def _match_weights(weights, variables, origins, fitters, source, values, report):
    """Every other checkpoint weight onto the model weight of its path, checking shapes.

    `fitters` maps the weights the model's family can fit from another shape
    (Swin's bias tables of another window) to `fit(array, shape, file key)`;
    empty for a ViT.
    """
    for name, array in weights.items():
        variable = variables.get(name)
        if variable is None:
            report.skipped.append((name, f"the model has no {name.split('/')[0]!r} layer"))
            continue
        origin = origins.get(name)
        if tuple(array.shape) == tuple(variable.shape):
            values[name] = array
        elif name in fitters:
            try:
                values[name] = fitters[name](array, tuple(variable.shape), (origin or (name,))[0])
            except ValueError as error:
                raise ValueError(f"{source}: {error}") from None
            report.resampled.append((name, tuple(array.shape), tuple(variable.shape)))
        else:
            raise _shape_error(source, name, array, variable, origin)


def _complete(variables, values, replaced_head, source, report):
    """Fills what may be absent, refuses what must not be, and reports what was loaded."""
    slot = "class_token/position_embedding"
    if slot in variables and slot not in values and "class_token/token" in values:
        # The checkpoint's class token has no position embedding (big_vision,
        # timm `no_embed_class`): a zero slot computes exactly the same thing.
        values[slot] = np.zeros(variables[slot].shape, "float32")
    absent = [name for name in variables if name not in values]
    required = [n for n in absent if not n.startswith(_OPTIONAL_PREFIXES)]
    if required:
        raise ValueError(
            f"{source}: the checkpoint has no value for {len(required)} model weight(s): "
            f"{required[:8]}{' ...' if len(required) > 8 else ''}"
        )
    report.missing.extend((name, "not in the checkpoint; left as initialized") for name in absent)
    resampled = {name for name, *_ in report.resampled}
    report.loaded.extend(
        (name, values[name].shape)
        for name in values
        if name not in resampled and not (replaced_head and name.split("/")[0] in _HEADS)
    )


def _assign_all(variables, values):
    """Assigns every value, restoring the old ones if any assignment fails."""
    backup = {name: ops.convert_to_numpy(variables[name]) for name in values}
    try:
        for name, value in values.items():
            variables[name].assign(np.asarray(value, dtype=variables[name].dtype))
    except Exception:
        for name, value in backup.items():
            variables[name].assign(value)
        raise

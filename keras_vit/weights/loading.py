"""`load_weights`: checkpoint files or known names into any keras_vit model, with a report."""

import dataclasses
import math
import os

import keras
import numpy as np
from keras import ops

from keras_vit.architectures import architecture
from keras_vit.layers.bit import ResNetStage
from keras_vit.layers.patching import DistillationToken, PatchEncoder, Patches
from keras_vit.layers.position import check_interpolation
from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_bool
from keras_vit.weights.converters import CONVERTERS, SWIN_POSITION
from keras_vit.weights.position_embedding import resample_position_embedding
from keras_vit.weights.readers import read_checkpoint
from keras_vit.weights.registry import check_fits, fetch, find_checkpoint, is_checkpoint_file
from keras_vit.weights.swin import (
    SWIN_LAYOUTS,
    bias_table_windows,
    convert_swin,
    file_shape,
    fit_bias_table,
    is_swin_model,
    resample_bicubic,
    swin_arguments,
    swin_layout,
)
from keras_vit.weights.transformers import (
    TRANSFORMERS_VIT_LAYOUTS,
    convert_transformers_vit,
    transformers_vit_layout,
)

_POSITION = "patch_encoder/position_embedding"
# Model weights a checkpoint may lack without an error: the classifiers (feature
# checkpoints, head surgery) and DeiT's distillation token (a distilled student
# may start from a checkpoint without one).
_OPTIONAL_PREFIXES = ("head/", "pre_logits/", "head_dist/", "distillation_token/")
_HEADS = ("head", "head_dist")


# The two model families: their checkpoints share no weight names.
VIT_FAMILY, SWIN_FAMILY = "ViT", "Swin"
OFFICIAL_VIT, TIMM_VIT, KERAS_VIT = "official ViT", "timm ViT", "keras_vit"
EXPECTED_FILES = {
    VIT_FAMILY: (
        "a ViT, hybrid or ConViT checkpoint: an official ViT or big_vision .npz, a timm "
        "ViT/DeiT/hybrid/ConViT or transformers ViT/DeiT state dict (.safetensors) or a "
        "keras_vit .keras file of one"
    ),
    SWIN_FAMILY: (
        "a Swin checkpoint: a timm, Microsoft or transformers Swin state dict "
        "(.safetensors) or a keras_vit .keras file of a SwinTransformer"
    ),
}


@dataclasses.dataclass
class Conversion:
    """A checkpoint translated to keras_vit weight paths.

    Attributes:
        layout: str. The layout the keys were read in, e.g. `"timm Swin"`.
        family: str or None. `"ViT"` (ViT, hybrid, ConViT) or `"Swin"`; None
            for a `.keras` file of neither.
        weights: dict. keras_vit paths to arrays in Keras layout.
        position: array or None. The patch position embeddings (ViT's, or
            Swin's absolute one) as a sequence or a grid.
        unused: dict. File keys that no weight takes, with the reason.
        origins: dict. keras_vit path -> `(file key, transform, fused)` for
            messages about a weight (see `keras_vit.weights.swin.file_shape`);
            empty where the names already say it.
    """

    layout: str
    family: str
    weights: dict
    position: object = None
    unused: dict = dataclasses.field(default_factory=dict)
    origins: dict = dataclasses.field(default_factory=dict)


def checkpoint_layout(fmt, arrays):
    """The layout of a checkpoint's keys and its model family, as `(layout, family)`."""
    if fmt == "keras":
        family = (
            SWIN_FAMILY if "patch_embed/proj/kernel" in arrays
            else VIT_FAMILY if "patch_encoder/projection/kernel" in arrays
            else None
        )
        return KERAS_VIT, family
    layout = swin_layout(arrays)
    if layout is not None:
        return layout, SWIN_FAMILY
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
    if layout in SWIN_LAYOUTS:
        weights, position, unused, origins = convert_swin(arrays, layout)
        return Conversion(layout, family, weights, position, unused, origins)
    if layout in TRANSFORMERS_VIT_LAYOUTS:
        return Conversion(layout, family, *convert_transformers_vit(arrays))
    weights, position, unused = CONVERTERS[fmt](arrays)
    return Conversion(layout, family, weights, position, unused)


@dataclasses.dataclass
class LoadReport:
    """What `load_weights` did with each weight.

    Attributes:
        source: str. The file read.
        format: str. `"npz"`, `"safetensors"` or `"keras"`.
        loaded: list of `(model weight, shape)` copied as they were.
        resampled: list of `(model weight, checkpoint shape, model shape)`:
            position embeddings of another grid, Swin bias tables of another
            window.
        skipped: list of `(checkpoint key, reason)` not loaded.
        missing: list of `(model weight, reason)` left as initialized.
        layout: str. The layout of the keys, e.g. `"official ViT"`,
            `"timm ViT"`, `"transformers ViT"`, `"transformers DeiT"`,
            `"timm Swin"`, `"Microsoft Swin"`, `"transformers Swin"` or
            `"keras_vit"`.
    """

    source: str
    format: str
    loaded: list = dataclasses.field(default_factory=list)
    resampled: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    missing: list = dataclasses.field(default_factory=list)
    layout: str = ""

    @property
    def exact(self):
        """True when every weight was loaded unchanged and nothing was left over."""
        return not (self.resampled or self.skipped or self.missing)

    def table(self):
        """The report as a plain-text table, one row per weight."""
        rows = [("status", "weight", "detail")]
        rows += [("loaded", name, str(tuple(shape))) for name, shape in self.loaded]
        rows += [("resampled", name, f"{tuple(a)} -> {tuple(b)}") for name, a, b in self.resampled]
        rows += [("skipped", name, reason) for name, reason in self.skipped]
        rows += [("missing", name, reason) for name, reason in self.missing]
        widths = [max(len(row[i]) for row in rows) for i in range(2)]
        lines = [f"{s:<{widths[0]}}  {w:<{widths[1]}}  {d}" for s, w, d in rows]
        lines.insert(1, "-" * len(lines[0]))
        layout = f", {self.layout}" if self.layout else ""
        summary = (
            f"{self.source} ({self.format}{layout}): {len(self.loaded)} loaded, "
            f"{len(self.resampled)} resampled, {len(self.skipped)} skipped, "
            f"{len(self.missing)} missing"
        )
        return "\n".join([summary, *lines])

    def __str__(self):
        return self.table()


def model_architecture(model):
    """The architecture of a keras_vit model, read from its layers (see `keras_vit.architectures`).

    Returns None for a model without a `PatchEncoder` or Swin patch embedding
    (not a keras_vit graph): then only the weight shapes are checked, after
    reading the file.
    """
    if is_swin_model(model):
        return architecture("SwinTransformer", swin_arguments(model))
    layers = model.layers
    encoder = next((layer for layer in layers if isinstance(layer, PatchEncoder)), None)
    if encoder is None:
        return None
    blocks = [layer for layer in layers if isinstance(layer, TransformerBlock)]
    patches = next((layer for layer in layers if isinstance(layer, Patches)), None)
    num_gpsa_layers = sum(block.use_gpsa for block in blocks)
    arguments = {
        "hidden_size": encoder.hidden_size,
        "num_layers": len(blocks),
        "num_gpsa_layers": num_gpsa_layers,
        "distillation": any(isinstance(layer, DistillationToken) for layer in layers),
    }
    inputs = getattr(model, "inputs", None)
    if inputs:
        arguments["num_channels"] = inputs[0].shape[-1]
    if blocks:
        arguments.update(num_heads=blocks[0].num_heads, mlp_dim=blocks[0].mlp_dim)
    if patches is not None:
        arguments["patch_size"] = patches.patch_size
    if any(layer.name == "conv_root" for layer in layers):
        arguments["resnet_stages"] = tuple(l.num_units for l in layers if isinstance(l, ResNetStage))
    return architecture("ConViT" if num_gpsa_layers else "VisionTransformer", arguments)


def resolve_checkpoint(checkpoint, model):
    """A local path, or the cached download of a known checkpoint that fits `model`.

    A known name is checked against the model's architecture first, so that a
    checkpoint of another size is refused before anything is downloaded.
    """
    if is_checkpoint_file(checkpoint):
        return os.fspath(checkpoint)
    key, known = find_checkpoint(checkpoint, model.name)
    check_fits(key, model_architecture(model), f"the model {model.name!r}")
    return fetch(known)


def model_family(model):
    """`"Swin"`, `"ViT"` (ViT, hybrid, ConViT) or None (not a keras_vit graph)."""
    if is_swin_model(model):
        return SWIN_FAMILY
    if any(isinstance(layer, PatchEncoder) for layer in model.layers):
        return VIT_FAMILY
    return None


def _check_family(conversion, model, source):
    """Refuses a checkpoint of one family (ViT or Swin) for a model of the other."""
    family = model_family(model)
    if family is None or conversion.family is None or conversion.family == family:
        return
    kind = "a SwinTransformer" if family == SWIN_FAMILY else "a ViT, hybrid or ConViT"
    raise ValueError(
        f"{source} holds a {conversion.family} checkpoint ({conversion.layout} layout) and "
        f"cannot be loaded into the model {model.name!r}, {kind}; expected "
        f"{EXPECTED_FILES[family]}."
    )


def _shape_error(source, name, array, variable, origin):
    """The error for a checkpoint weight whose shape is not the model's."""
    if origin is None:
        return ValueError(
            f"{source}: weight {name!r} has shape {tuple(array.shape)} in the checkpoint "
            f"but {tuple(variable.shape)} in the model (a checkpoint of another model size?)."
        )
    key, transform, fused = origin
    expected = file_shape(transform, variable.shape, fused)
    received = file_shape(transform, array.shape, fused)
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
    see `keras_vit.weights.transformers`), Swin state dicts in timm's,
    Microsoft's or transformers' layout (see `keras_vit.weights.swin`) and
    keras_vit `.keras` files. A checkpoint of one family (ViT, DeiT, hybrid,
    ConViT; or Swin) is refused for a model of the other.

    - Position embeddings of another grid are resampled in 2D (ViT Sec. 3.2):
      by default bilinearly for a ViT (PyTorch's `align_corners=False`, as
      timm's `.npz` loader), whose class slot is kept as it is; bicubically for
      Swin's absolute position embedding, as Swin's own fine-tuning does.
      `position_interpolation` picks another mode, e.g. the one of the
      checkpoint's own code (table in `keras_vit.weights.position_embedding`):
      `"bilinear_scipy"` for the official ViT `.npz`, `"bicubic"` with
      `position_antialias=True` for timm's files.
    - Swin relative position bias tables of another window are resampled
      bicubically (`keras_vit.weights.swin.resample_bias_table`); another
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
            of another architecture (before downloading), a weight of another
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
    source = resolve_checkpoint(checkpoint, model)
    fmt, arrays = read_checkpoint(source)
    try:
        conversion = convert_checkpoint(fmt, arrays)
    except ValueError as error:
        # Converters see arrays only; the file belongs in the message too.
        raise ValueError(f"{source}: {error}") from None
    _check_family(conversion, model, source)
    weights, position = conversion.weights, conversion.position
    report = LoadReport(source=source, format=fmt, layout=conversion.layout)
    report.skipped.extend(conversion.unused.items())
    variables = {v.path: v for v in model.weights}
    values = {}

    swin = model_family(model) == SWIN_FAMILY
    position_name, resample = (SWIN_POSITION, resample_bicubic) if swin else (_POSITION, resample_position_embedding)
    if position_interpolation is not None:
        def resample(grid, size):
            return resample_position_embedding(grid, size, position_interpolation, position_antialias)
    if position is not None:
        if position_name not in variables:
            report.skipped.append(("position embeddings", "the model has no position embeddings"))
        else:
            target = tuple(variables[position_name].shape)
            grid = _grid_of(position, target[:2], source)
            if grid.shape[-1] != target[-1]:
                raise ValueError(
                    f"{source}: the position embeddings are {grid.shape[-1]} wide but the "
                    f"model's {position_name!r} is {target[-1]} wide (a checkpoint of another "
                    "model size)."
                )
            if grid.shape[:2] != target[:2]:
                values[position_name] = resample(grid, target[:2])
                report.resampled.append((position_name, grid.shape, target))
            else:
                values[position_name] = grid

    head = variables.get("head/kernel")
    source_head = weights.get("head/kernel")
    if source_head is not None and source_head.ndim != 2:
        # Checked before the head surgery below, which would otherwise take a
        # malformed head for one of another number of classes and drop it.
        raise ValueError(
            f"{source}: weight 'head/kernel' has shape {tuple(source_head.shape)} in the "
            "checkpoint; expected a 2-D (features, classes) kernel."
        )
    replace_head = head is not None and source_head is not None and tuple(source_head.shape) != tuple(head.shape)
    if replace_head:
        reason = (
            f"num_classes differs ({source_head.shape[-1]} in the checkpoint, {head.shape[-1]} "
            "in the model): fresh zero-initialized head (ViT App. B.1.1)"
        )
        heads = [f"{head_name}/{part}" for head_name in _HEADS for part in ("kernel", "bias")]
        dropped = list(heads)
        if not keep_pre_logits:
            dropped += ["pre_logits/kernel", "pre_logits/bias"]
        for name in dropped:
            if weights.pop(name, None) is not None:
                report.skipped.append((name, reason if name.startswith("head") else "dropped with the head; keep_pre_logits=True keeps it"))
        for name in heads:
            if name in variables:
                values[name] = np.zeros(variables[name].shape, "float32")
                report.missing.append((name, "zero-initialized new head"))

    windows = bias_table_windows(model) if swin else {}
    for name, array in weights.items():
        variable = variables.get(name)
        if variable is None:
            top = name.split("/")[0]
            report.skipped.append((name, f"the model has no {top!r} layer"))
            continue
        origin = conversion.origins.get(name)
        if name in windows and tuple(array.shape) != tuple(variable.shape):
            try:
                values[name] = fit_bias_table(name, array, variable.shape, windows[name], (origin or (name,))[0])
            except ValueError as error:
                raise ValueError(f"{source}: {error}") from None
            report.resampled.append((name, tuple(array.shape), tuple(variable.shape)))
            continue
        if tuple(array.shape) != tuple(variable.shape):
            raise _shape_error(source, name, array, variable, origin)
        values[name] = array

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
        if name not in resampled and not (replace_head and name.split("/")[0] in _HEADS)
    )
    if strict and not report.exact:
        problems = [n for n, *_ in report.resampled + report.skipped + report.missing]
        raise ValueError(f"{source}: strict loading found mismatches for {problems}\n{report.table()}")

    _assign_all(variables, values)
    return report


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

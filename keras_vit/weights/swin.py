"""Swin Transformer checkpoints: timm, Microsoft and transformers layouts, and window resampling.

Three layouts of the same weights are read (Liu et al. 2021; stages `i` and
blocks `j` count from 0 in all of them):

- timm 1.0.31 (`"timm Swin"`): the patch merging opens stage `i`
  (`layers.{i}.downsample.*`, `i >= 1`), the classifier is `head.fc.*`.
- Microsoft's original code (`"Microsoft Swin"`): the merging closes stage
  `i - 1` (`layers.{i-1}.downsample.*`), the classifier is `head.*`, and
  `absolute_pos_embed` `(1, H * W, C)` is present when trained with `ape=True`.
- Hugging Face `transformers` (`"transformers Swin"`, `SwinForImageClassification`
  or `SwinModel`): separate `query`/`key`/`value` projections, the merging at
  the end of stage `i` (`swin.encoder.layers.{i}.downsample.*`), `classifier.*`.
  Both the names its `save_pretrained` writes and the hub uses
  (`attention.self.query`, `intermediate.dense`, ...) and those of its
  in-memory modules since 5.0 (`attention.q_proj`, `mlp.fc1`, ...) are read.

Every layout is first renamed to timm 1.0.31's keys, then
`keras_vit.models.swin.timm_key_map` (the one table of Swin names) gives the
keras_vit weights. Buffers that the layers compute themselves
(`relative_position_index`, `attn_mask`) are not weights and are dropped.

The relative position bias tables of another window size are resampled
bicubically, as Swin's fine-tuning from 224 px (7 x 7 windows) to 384 px
(12 x 12) does (Microsoft's `load_pretrained`, the `(heads, 2M - 1, 2M - 1)`
table through `torch.nn.functional.interpolate(mode="bicubic",
align_corners=False)`), and so is the absolute position embedding of another
patch grid.
"""

import re

import numpy as np

from keras_vit.layers.swin import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock
from keras_vit.weights.converters import QKV_PARTS, SWIN_POSITION, _require_ndim, _sequence, fuse_qkv
from keras_vit.weights.position_embedding import resample_separable

TIMM_SWIN, MICROSOFT_SWIN, TRANSFORMERS_SWIN = "timm Swin", "Microsoft Swin", "transformers Swin"
SWIN_LAYOUTS = (TIMM_SWIN, MICROSOFT_SWIN, TRANSFORMERS_SWIN)
_TABLE = "relative_position_bias_table"
# Keys that are buffers of the torch modules, recomputed by keras_vit's layers.
_BUFFER = re.compile(r"(^|\.)(relative_position_index|attn_mask)$")
_TRANSFORMERS_PREFIX = "swin."


# ---- bicubic resampling ------------------------------------------------------------


def resample_bicubic(grid, new_size):
    """Bicubically resamples a `(rows, cols, channels)` grid to `new_size`.

    The interpolation of Swin's fine-tuning at another resolution (Microsoft's
    `load_pretrained`): PyTorch's bicubic mode with `align_corners=False` and
    no antialiasing, separable along rows and columns, computed in float64
    (`keras_vit.weights.position_embedding.resample_separable`).

    Args:
        grid: array of shape `(rows, cols, channels)`.
        new_size: tuple `(new_rows, new_cols)` of positive integers.

    Returns:
        float32 array of shape `(new_rows, new_cols, channels)`.
    """
    return resample_separable(grid, new_size, "bicubic", False, "new_size", "channels")


def table_grid(window_size):
    """The `(2 Mh - 1, 2 Mw - 1)` grid of relative offsets of a `(Mh, Mw)` window (Swin Eq. 4)."""
    return tuple(2 * int(m) - 1 for m in window_size)


def resample_bias_table(table, new_window_size, window_size=None):
    """Resamples a relative position bias table to another window (Swin Sec. 3.2, 4.1).

    The `((2 Mh - 1) * (2 Mw - 1), heads)` table is a `(2 Mh - 1, 2 Mw - 1)`
    grid of offsets per head, rows before columns (the layout of
    `keras_vit.layers.window_attention.relative_position_index`); each head's
    grid is resampled bicubically, as Microsoft's code does when fine-tuning
    with larger windows.

    Args:
        table: array of shape `(offsets, heads)`.
        new_window_size: tuple `(Mh, Mw)`, the window of the model.
        window_size: tuple or None. The window the table was trained with;
            None means a square one (`offsets` must then be a square number).

    Returns:
        float32 array of shape `((2 Mh - 1) * (2 Mw - 1), heads)`.

    Raises:
        ValueError: for a table that is not 2-D, or of a size that `window_size`
            (or, without it, no square window) explains.
    """
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(
            f"`table` must have shape (offsets, heads). Received: table.shape={table.shape}"
        )
    offsets, heads = table.shape
    if window_size is None:
        side = int(round(offsets**0.5))
        if side * side != offsets or side % 2 == 0:
            raise ValueError(
                "A bias table of a square window has (2M - 1)**2 rows; pass the "
                f"`window_size` of a table of another size. Received: table.shape={table.shape}"
            )
        source = (side, side)
    else:
        source = table_grid(window_size)
        if source[0] * source[1] != offsets:
            raise ValueError(
                f"A table of window_size={tuple(window_size)} has {source[0] * source[1]} rows. "
                f"Received: table.shape={table.shape}"
            )
    target = table_grid(new_window_size)
    grid = table.reshape(*source, heads)
    return resample_bicubic(grid, target).reshape(target[0] * target[1], heads)


# ---- layouts ----------------------------------------------------------------------


def _strip_transformers_prefix(key):
    return key[len(_TRANSFORMERS_PREFIX):] if key.startswith(_TRANSFORMERS_PREFIX) else key


def swin_layout(arrays):
    """Which Swin layout a flat checkpoint dict is in: one of `SWIN_LAYOUTS`, or None.

    transformers' keys are told by their `encoder.layers.{i}.blocks.{j}` modules,
    timm's and Microsoft's by `layers.{i}.blocks.{j}`; Microsoft's from timm's
    by a merging in stage 0, a `head.weight` classifier or an
    `absolute_pos_embed` (timm 1.0.31 has none of them).
    """
    keys = [_strip_transformers_prefix(key) for key in arrays]
    if any(re.match(r"encoder\.layers\.\d+\.blocks\.\d+\.", key) for key in keys):
        return TRANSFORMERS_SWIN
    if not any(re.match(r"layers\.\d+\.blocks\.\d+\.", key) for key in arrays):
        return None
    microsoft = ("layers.0.downsample.reduction.weight", "head.weight", "absolute_pos_embed")
    return MICROSOFT_SWIN if any(key in arrays for key in microsoft) else TIMM_SWIN


def _microsoft_to_timm(arrays):
    """Renames Microsoft's keys to timm's: mergings move to the next stage, `head` to `head.fc`."""
    renamed = {}
    for key, value in arrays.items():
        target = key
        if m := re.fullmatch(r"layers\.(\d+)\.downsample\.(.+)", key):
            target = f"layers.{int(m[1]) + 1}.downsample.{m[2]}"
        elif m := re.fullmatch(r"head\.(weight|bias)", key):
            target = f"head.fc.{m[1]}"
        renamed[target] = (key, value)
    return renamed


# transformers block submodules (both namings) -> timm's.
_TRANSFORMERS_BLOCK = (
    (r"layernorm_before\.(weight|bias)", "norm1.{0}"),
    (r"layernorm_after\.(weight|bias)", "norm2.{0}"),
    (r"attention\.(?:self|relative_position_bias)\.relative_position_bias_table", "attn.relative_position_bias_table"),
    (r"attention\.(?:output\.dense|o_proj)\.(weight|bias)", "attn.proj.{0}"),
    (r"(?:intermediate\.dense|mlp\.fc1)\.(weight|bias)", "mlp.fc1.{0}"),
    (r"(?:output\.dense|mlp\.fc2)\.(weight|bias)", "mlp.fc2.{0}"),
)
_TRANSFORMERS_QKV = re.compile(r"attention\.(?:self\.(query|key|value)|(q|k|v)_proj)\.(weight|bias)")
_TRANSFORMERS_TOP = {
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "embeddings.norm.weight": "patch_embed.norm.weight",
    "embeddings.norm.bias": "patch_embed.norm.bias",
    "embeddings.position_embeddings": "absolute_pos_embed",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
    "classifier.weight": "head.fc.weight",
    "classifier.bias": "head.fc.bias",
}


def _transformers_to_timm(arrays, unused):
    """Renames transformers' keys to timm's and fuses each block's q, k and v into `qkv`.

    Returns:
        Dict `timm key -> (file key(s) for messages, value)`.
    """
    renamed, parts = {}, {}
    for key, value in arrays.items():
        name = _strip_transformers_prefix(key)
        target = _TRANSFORMERS_TOP.get(name)
        if m := re.fullmatch(r"encoder\.layers\.(\d+)\.downsample\.(norm\.weight|norm\.bias|reduction\.weight)", name):
            # transformers merges at the end of stage i, timm at the start of stage i + 1.
            target = f"layers.{int(m[1]) + 1}.downsample.{m[2]}"
        elif m := re.fullmatch(r"encoder\.layers\.(\d+)\.blocks\.(\d+)\.(.+)", name):
            block = f"layers.{m[1]}.blocks.{m[2]}"
            if qkv := _TRANSFORMERS_QKV.fullmatch(m[3]):
                part = QKV_PARTS["qkv".index((qkv[1] or qkv[2])[0])]
                parts.setdefault((block, qkv[3]), {})[part] = (key, value)
                continue
            for pattern, template in _TRANSFORMERS_BLOCK:
                if sub := re.fullmatch(pattern, m[3]):
                    target = f"{block}.{template.format(*sub.groups())}"
                    break
        if target is None:
            unused[key] = "no keras_vit weight has this name"
        else:
            renamed[target] = (key, value)
    for (block, kind), found in parts.items():
        fused = fuse_qkv(f"block {block}", kind, found)
        label = found["query"][0] if "query" in found else ""
        label = label.replace(".query.", ".{query,key,value}.").replace(".q_proj.", ".{q,k,v}_proj.")
        renamed[f"{block}.attn.qkv.{kind}"] = (label, fused)
    return renamed


# ---- conversion -------------------------------------------------------------------

# What each transform of `timm_key_map` expects of a value, for the messages.
_EXPECTED = {
    "transpose": ((2,), "an (out, in) Linear weight"),
    "conv": ((4,), "an (out, in, height, width) convolution weight"),
}


def _to_keras(key, value, transform, path):
    """One timm-named value in Keras layout."""
    if transform in _EXPECTED:
        _require_ndim(key, value, *_EXPECTED[transform])
        return value.T if transform == "transpose" else value.transpose(2, 3, 1, 0)
    if path.endswith(_TABLE):
        _require_ndim(key, value, (2,), "an (offsets, heads) relative position bias table")
    else:
        _require_ndim(key, value, (1,), "a 1-D norm scale, norm offset or bias")
    return value


def file_shape(transform, keras_shape, fused=False):
    """The shape a file entry must have to give a Keras weight of `keras_shape`.

    Args:
        transform: str. `"copy"`, `"transpose"` or `"conv"` (see `timm_key_map`).
        keras_shape: tuple. The model's weight shape.
        fused: bool. Whether the entry is one of transformers' separate q, k, v
            projections that make up a fused qkv weight.
    """
    shape = tuple(keras_shape)
    if transform == "transpose":
        shape = shape[::-1]
    elif transform == "conv":
        shape = (shape[3], shape[2], shape[0], shape[1])
    if fused:
        shape = (shape[0] // 3, *shape[1:])
    return shape


def _stage_depths(timm_arrays):
    """Blocks per stage, counted from the `layers.{i}.blocks.{j}` keys."""
    depths = {}
    for key in timm_arrays:
        if m := re.match(r"layers\.(\d+)\.blocks\.(\d+)\.", key):
            stage, block = int(m[1]), int(m[2])
            depths[stage] = max(depths.get(stage, 0), block + 1)
    return tuple(depths.get(stage, 0) for stage in range(max(depths, default=-1) + 1))


def convert_swin(arrays, layout=None):
    """A Swin checkpoint of any of `SWIN_LAYOUTS` into keras_vit weight paths.

    Args:
        arrays: dict. The file's arrays by key.
        layout: str or None. One of `SWIN_LAYOUTS`; detected when None.

    Returns:
        Tuple `(weights, position, unused, origins)`: keras_vit paths to arrays
        in Keras layout; the absolute position embedding as a `(positions, C)`
        sequence, or None; file keys that no weight takes, with the reason; and
        for every weight, `(file key, transform, fused)` for messages about it
        (`fused` for transformers' separate q, k, v).

    Raises:
        ValueError: for an entry of the wrong rank, naming it, or a block
            whose q, k, v projections are incomplete or differ in shape.
    """
    # Deferred: keras_vit.models imports the loader, which imports this module.
    from keras_vit.models.swin import timm_key_map

    layout = layout or swin_layout(arrays)
    unused = {}
    kept = {}
    for key, value in arrays.items():
        if _BUFFER.search(key):
            continue  # recomputed by the layers, not a weight
        if key.endswith("mask_token"):
            unused[key] = "the masked-image-modeling token; keras_vit's Swin has none"
            continue
        kept[key] = value
    if layout == TRANSFORMERS_SWIN:
        timm_arrays = _transformers_to_timm(kept, unused)
    elif layout == MICROSOFT_SWIN:
        timm_arrays = _microsoft_to_timm(kept)
    else:
        timm_arrays = {key: (key, value) for key, value in kept.items()}

    position = None
    if "absolute_pos_embed" in timm_arrays:
        position = _sequence(*timm_arrays.pop("absolute_pos_embed"))

    table = timm_key_map(_stage_depths(timm_arrays), include_top="head.fc.weight" in timm_arrays)
    weights, origins = {}, {}
    for path, (timm_key, transform) in table.items():
        if timm_key not in timm_arrays:
            continue  # the loader names every model weight left without a value
        key, value = timm_arrays.pop(timm_key)
        weights[path] = _to_keras(key, value, transform, path)
        origins[path] = (key, transform, layout == TRANSFORMERS_SWIN and "{" in key)
    for key, _ in timm_arrays.values():
        unused[key] = "no keras_vit weight has this name"
    return weights, position, unused, origins


# ---- models -----------------------------------------------------------------------


def is_swin_model(model):
    """True for a model built of keras_vit's Swin layers."""
    return any(isinstance(layer, SwinPatchEmbedding) for layer in model.layers)


def swin_arguments(model):
    """The `SwinTransformer` arguments that fix a Swin model's weights, read from its layers.

    Stages are told apart by the patch mergings between them; `window_size` is
    the requested window (a block on a smaller map uses a smaller one).
    """
    embedding = next(layer for layer in model.layers if isinstance(layer, SwinPatchEmbedding))
    depths, num_heads, first = [], [], None
    for layer in model.layers:
        if isinstance(layer, PatchMerging):
            depths.append(0)
        elif isinstance(layer, SwinTransformerBlock):
            if not depths:
                depths.append(0)
            if depths[-1] == 0:
                num_heads.append(layer.num_heads)
            depths[-1] += 1
            if first is None:
                first = layer
    arguments = {
        "embed_dim": embedding.embed_dim,
        "patch_size": embedding.patch_size,
        "depths": tuple(depths),
        "num_heads": tuple(num_heads),
        "absolute_position_embedding": any(w.path == SWIN_POSITION for w in model.weights),
    }
    if first is not None:
        arguments.update(window_size=first.window_size, mlp_ratio=first.mlp_ratio)
    inputs = getattr(model, "inputs", None)
    if inputs:
        arguments["num_channels"] = inputs[0].shape[-1]
    return arguments


def bias_table_windows(model):
    """Each relative position bias table of a Swin model and the window it serves.

    Returns:
        Dict `weight path -> (Mh, Mw)`; the window a block uses on its map,
        which is smaller than the requested one on a map smaller than it.
    """
    windows = {}
    for layer in model.layers:
        if isinstance(layer, SwinTransformerBlock):
            windows[f"{layer.name}/attention/{_TABLE}"] = tuple(layer.window)
    return windows


def fit_bias_table(name, table, target_shape, window, origin):
    """A checkpoint's bias table for a model table of `target_shape`, resampled if its window differs.

    Args:
        name: str. The model weight.
        table: array `(offsets, heads)` from the checkpoint.
        target_shape: tuple. The model's table shape.
        window: tuple `(Mh, Mw)`. The model block's window.
        origin: str. The checkpoint key, for messages.

    Returns:
        The table, resampled when its number of offsets differs.

    Raises:
        ValueError: naming the entry when the numbers of heads differ (a
            checkpoint of another model size) or the table is not of a square
            window.
    """
    target_shape = tuple(target_shape)
    if tuple(table.shape) == target_shape:
        return table
    if table.shape[1] != target_shape[1]:
        raise ValueError(
            f"entry {origin!r} (the model's {name!r}) has {table.shape[1]} heads but the "
            f"model's has {target_shape[1]}; expected shape (offsets, {target_shape[1]}) "
            f"(a checkpoint of another model size?). Received: shape={tuple(table.shape)}"
        )
    try:
        return resample_bias_table(table, window)
    except ValueError as error:
        raise ValueError(f"entry {origin!r} (the model's {name!r}): {error}") from None

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
`timm_key_map` (the one table of Swin names, below) gives the
keras_vit weights. Buffers that the layers compute themselves
(`relative_position_index`, `attn_mask`) are not weights and are dropped.

The relative position bias tables of another window size are resampled
bicubically (`keras_vit.weights.position_embedding.resample_bias_table`), as
Swin's fine-tuning from 224 px (7 x 7 windows) to 384 px (12 x 12) does
(Microsoft's `load_pretrained`, the `(heads, 2M - 1, 2M - 1)` table through
`torch.nn.functional.interpolate(mode="bicubic", align_corners=False)`), and so
is the absolute position embedding of another patch grid.
"""

import functools
import re

from keras_vit.weights.converters import _require_ndim, _sequence, fuse_qkv
from keras_vit.weights.huggingface import BLOCK_RULES, QKV, rename_block_entry
from keras_vit.weights.position_embedding import resample_bias_table

TIMM_SWIN, MICROSOFT_SWIN, TRANSFORMERS_SWIN = "timm Swin", "Microsoft Swin", "transformers Swin"
SWIN_LAYOUTS = (TIMM_SWIN, MICROSOFT_SWIN, TRANSFORMERS_SWIN)
_TABLE = "relative_position_bias_table"
# Keys that are buffers of the torch modules, recomputed by keras_vit's layers.
_BUFFER = re.compile(r"(^|\.)(relative_position_index|attn_mask)$")
_TRANSFORMERS_PREFIX = "swin."
# The weight of Swin's absolute position embedding (`ape`).
SWIN_POSITION = "absolute_position_embedding/position_embedding"


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


# transformers' Swin blocks: ViT's block names plus the relative position bias table.
_TRANSFORMERS_BLOCK = (
    (r"attention\.(?:self|relative_position_bias)\.relative_position_bias_table", "attn.relative_position_bias_table"),
    *BLOCK_RULES,
)
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
            entry = rename_block_entry(block, m[3], key, value, parts, _TRANSFORMERS_BLOCK)
            if entry == QKV:
                continue
            if entry is not None:
                target = f"{block}.{entry}"
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


# ---- the name table ---------------------------------------------------------------


def timm_key_map(depths, absolute_position_embedding=False, include_top=True):
    """Keras weight paths of a `SwinTransformer` and the timm 1.0.31 keys they hold.

    A pure table for the checkpoint converter: torch `Linear` weights are
    `(out, in)` and Keras `Dense` kernels `(in, out)` ("transpose"); the patch
    convolution is `(out, in, kh, kw)` in torch and `(kh, kw, in, out)` in
    Keras ("conv"); everything else is copied as is ("copy").

    Args:
        depths: tuple of ints. Blocks per stage of the model.
        absolute_position_embedding: bool. Whether the model has one (timm
            1.0.31 has none, so its key is Microsoft's `absolute_pos_embed`,
            of shape `(1, H*W, C)`, to be reshaped). Defaults to `False`.
        include_top: bool. Whether the model has its head. Defaults to `True`.

    Returns:
        Dict `keras variable path -> (timm key, transform)`, transform one of
        `"copy"`, `"transpose"`, `"conv"`.
    """
    table = {
        "patch_embed/proj/kernel": ("patch_embed.proj.weight", "conv"),
        "patch_embed/proj/bias": ("patch_embed.proj.bias", "copy"),
        "patch_embed/norm/gamma": ("patch_embed.norm.weight", "copy"),
        "patch_embed/norm/beta": ("patch_embed.norm.bias", "copy"),
    }
    if absolute_position_embedding:
        table["absolute_position_embedding/position_embedding"] = ("absolute_pos_embed", "copy")

    def linear(keras_prefix, timm_prefix, bias=True):
        table[f"{keras_prefix}/kernel"] = (f"{timm_prefix}.weight", "transpose")
        if bias:
            table[f"{keras_prefix}/bias"] = (f"{timm_prefix}.bias", "copy")

    def norm(keras_prefix, timm_prefix):
        table[f"{keras_prefix}/gamma"] = (f"{timm_prefix}.weight", "copy")
        table[f"{keras_prefix}/beta"] = (f"{timm_prefix}.bias", "copy")

    for stage, depth in enumerate(depths):
        if stage > 0:
            norm(f"stage_{stage}_downsample/norm", f"layers.{stage}.downsample.norm")
            linear(f"stage_{stage}_downsample/reduction", f"layers.{stage}.downsample.reduction", bias=False)
        for index in range(depth):
            ours, theirs = f"stage_{stage}_block_{index}", f"layers.{stage}.blocks.{index}"
            norm(f"{ours}/norm1", f"{theirs}.norm1")
            table[f"{ours}/attention/relative_position_bias_table"] = (
                f"{theirs}.attn.relative_position_bias_table", "copy"
            )
            linear(f"{ours}/attention/qkv", f"{theirs}.attn.qkv")
            linear(f"{ours}/attention/out", f"{theirs}.attn.proj")
            norm(f"{ours}/norm2", f"{theirs}.norm2")
            linear(f"{ours}/mlp/fc1", f"{theirs}.mlp.fc1")
            linear(f"{ours}/mlp/fc2", f"{theirs}.mlp.fc2")
    norm("norm", "norm")
    if include_top:
        linear("head", "head.fc")
    return table


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
        for every weight, `(file key, file_shape)` for messages about it, where
        `file_shape(model shape)` is the shape the entry must have
        (`file_shape` above, with transformers' separate q, k, v counted).

    Raises:
        ValueError: for an entry of the wrong rank, naming it, or a block
            whose q, k, v projections are incomplete or differ in shape.
    """
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
        # The file's shape of a model shape, for the loader's message on a mismatch.
        origins[path] = (key, functools.partial(file_shape, transform, fused=layout == TRANSFORMERS_SWIN and "{" in key))
    for key, _ in timm_arrays.values():
        unused[key] = "no keras_vit weight has this name"
    return weights, position, unused, origins


# ---- bias tables of the model ------------------------------------------------------


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


def checkpoint_layout(fmt, arrays):
    """The Swin layout of a state dict (`swin_layout`), or None for another family's file."""
    return None if fmt == "keras" else swin_layout(arrays)


def convert(layout, arrays):
    """`convert_swin` as the weight loader calls a family's converter (`FamilySpec.convert`)."""
    return convert_swin(arrays, layout)


def is_keras_file(arrays):
    """Whether a keras_vit `.keras` file's weights are a SwinTransformer's (its stem is named `patch_embed`)."""
    return "patch_embed/proj/kernel" in arrays

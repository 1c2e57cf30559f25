"""Hugging Face `transformers` ViT and DeiT checkpoints.

`ViTModel` / `ViTForImageClassification` (`"transformers ViT"`) and
`DeiTModel` / `DeiTForImageClassification` /
`DeiTForImageClassificationWithTeacher` (`"transformers DeiT"`) state dicts
are renamed to timm's ViT/DeiT keys, then read by
`keras_vit.weights.converters.convert_timm`, so the two layouts share one
table of keras_vit names. Both namings transformers uses are read: the one its
`save_pretrained` writes and the hub holds (`vit.encoder.layer.{i}.attention.attention.query`,
`intermediate.dense`, ...) and that of its in-memory modules since 5.0
(`vit.layers.{i}.attention.q_proj`, `mlp.fc1`, ...).

- The separate query, key and value projections are fused into timm's `qkv`
  (`[q; k; v]` along the output axis).
- `position_embeddings` are laid out `[class, (distillation,) patches]`, as
  timm's `pos_embed`.
- `ViTModel`'s and `DeiTModel`'s `pooler` (Dense + tanh on the class token)
  is the pre-logits layer of the ViT (Sec. 3.1), which is what transformers
  converted Google's ImageNet-21k `pre_logits` into: it loads into a model
  built with `representation_size` equal to the width.
- `classifier` (and `cls_classifier`) is the head; `distillation_classifier`
  the distillation head (`head_dist`).
"""

import re

from keras_vit.weights.converters import QKV_PARTS, _require_ndim, convert_timm, fuse_qkv

TRANSFORMERS_VIT, TRANSFORMERS_DEIT = "transformers ViT", "transformers DeiT"
TRANSFORMERS_VIT_LAYOUTS = (TRANSFORMERS_VIT, TRANSFORMERS_DEIT)

_PREFIX = re.compile(r"^(vit|deit)\.")
_MARKER = re.compile(
    r"^(?:(?:vit|deit)\.)?"
    r"(?:embeddings\.patch_embeddings\.projection\.|encoder\.layer\.\d+\.|layers\.\d+\.attention\.[qkvo]_proj\.)"
)
_TOP = {
    "embeddings.cls_token": "cls_token",
    "embeddings.distillation_token": "dist_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
    "classifier.weight": "head.weight",
    "classifier.bias": "head.bias",
    "cls_classifier.weight": "head.weight",
    "cls_classifier.bias": "head.bias",
    "distillation_classifier.weight": "head_dist.weight",
    "distillation_classifier.bias": "head_dist.bias",
}
# Block submodules of both namings -> timm's, for ViT, DeiT and Swin alike (Swin
# adds its relative position bias table: `keras_vit.models.swin.checkpoints`).
BLOCK_RULES = (
    (r"layernorm_before\.(weight|bias)", "norm1.{0}"),
    (r"layernorm_after\.(weight|bias)", "norm2.{0}"),
    (r"attention\.(?:output\.dense|o_proj)\.(weight|bias)", "attn.proj.{0}"),
    (r"(?:intermediate\.dense|mlp\.fc1)\.(weight|bias)", "mlp.fc1.{0}"),
    (r"(?:output\.dense|mlp\.fc2)\.(weight|bias)", "mlp.fc2.{0}"),
)
# The separate projections: `attention.attention.query` (ViT, DeiT) or
# `attention.self.query` (Swin) as saved, `attention.q_proj` in memory since 5.0.
_QKV = re.compile(r"attention\.(?:(?:attention|self)\.(query|key|value)|([qkv])_proj)\.(weight|bias)")


# What `rename_block_entry` returns for a query, key or value projection, kept for fusing.
QKV = "qkv"


def rename_block_entry(block, name, key, value, qkv_parts, rules=BLOCK_RULES):
    """Names one entry of a transformers block as timm does, or keeps it for the fused `qkv`.

    Args:
        block: The block, as the caller keys its q/k/v parts (an index or a prefix).
        name: str. The entry's key inside the block, e.g. `"layernorm_before.weight"`.
        key: str. The entry's key in the file, for messages.
        value: array. The entry.
        qkv_parts: dict `(block, kind) -> {part: (key, value)}` that the
            separate query, key and value projections are added to, for
            `fuse_qkv`.
        rules: tuple of `(pattern, template)`. Defaults to `BLOCK_RULES`.

    Returns:
        timm's key inside the block (e.g. `"norm1.weight"`), `QKV` for a
        projection kept in `qkv_parts`, or None for an entry of no known name.
    """
    if qkv := _QKV.fullmatch(name):
        part = qkv[1] or QKV_PARTS["qkv".index(qkv[2])]
        qkv_parts.setdefault((block, qkv[3]), {})[part] = (key, value)
        return QKV
    for pattern, template in rules:
        if sub := re.fullmatch(pattern, name):
            return template.format(*sub.groups())
    return None


def transformers_vit_layout(arrays):
    """`"transformers DeiT"`, `"transformers ViT"` or None for a flat checkpoint dict."""
    if not any(_MARKER.match(key) for key in arrays):
        return None
    deit = any(key.startswith("deit.") or key.endswith("distillation_token") for key in arrays)
    return TRANSFORMERS_DEIT if deit else TRANSFORMERS_VIT


def convert_transformers_vit(arrays):
    """A transformers ViT or DeiT state dict into keras_vit weight paths.

    Args:
        arrays: dict. The file's arrays by key.

    Returns:
        Tuple `(weights, position, unused)` as `convert_timm` returns it.

    Raises:
        ValueError: naming the entry, for one of the wrong rank or a block
            whose query, key and value projections are incomplete or differ.
    """
    timm_arrays, unused, parts, pooler = {}, {}, {}, {}
    for key, value in arrays.items():
        name = _PREFIX.sub("", key)
        target = _TOP.get(name)
        if name == "embeddings.mask_token":
            unused[key] = "the masked-image-modeling token; keras_vit's ViT has none"
            continue
        if m := re.fullmatch(r"pooler\.dense\.(weight|bias)", name):
            pooler[m[1]] = (key, value)
            continue
        if m := re.fullmatch(r"(?:encoder\.layer|layers)\.(\d+)\.(.+)", name):
            entry = rename_block_entry(m[1], m[2], key, value, parts)
            if entry == QKV:
                continue
            if entry is not None:
                target = f"blocks.{m[1]}.{entry}"
        if target is None:
            unused[key] = "no keras_vit weight has this name"
        else:
            timm_arrays[target] = value
    for (block, kind), found in parts.items():
        timm_arrays[f"blocks.{block}.attn.qkv.{kind}"] = fuse_qkv(f"block {block}", kind, found)
    weights, position, timm_unused = convert_timm(timm_arrays)
    unused.update(timm_unused)
    if "weight" in pooler:
        key, value = pooler["weight"]
        _require_ndim(key, value, (2,), "an (out, in) Linear weight")
        weights["pre_logits/kernel"] = value.T
    if "bias" in pooler:
        weights["pre_logits/bias"] = pooler["bias"][1]
    return weights, position, unused

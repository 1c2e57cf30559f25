"""DINOv2's checkpoints: where they are, how their files are laid out, how they were evaluated.

Two layouts are read, both as `.safetensors` state dicts:

- **timm** (`vit_*_patch14_dinov2`, `vit_*_patch14_reg4_dinov2`; also the
  names of Meta's own `dinov2/models/vision_transformer.py`, which timm keeps
  but for the SwiGLU `mlp.w12`/`mlp.w3`). timm's models with registers are
  built `no_embed_class=True`: their `pos_embed` holds the patches only, and
  the class token's position is already added into `cls_token` (timm's
  `_convert_dinov2` folded it there). keras_vit's models with registers are
  built the same way (the same parameters as timm's); Meta's files
  (`register_tokens`) keep the class slot, which is folded on loading.
- **transformers** (`Dinov2Model`, `Dinov2WithRegistersModel`), in both
  namings: the hub's (`attention.attention.query`, `mlp.weights_in`, ...) and
  that of transformers' in-memory modules since 5.0 (`attention.q_proj`,
  `mlp.gate_proj` / `up_proj` / `down_proj`). `position_embeddings` always
  has the class slot, folded into the class token for a model with registers.

Both are renamed to timm's ViT names and read by the ViT converter, with
LayerScale's `gamma`s and the registers taken out first.
"""

import re

import numpy as np

from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD, EvalConfig
from keras_vit.weights.converters import convert_timm
from keras_vit.weights.huggingface import QKV, fuse_qkv, rename_block_entry
from keras_vit.checkpoints import KnownCheckpoint, named_records

TIMM_DINOV2, TRANSFORMERS_DINOV2 = "timm DINOv2", "transformers DINOv2"

_TIMM_MARKER = re.compile(r"blocks\.\d+\.(?:ls[12]\.gamma|mlp\.w12\.weight)")
_TRANSFORMERS_MARKER = re.compile(r"(?:dinov2\.|dinov2_with_registers\.)?encoder\.layer\.\d+\.layer_scale1\.lambda1")
_TRANSFORMERS_PREFIX = re.compile(r"^(?:dinov2|dinov2_with_registers)\.")
_TRANSFORMERS_TOP = {
    "embeddings.cls_token": "cls_token",
    "embeddings.register_tokens": "register_tokens",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
}
_TRANSFORMERS_BLOCK_RULES = (
    (r"norm([12])\.(weight|bias)", "norm{0}.{1}"),
    (r"layer_scale([12])\.lambda1", "ls{0}.gamma"),
    (r"attention\.(?:output\.dense|o_proj)\.(weight|bias)", "attn.proj.{0}"),
    (r"mlp\.(?:fc1|weights_in)\.(weight|bias)", "mlp.fc1.{0}"),
    (r"mlp\.(?:fc2|weights_out|down_proj)\.(weight|bias)", "mlp.fc2.{0}"),
)


def checkpoint_layout(fmt, arrays):
    """`TIMM_DINOV2`, `TRANSFORMERS_DINOV2` or None (a file of another family) for a file read as `fmt`."""
    if fmt != "safetensors":
        return None
    if any(_TRANSFORMERS_MARKER.fullmatch(key) for key in arrays):
        return TRANSFORMERS_DINOV2
    if "cls_token" not in arrays or not any(_TIMM_MARKER.fullmatch(key) for key in arrays):
        return None
    # timm's DeiT III files have LayerScale too, but a head and 16-pixel patches;
    # DINOv2's have registers, the mask token (Meta's) or no head, and 14-pixel patches.
    patch = arrays.get("patch_embed.proj.weight")
    dinov2 = (
        any(key in arrays for key in ("reg_token", "register_tokens", "mask_token"))
        or "head.weight" not in arrays
        or (patch is not None and tuple(patch.shape[-2:]) == (14, 14))
    )
    return TIMM_DINOV2 if dinov2 else None


def convert(layout, arrays):
    """A DINOv2 state dict into keras_vit weight paths.

    Args:
        layout: str. `TIMM_DINOV2` or `TRANSFORMERS_DINOV2`.
        arrays: dict. The file's arrays by key.

    Returns:
        `(weights, position, unused)`, as the ViT converters return them.
    """
    if layout == TRANSFORMERS_DINOV2:
        arrays, unused = _transformers_to_timm(arrays)
    else:
        unused = {}
    weights, position, timm_unused = _convert_timm_dinov2(arrays)
    unused.update(timm_unused)
    return weights, position, unused


def _convert_timm_dinov2(arrays):
    vit_arrays, weights, unused = {}, {}, {}
    for key, value in arrays.items():
        if m := re.fullmatch(r"blocks\.(\d+)\.ls([12])\.gamma", key):
            weights[f"encoderblock_{m[1]}/ls{m[2]}/gamma"] = value.reshape(-1)
        elif key in ("reg_token", "register_tokens"):
            weights["register_tokens/tokens"] = value.reshape(-1, value.shape[-1])
        elif key == "mask_token":
            unused[key] = "iBOT's mask token, used in pre-training only"
        elif m := re.fullmatch(r"blocks\.(\d+)\.mlp\.w(12|3)\.(weight|bias)", key):
            vit_arrays[f"blocks.{m[1]}.mlp.fc{1 if m[2] == '12' else 2}.{m[3]}"] = value
        else:
            vit_arrays[key] = value
    registers = "register_tokens/tokens" in weights
    if registers and "register_tokens" in arrays and {"cls_token", "pos_embed"} <= set(vit_arrays):
        # Meta's (and transformers') models with registers keep a class slot in
        # `pos_embed`; timm's (`no_embed_class`) and keras_vit's fold it into
        # the class token, which computes the same, as timm's `_convert_dinov2` does.
        position = vit_arrays["pos_embed"]
        vit_arrays["cls_token"] = vit_arrays["cls_token"] + position[..., :1, :]
        vit_arrays["pos_embed"] = position[..., 1:, :]
    if registers and "pos_embed" in vit_arrays:
        # Without a class slot now: a zero one keeps the ViT converter's layout, and is dropped after it.
        position = vit_arrays["pos_embed"]
        vit_arrays["pos_embed"] = np.concatenate([np.zeros_like(position[..., :1, :]), position], axis=-2)
    vit_weights, position, vit_unused = convert_timm(vit_arrays)
    if registers:
        vit_weights.pop("class_token/position_embedding", None)
    weights.update(vit_weights)
    unused.update(vit_unused)
    return weights, position, unused


def _transformers_to_timm(arrays):
    """Renames a transformers `Dinov2Model` / `Dinov2WithRegistersModel` state dict to timm's DINOv2 names."""
    renamed, unused, qkv_parts, gated = {}, {}, {}, {}
    for key, value in arrays.items():
        name = _TRANSFORMERS_PREFIX.sub("", key)
        if name == "embeddings.mask_token":
            unused[key] = "iBOT's mask token, used in pre-training only"
            continue
        target = _TRANSFORMERS_TOP.get(name)
        if m := re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", name):
            if sub := re.fullmatch(r"mlp\.(gate|up)_proj\.(weight|bias)", m[2]):
                gated.setdefault((m[1], sub[2]), {})[sub[1]] = value
                continue
            entry = rename_block_entry(m[1], m[2], key, value, qkv_parts, rules=_TRANSFORMERS_BLOCK_RULES)
            if entry == QKV:
                continue
            if entry is not None:
                target = f"blocks.{m[1]}.{entry}"
        if target is None:
            unused[key] = (
                "Dinov2ForImageClassification's head reads the class token and the patch mean together; "
                "keras_vit's head reads the class token" if name.startswith("classifier.")
                else "no keras_vit weight has this name"
            )
        else:
            renamed[target] = value
    for (block, kind), found in qkv_parts.items():
        renamed[f"blocks.{block}.attn.qkv.{kind}"] = fuse_qkv(f"block {block}", kind, found)
    for (block, kind), halves in gated.items():
        if set(halves) != {"gate", "up"}:
            raise ValueError(
                f"block {block} of the checkpoint has the SwiGLU {sorted(halves)} {kind} but not both of "
                "`mlp.gate_proj` and `mlp.up_proj`."
            )
        # SiLU gates the first half of keras_vit's (and timm's, and Meta's) packed `fc1`.
        renamed[f"blocks.{block}.mlp.fc1.{kind}"] = np.concatenate([halves["gate"], halves["up"]], axis=0)
    return renamed, unused


# The published checkpoints, on the timm hub (Meta's weights in timm's layout).
_HUB = "https://huggingface.co/timm"
# Trained at 518 px with ImageNet mean/std inputs, without a head.
_TRAINED = {"num_channels": 3, "image_size": 518, "include_top": False, "preprocessing": "imagenet"}
_TIMM_NAMES = {"S": "small", "B": "base", "L": "large", "G": "giant"}


_EVAL_SOURCE = (
    "facebookresearch/dinov2 dinov2/data/transforms.py make_classification_eval_transform: "
    "transforms.Resize(resize_size, interpolation=BICUBIC) of the PIL image, CenterCrop(crop_size), "
    "Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD), with resize_size=256, crop_size=224"
)
# DINOv2 evaluates its frozen features on 224 px centre crops of images resized to 256 (the
# position embeddings resampled from 518), not at the 518 px the models were trained at.
_EVAL = EvalConfig(224, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD, _EVAL_SOURCE)
# timm's `pretrained_cfg` for the same files resizes to 518 without a crop instead.
_TIMM_EVAL = EvalConfig(
    518, "bicubic", 1.0, "center", True, True, IMAGENET_MEAN, IMAGENET_STD,
    "timm vision_transformer.py default_cfgs 'vit_*_patch14*_dinov2.lvd142m': input_size 518, crop_pct 1.0",
)


def _record(tag):
    """The record of timm's file `tag` (Meta's weights in timm's layout)."""
    return KnownCheckpoint(f"{_HUB}/{tag}/resolve/main/model.safetensors", config=dict(_TRAINED),
                           top1_source="none: a features-only model, without a classifier head", layout=TIMM_DINOV2,
                           eval_config=_EVAL, timm_eval_config=_TIMM_EVAL, timm_tag=tag)


def known_checkpoints():
    """`"DINOv2_<size>14[_reg4]/lvd142m"` -> its record (timm's `*.lvd142m` files)."""
    return named_records({
        f"DINOv2_{size}14{registers}/lvd142m": _record(f"vit_{timm_size}_patch14{registers}_dinov2.lvd142m")
        for size, timm_size in _TIMM_NAMES.items()
        for registers in ("", "_reg4")
    })

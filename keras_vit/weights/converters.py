"""Translating checkpoint names and layouts into keras_vit weight paths.

Each converter takes the flat dict read from a file and returns
`(weights, position, unused)`: `weights` maps keras_vit variable paths (e.g.
`encoderblock_3/attention/qkv/kernel`) to arrays in Keras layout, `position` is
the patch part of the position embeddings as a `(N, D)` sequence or a
`(rows, cols, D)` grid (the loader fits it to the model's grid), and `unused`
maps the file's keys that no keras_vit weight takes to the reason.
A registered family's converters are in its folder (Swin's in
`keras_vit.models.swin.checkpoints`); the loader tells the layout of a file
from its keys and picks the converter.
"""

import re

import numpy as np

from keras_vit.families import position_weights


# ---- official ViT (google-research/vision_transformer) and big_vision .npz -------

_OFFICIAL_PREFIXES = ("params/img/", "params/", "opt/target/")


def _require_ndim(key, value, ndims, layout):
    """Raises a ValueError naming `key` unless `value` has one of the ranks `ndims`.

    The conversions below index and transpose by axis, so a malformed entry
    would otherwise fail inside numpy with a message that names no entry.
    """
    if value.ndim not in ndims:
        raise ValueError(f"entry {key!r} has shape {tuple(value.shape)}; expected {layout}.")


# Names of the separate attention projections that checkpoints of transformers keep apart.
QKV_PARTS = ("query", "key", "value")


def fuse_qkv(block, kind, found, axis=0):
    """One fused `qkv` weight or bias from a block's separate query, key and value ones, checked.

    Every converter that meets separate projections (the official `.npz`,
    transformers' ViT, DeiT and Swin) fuses them here, with the same checks and
    messages.

    Args:
        block: str. The block as messages name it (`"block 3"`).
        kind: `"weight"`, `"kernel"` or `"bias"`.
        found: dict from each of `QKV_PARTS` present to `(file key, array)`.
        axis: int. The output axis: 0 for torch's `(out, in)` weights (timm's
            `qkv`), -1 for Flax's `(in, out)` kernels. Defaults to 0.

    Returns:
        The three arrays concatenated `[q; k; v]` along `axis`.

    Raises:
        ValueError: naming the entries, when a part is missing, has the wrong
            rank, or the three differ in shape.
    """
    if len(found) != 3:
        missing = [part for part in QKV_PARTS if part not in found]
        raise ValueError(
            f"{block} of the checkpoint has {sorted(key for key, _ in found.values())} but lacks its "
            f"attention {missing} {kind}; expected the query, key and value projections of every block."
        )
    parts = [found[part] for part in QKV_PARTS]
    if kind == "bias":
        ndim, layout = (1,), "a 1-D bias"
    else:
        ndim, layout = (2,), "an (out, in) Linear weight" if axis == 0 else "an (in, out) kernel"
    for key, value in parts:
        _require_ndim(key, value, ndim, layout)
    shapes = {key: tuple(value.shape) for key, value in parts}
    if len(set(shapes.values())) != 1:
        raise ValueError(
            f"the attention query, key and value {kind}s of {block} differ in shape; "
            f"expected three equal shapes. Received: {shapes}"
        )
    return np.concatenate([value for _, value in parts], axis=axis)


def _sequence(key, value):
    """A `(1, N, D)` or `(N, D)` position embedding as `(N, D)`."""
    _require_ndim(key, value, (2, 3), "(1, positions, hidden) or (positions, hidden) position embeddings")
    if value.ndim == 3 and value.shape[0] != 1:
        raise ValueError(
            f"entry {key!r} has shape {tuple(value.shape)}; expected (1, positions, hidden)."
        )
    return value.reshape(value.shape[-2], value.shape[-1])


def _conv_kernel_to_dense(kernel):
    """(kh, kw, C, D) convolution kernel -> (kh * kw * C, D) kernel of `PatchEncoder`."""
    return kernel.reshape(-1, kernel.shape[-1])


def _torch_conv_to_keras(key, weight):
    """PyTorch (out, in, kh, kw) -> Keras (kh, kw, in, out)."""
    _require_ndim(key, weight, (4,), "an (out, in, height, width) convolution weight")
    return weight.transpose(2, 3, 1, 0)


def _unscan(arrays, prefix):
    """Splits big_vision's scanned `encoderblock/...` arrays into per-block ones."""
    scanned = f"{prefix}Transformer/encoderblock/"
    out = {}
    for key, value in arrays.items():
        if key.startswith(scanned):
            if value.ndim == 0:
                raise ValueError(f"entry {key!r} has shape (); expected a scanned array with the blocks on axis 0.")
            for index in range(value.shape[0]):
                out[f"{prefix}Transformer/encoderblock_{index}/{key[len(scanned):]}"] = value[index]
        else:
            out[key] = value
    return out


def convert_official_npz(arrays):
    """Official ViT / hybrid `.npz` (incl. i21k `pre_logits`) and big_vision `.npz`.

    The official layout stores the position embeddings with the class slot under
    `Transformer/posembed_input/pos_embedding`; big_vision stores them without it
    under `params/pos_embedding` (its class token has no position embedding),
    names the sublayers `MultiHeadDotProductAttention_0`, `LayerNorm_1`,
    `MlpBlock_0`, and may scan the blocks into one stacked array each.
    """
    prefix = next((p for p in _OFFICIAL_PREFIXES if f"{p}embedding/kernel" in arrays), "")
    big_vision = prefix.startswith("params/")
    arrays = _unscan(arrays, prefix)
    names = {key[len(prefix):]: key for key in arrays if key.startswith(prefix)}
    unused = {key: "not part of the model (optimizer state or metadata)" for key in arrays if not key.startswith(prefix)}
    weights, qkv, position = {}, {}, None
    attention, norm2, mlp = (
        ("MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
        if big_vision
        else ("MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    )
    norm_param = {"scale": "gamma", "bias": "beta"}
    block = r"Transformer/encoderblock_(\d+)/"
    for name, key in names.items():
        value = arrays[key]
        target = None
        if name == "embedding/kernel":
            _require_ndim(key, value, (4,), "a (patch_height, patch_width, channels, hidden) patch kernel")
            weights["patch_encoder/projection/kernel"] = _conv_kernel_to_dense(value)
        elif name == "embedding/bias":
            weights["patch_encoder/projection/bias"] = value
        elif name == "cls":
            weights["class_token/token"] = value.reshape(-1)
        elif name in ("Transformer/posembed_input/pos_embedding", "pos_embedding"):
            sequence = _sequence(key, value)
            if not big_vision and "cls" in names:
                weights["class_token/position_embedding"] = sequence[0]
                sequence = sequence[1:]
            position = sequence
        elif m := re.fullmatch(r"(conv_root|block\d+/unit\d+/conv(?:\d|_proj))/kernel", name):
            target = f"{m[1]}/kernel"
        elif m := re.fullmatch(r"(gn_root|block\d+/unit\d+/gn(?:\d|_proj))/(scale|bias)", name):
            target = f"{m[1]}/{norm_param[m[2]]}"
        elif m := re.fullmatch(r"(?:Transformer/)?encoder_norm/(scale|bias)", name):
            target = f"encoder_norm/{norm_param[m[1]]}"
        elif m := re.fullmatch(r"(pre_logits|head)/(kernel|bias)", name):
            target = name
        elif m := re.fullmatch(block + r"LayerNorm_0/(scale|bias)", name):
            target = f"encoderblock_{m[1]}/norm1/{norm_param[m[2]]}"
        elif m := re.fullmatch(block + norm2 + r"/(scale|bias)", name):
            target = f"encoderblock_{m[1]}/norm2/{norm_param[m[2]]}"
        elif m := re.fullmatch(block + mlp + r"/Dense_([01])/(kernel|bias)", name):
            target = f"encoderblock_{m[1]}/mlp/fc{int(m[2]) + 1}/{m[3]}"
        elif m := re.fullmatch(block + attention + r"/(query|key|value)/(kernel|bias)", name):
            # (D, heads, head_dim) kernels and (heads, head_dim) biases.
            if m[3] == "kernel":
                _require_ndim(key, value, (3,), "a (hidden, heads, head_dim) kernel")
            else:
                _require_ndim(key, value, (2,), "a (heads, head_dim) bias")
            flat = value.reshape(value.shape[0], -1) if m[3] == "kernel" else value.reshape(-1)
            qkv.setdefault((m[1], m[3]), {})[m[2]] = (key, flat)
        elif m := re.fullmatch(block + attention + r"/out/(kernel|bias)", name):
            target = f"encoderblock_{m[1]}/attention/out/{m[2]}"
            if m[2] == "kernel":
                _require_ndim(key, value, (3,), "a (heads, head_dim, hidden) kernel")
                value = value.reshape(-1, value.shape[-1])
        else:
            unused[key] = "no keras_vit weight has this name"
        if target is not None:
            weights[target] = value
    for (index, kind), found in qkv.items():
        # Each part's heads were flattened above; fused they make the (D, 3 D) qkv kernel.
        weights[f"encoderblock_{index}/attention/qkv/{kind}"] = fuse_qkv(f"block {index}", kind, found, axis=-1)
    return weights, position, unused


# ---- timm state dicts (.safetensors) ---------------------------------------------

_TIMM_BLOCK_RULES = (
    (r"norm([12])\.(weight|bias)", "norm{0}/{1}"),
    (r"attn\.qkv\.(weight|bias)", "attention/qkv/{0}"),
    (r"attn\.qk\.weight", "attention/qk/weight"),
    (r"attn\.v\.weight", "attention/v/weight"),
    (r"attn\.proj\.(weight|bias)", "attention/out/{0}"),
    (r"attn\.pos_proj\.(weight|bias)", "attention/pos_proj/{0}"),
    (r"attn\.gating_param", "attention/gating"),
    (r"mlp\.fc([12])\.(weight|bias)", "mlp/fc{0}/{1}"),
)


def _torch_param(path, value):
    """Renames a torch parameter to Keras and transposes Linear kernels."""
    head, _, leaf = path.rpartition("/")
    is_norm = re.search(r"(^|/)(norm\d?|encoder_norm|gn\w*)$", head) is not None
    if leaf == "weight" and is_norm:
        return f"{head}/gamma", value
    if leaf == "bias" and is_norm:
        return f"{head}/beta", value
    if leaf == "weight":
        return f"{head}/kernel", value.T if value.ndim == 2 else value
    return path, value


def convert_timm(arrays):
    """timm-style ViT, DeiT and hybrid (`vit_*_r*`) state dicts.

    `pos_embed` has a class slot when the dict has a `cls_token`, and a
    distilled DeiT's (`dist_token`, `head_dist`) a second one for the
    distillation token, in the order `[class, distillation, patches]`. (A
    family whose `pos_embed` has none, ConViT's, takes it out first.)
    """
    if "fc_norm.weight" in arrays:
        raise ValueError(
            "timm checkpoints with `fc_norm` (global-average-pooling variants that "
            "normalize after pooling) have no keras_vit equivalent; keras_vit's "
            "'gap' pooling normalizes before pooling, as the reference ViT does."
        )
    if any(re.fullmatch(r"blocks\.\d+\.ls[12]\.gamma", key) for key in arrays):
        raise ValueError(
            "timm checkpoints with LayerScale (`blocks.*.ls1.gamma`, `ls2.gamma`: DeiT III "
            "`deit3_*` and similar) have no keras_vit equivalent; keras_vit's DeiT is the "
            "original DeiT (`deit_*_patch16_*`)."
        )
    weights, unused, position = {}, {}, None
    for key, value in arrays.items():
        path = None
        if key == "cls_token":
            weights["class_token/token"] = value.reshape(-1)
        elif key == "dist_token":
            weights["distillation_token/token"] = value.reshape(-1)
        elif key == "pos_embed":
            sequence = _sequence(key, value)
            if "cls_token" in arrays:
                weights["class_token/position_embedding"] = sequence[0]
                sequence = sequence[1:]
                if "dist_token" in arrays:
                    weights["distillation_token/position_embedding"] = sequence[0]
                    sequence = sequence[1:]
            position = sequence
        elif key == "patch_embed.proj.weight":
            weights["patch_encoder/projection/kernel"] = _conv_kernel_to_dense(_torch_conv_to_keras(key, value))
        elif key == "patch_embed.proj.bias":
            weights["patch_encoder/projection/bias"] = value
        elif m := re.fullmatch(r"patch_embed\.backbone\.(?:stem\.)?(conv|norm)\.weight", key):
            weights["conv_root/kernel" if m[1] == "conv" else "gn_root/gamma"] = (
                _torch_conv_to_keras(key, value) if m[1] == "conv" else value
            )
        elif key in ("patch_embed.backbone.stem.norm.bias", "patch_embed.backbone.norm.bias"):
            weights["gn_root/beta"] = value
        elif m := re.fullmatch(
            r"patch_embed\.backbone\.stages\.(\d+)\.blocks\.(\d+)\.(conv\d|norm\d|downsample\.conv|downsample\.norm)\.(weight|bias)",
            key,
        ):
            layer = {"downsample.conv": "conv_proj", "downsample.norm": "gn_proj"}.get(m[3], m[3].replace("norm", "gn"))
            unit = f"block{int(m[1]) + 1}/unit{int(m[2]) + 1}/{layer}"
            if layer.startswith("conv"):
                weights[f"{unit}/kernel"] = _torch_conv_to_keras(key, value)
            else:
                weights[f"{unit}/{'gamma' if m[4] == 'weight' else 'beta'}"] = value
        elif m := re.fullmatch(r"blocks\.(\d+)\.(.+)", key):
            for pattern, template in _TIMM_BLOCK_RULES:
                if sub := re.fullmatch(pattern, m[2]):
                    path = f"encoderblock_{m[1]}/" + template.format(*sub.groups())
                    break
        elif m := re.fullmatch(r"norm\.(weight|bias)", key):
            path = f"encoder_norm/{m[1]}"
        elif m := re.fullmatch(r"(head|head_dist)\.(weight|bias)", key):
            path = f"{m[1]}/{m[2]}"
        else:
            unused[key] = "no keras_vit weight has this name"
            continue
        if path is None and key.startswith("blocks."):
            unused[key] = "no keras_vit weight has this name"
        elif path is not None:
            name, array = _torch_param(path, value)
            weights[name] = array
    return weights, position, unused


def convert_keras(arrays):
    """A keras_vit `.keras` file: the names are already keras_vit paths."""
    weights = dict(arrays)
    position = weights.pop("patch_encoder/position_embedding", None)
    for name in position_weights():
        # A registered family's own position embedding (Swin's absolute one).
        if position is None:
            position = weights.pop(name, None)
    return weights, position, {}


CONVERTERS = {"npz": convert_official_npz, "safetensors": convert_timm, "keras": convert_keras}

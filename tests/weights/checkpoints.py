"""Generated checkpoint files in the exact names, shapes and dtypes of the real formats."""

import functools

import numpy as np
from safetensors.numpy import save_file

from runs.reference import timm, torch

# The tiny configuration every reference test uses (image 32, patch 8: a 4x4 grid).
TINY = dict(image_size=32, patch_size=8, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64, num_classes=10)


def _random(rng, shape, scale=0.2):
    return rng.normal(0.0, scale, shape).astype("float32")


def official_npz_arrays(
    seed=0, hidden=32, heads=2, mlp=64, depth=2, patch=8, channels=3, grid=4, classes=10,
    pre_logits=None, big_vision=False, scanned=False, resnet_stages=None, class_token=True,
):
    """A random checkpoint in the google-research/vision_transformer (or big_vision) layout."""
    rng = np.random.default_rng(seed)
    head_dim = hidden // heads
    prefix = "params/" if big_vision else ""
    arrays = {}
    feature_channels = channels
    if resnet_stages is not None:
        arrays["conv_root/kernel"] = _random(rng, (7, 7, channels, 64))
        arrays["gn_root/scale"] = 1 + _random(rng, (64,))
        arrays["gn_root/bias"] = _random(rng, (64,))
        in_channels = 64
        for s, units in enumerate(resnet_stages):
            width = 64 * 2**s
            for u in range(units):
                unit = f"block{s + 1}/unit{u + 1}/"
                shapes = {"conv1": (1, 1, in_channels, width), "conv2": (3, 3, width, width), "conv3": (1, 1, width, 4 * width)}
                if u == 0:
                    shapes["conv_proj"] = (1, 1, in_channels, 4 * width)
                for conv, shape in shapes.items():
                    arrays[f"{unit}{conv}/kernel"] = _random(rng, shape)
                    norm = conv.replace("conv", "gn")
                    arrays[f"{unit}{norm}/scale"] = 1 + _random(rng, shape[-1:])
                    arrays[f"{unit}{norm}/bias"] = _random(rng, shape[-1:])
                in_channels = 4 * width
        feature_channels = in_channels
    arrays["embedding/kernel"] = _random(rng, (patch, patch, feature_channels, hidden), 0.05)
    arrays["embedding/bias"] = _random(rng, (hidden,))
    if class_token:
        arrays["cls"] = _random(rng, (1, 1, hidden))
    if big_vision:
        arrays["pos_embedding"] = _random(rng, (1, grid * grid, hidden))
    else:
        arrays["Transformer/posembed_input/pos_embedding"] = _random(rng, (1, grid * grid + int(class_token), hidden))
    mha, ln2, mlp_name = (
        ("MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0")
        if big_vision else ("MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    )
    blocks = []
    for _ in range(depth):
        block = {}
        for ln in ("LayerNorm_0", ln2):
            block[f"{ln}/scale"] = 1 + _random(rng, (hidden,))
            block[f"{ln}/bias"] = _random(rng, (hidden,))
        for part in ("query", "key", "value"):
            block[f"{mha}/{part}/kernel"] = _random(rng, (hidden, heads, head_dim))
            block[f"{mha}/{part}/bias"] = _random(rng, (heads, head_dim))
        block[f"{mha}/out/kernel"] = _random(rng, (heads, head_dim, hidden))
        block[f"{mha}/out/bias"] = _random(rng, (hidden,))
        block[f"{mlp_name}/Dense_0/kernel"] = _random(rng, (hidden, mlp))
        block[f"{mlp_name}/Dense_0/bias"] = _random(rng, (mlp,))
        block[f"{mlp_name}/Dense_1/kernel"] = _random(rng, (mlp, hidden))
        block[f"{mlp_name}/Dense_1/bias"] = _random(rng, (hidden,))
        blocks.append(block)
    if scanned:
        for name in blocks[0]:
            arrays[f"Transformer/encoderblock/{name}"] = np.stack([b[name] for b in blocks])
    else:
        for i, block in enumerate(blocks):
            arrays.update({f"Transformer/encoderblock_{i}/{k}": v for k, v in block.items()})
    arrays["Transformer/encoder_norm/scale"] = 1 + _random(rng, (hidden,))
    arrays["Transformer/encoder_norm/bias"] = _random(rng, (hidden,))
    head_in = hidden
    if pre_logits:
        arrays["pre_logits/kernel"] = _random(rng, (hidden, pre_logits))
        arrays["pre_logits/bias"] = _random(rng, (pre_logits,))
        head_in = pre_logits
    arrays["head/kernel"] = _random(rng, (head_in, classes))
    arrays["head/bias"] = _random(rng, (classes,))
    return {prefix + k: v for k, v in arrays.items()}


def save_npz(path, arrays):
    np.savez(path, **arrays)
    return str(path)




def randomize_torch(model, seed=0):
    """Random values for every parameter (norm scales around 1), so nothing is trivially zero."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator) * 0.2
            is_norm_scale = name.endswith("weight") and param.ndim == 1
            param.copy_(1 + noise if is_norm_scale else noise)
    return model.eval()


def save_state_dict(path, model):
    """Writes a torch module's state dict, or a state dict itself, as a `.safetensors` file."""
    state = model.state_dict() if hasattr(model, "state_dict") else model
    save_file({k: v.detach().numpy().copy() for k, v in state.items()}, str(path))
    return str(path)


def timm_vit(**overrides):
    from timm.models.vision_transformer import VisionTransformer

    kwargs = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=10)
    return VisionTransformer(**{**kwargs, **overrides})


def timm_hybrid(resnet_stages=(1, 1), image_size=64, **overrides):
    from timm.models.vision_transformer_hybrid import HybridEmbed, _resnetv2

    backbone = _resnetv2(layers=resnet_stages)
    return timm_vit(
        img_size=image_size,
        patch_size=1,
        embed_layer=functools.partial(HybridEmbed, backbone=backbone),
        **overrides,
    )


def timm_convit(**overrides):
    from timm.models.convit import ConVit

    # timm multiplies embed_dim by num_heads: 8 x 4 heads = width 32.
    kwargs = dict(img_size=32, patch_size=8, embed_dim=8, depth=3, num_heads=4, mlp_ratio=2.0,
                  num_classes=10, local_up_to_layer=2)
    return ConVit(**{**kwargs, **overrides})


def torch_logits(model, images_nhwc):
    with torch.no_grad():
        return model(torch.from_numpy(images_nhwc.transpose(0, 3, 1, 2).copy())).numpy()

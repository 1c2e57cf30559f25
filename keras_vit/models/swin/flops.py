"""Swin's multiply-accumulate counts (Swin Eq. 1), as `keras_vit.analysis.flops` counts ViT's.

The Swin paper's "FLOPs" (Table 1) are these MACs. Not counted, as for ViT:
normalizations, softmaxes, activations, additions, and the relative position
bias (an addition).
"""

import math

from keras_vit.layers.validation import to_pair
from keras_vit.models.swin.layers import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock
from keras_vit.models.swin.window_attention import window_and_shift


def swin_block_macs(resolution, window, width, mlp_hidden, content_term=True):
    """MACs of one Swin block on an `(H, W)` map of `width` channels (Swin Eq. 1).

    `4 h w C^2 + 2 M^2 h w C` for (S)W-MSA, counted on the map padded to whole
    windows (the padded tokens are projected and attended too), and
    `2 h w C C_mlp` for the MLP on the unpadded map. Without the content term
    (Table 4's "rel. pos. w/o app.") there are no query and key projections and
    no `q k^T`: `2 h w C^2 + M^2 h w C`.

    Args:
        resolution: tuple `(H, W)`.
        window: tuple `(Mh, Mw)`, the window the block uses on this map (see
            `keras_vit.models.swin.window_attention.window_and_shift`).
        width: int. `C`.
        mlp_hidden: int. The MLP's hidden width.
        content_term: bool. Whether the logits include `q k^T`. Defaults to True.
    """
    (height, width_px), (mh, mw) = resolution, window
    padded = math.ceil(height / mh) * mh * math.ceil(width_px / mw) * mw
    products = 2 if content_term else 1  # q k^T and A v, or A v alone
    projections = (4 if content_term else 2) * padded * width * width
    attention = products * padded * mh * mw * width  # within windows, all heads
    mlp = 2 * height * width_px * width * mlp_hidden
    return projections + attention + mlp


def patch_merging_macs(resolution, channels, output_dim):
    """MACs of a patch merging: the `4C -> output_dim` reduction on the halved map."""
    merged = math.ceil(resolution[0] / 2) * math.ceil(resolution[1] / 2)
    return merged * 4 * channels * output_dim


def swin_forward_macs(
    image_size=224,
    patch_size=4,
    num_channels=3,
    embed_dim=96,
    depths=(2, 2, 6, 2),
    num_heads=None,
    window_size=7,
    mlp_ratio=4.0,
    num_classes=1000,
    include_top=True,
):
    """Forward MACs per image of a `SwinTransformer` from its builder arguments.

    The same count as `forward_macs` of the built model, without building it:
    the stage geometry follows the layers (patches and merging round up, the
    window shrinks to a map not larger than it). The arguments are the
    builder's; `num_heads` does not change the count and is taken so that a
    variant's table entry can be passed as it is.

    Returns:
        int.
    """
    window_size = to_pair(window_size, "window_size")
    patch = to_pair(patch_size, "patch_size")
    height, width = (math.ceil(s / p) for s, p in zip(to_pair(image_size, "image_size"), patch))
    total = height * width * patch[0] * patch[1] * num_channels * embed_dim
    channels = embed_dim
    for stage, depth in enumerate(depths):
        if stage > 0:
            total += patch_merging_macs((height, width), channels, 2 * channels)
            height, width, channels = math.ceil(height / 2), math.ceil(width / 2), 2 * channels
        window, _ = window_and_shift((height, width), window_size, (0, 0))
        total += depth * swin_block_macs((height, width), window, channels, int(channels * mlp_ratio))
    if include_top:
        total += channels * num_classes
    return total


def layer_macs(layer):
    """MACs of one of Swin's layers in a built model, from its static shapes; None for other layers."""
    if isinstance(layer, SwinPatchEmbedding):
        _, rows, cols, _ = layer.output.shape
        ph, pw = layer.patch_size
        return rows * cols * ph * pw * layer.input.shape[-1] * layer.embed_dim
    if isinstance(layer, SwinTransformerBlock):
        return swin_block_macs(layer.resolution, layer.window, layer.input.shape[-1], layer.mlp.mlp_dim,
                               layer.use_content_term)
    if isinstance(layer, PatchMerging):
        _, rows, cols, channels = layer.input.shape
        return patch_merging_macs((rows, cols), channels, layer.output.shape[-1])
    return None

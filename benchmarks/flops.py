"""Analytic multiply-accumulate (MAC) counts of keras_vit models, per image.

Counted: every matrix product and convolution (patch embedding, q/k/v and output
projections, q k^T and A v, the MLPs, GPSA's positional projection, the ResNet
convolutions, Swin's patch merging, pre-logits and head). Not counted:
normalizations, softmaxes, activations, additions and Swin's relative position
bias, which are a few percent at most. Training costs 3x the forward pass
(forward, and two products per weight in the backward), so training FLOPs per
image = 6 x forward MACs (2 FLOPs per MAC). The Swin paper's "FLOPs" (Table 1)
are these MACs.
"""

import math

from keras_vit.layers.gpsa import GPSA
from keras_vit.layers.bit import ResNetStage, StandardizedConv2D
from keras_vit.layers.patching import PatchEncoder
from keras_vit.layers.swin import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock
from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import to_pair
from keras_vit.layers.window_attention import window_and_shift


def _conv_macs(layer, output_shape, in_channels):
    kh, kw = layer.kernel_size
    return output_shape[1] * output_shape[2] * kh * kw * in_channels * layer.filters


def _stage_macs(stage, input_shape):
    height, width, channels = input_shape[1:]
    total = 0
    for unit in stage.units:
        sh, sw = unit.strides
        out_h, out_w = math.ceil(height / sh), math.ceil(width / sw)
        f = unit.filters
        total += height * width * channels * f  # conv1 (1x1)
        total += out_h * out_w * 9 * f * f  # conv2 (3x3, strided)
        total += out_h * out_w * f * 4 * f  # conv3 (1x1)
        if unit.needs_projection:
            total += out_h * out_w * channels * 4 * f
        height, width, channels = out_h, out_w, 4 * f
    return total


def block_macs(block, length, width):
    """MACs of one transformer block on `length` tokens of `width`."""
    projections = 4 * length * width * width  # q, k, v (or qk + v) and output
    attention = 2 * length * length * width  # q k^T and A v, all heads together
    if isinstance(block.attention, GPSA):
        attention += length * length * 3 * block.num_heads  # v_pos . r_ij
    mlp = 2 * length * width * block.mlp_dim
    return projections + attention + mlp


def swin_block_macs(resolution, window, width, mlp_hidden):
    """MACs of one Swin block on an `(H, W)` map of `width` channels (Swin Eq. 1).

    `4 h w C^2 + 2 M^2 h w C` for (S)W-MSA, counted on the map padded to whole
    windows (the padded tokens are projected and attended too), and
    `2 h w C C_mlp` for the MLP on the unpadded map.

    Args:
        resolution: tuple `(H, W)`.
        window: tuple `(Mh, Mw)`, the window the block uses on this map (see
            `keras_vit.layers.window_attention.window_and_shift`).
        width: int. `C`.
        mlp_hidden: int. The MLP's hidden width.
    """
    (height, width_px), (mh, mw) = resolution, window
    padded = math.ceil(height / mh) * mh * math.ceil(width_px / mw) * mw
    projections = 4 * padded * width * width
    attention = 2 * padded * mh * mw * width  # q k^T and A v within windows, all heads
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


def forward_macs(model):
    """Forward MACs per image of a keras_vit model (ViT, hybrid, ConViT or Swin)."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, StandardizedConv2D):
            total += _conv_macs(layer, layer.output.shape, layer.input.shape[-1])
        elif isinstance(layer, ResNetStage):
            total += _stage_macs(layer, layer.input.shape)
        elif isinstance(layer, PatchEncoder):
            rows, cols = layer.grid_size
            total += rows * cols * layer.input.shape[-1] * layer.hidden_size
        elif isinstance(layer, TransformerBlock):
            _, length, width = layer.input.shape
            total += block_macs(layer, length, width)
        elif isinstance(layer, SwinPatchEmbedding):
            _, rows, cols, _ = layer.output.shape
            ph, pw = layer.patch_size
            total += rows * cols * ph * pw * layer.input.shape[-1] * layer.embed_dim
        elif isinstance(layer, SwinTransformerBlock):
            width = layer.input.shape[-1]
            total += swin_block_macs(layer.resolution, layer.window, width, layer.mlp.mlp_dim)
        elif isinstance(layer, PatchMerging):
            _, rows, cols, channels = layer.input.shape
            total += patch_merging_macs((rows, cols), channels, layer.output.shape[-1])
        elif layer.name in ("head", "pre_logits"):
            total += layer.input.shape[-1] * layer.units
    return total


def train_flops(model):
    """Training FLOPs per image: 6 x forward MACs."""
    return 6 * forward_macs(model)


def inference_flops(model):
    """Inference FLOPs per image: 2 x forward MACs."""
    return 2 * forward_macs(model)

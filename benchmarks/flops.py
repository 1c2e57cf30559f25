"""Analytic multiply-accumulate (MAC) counts of keras_vit models, per image.

Counted: every matrix product and convolution (patch embedding, q/k/v and output
projections, q k^T and A v, the MLPs, GPSA's positional projection, the ResNet
convolutions, pre-logits and head). Not counted: normalizations, softmaxes,
activations and additions, which are a few percent at most. Training costs
3x the forward pass (forward, and two products per weight in the backward), so
training FLOPs per image = 6 x forward MACs (2 FLOPs per MAC).
"""

import math

from keras_vit.layers.attention import GPSA
from keras_vit.layers.bit import ResNetStage, StandardizedConv2D
from keras_vit.layers.patching import PatchEncoder
from keras_vit.layers.transformer import TransformerBlock


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


def forward_macs(model):
    """Forward MACs per image of a keras_vit model (ViT, hybrid or ConViT)."""
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
        elif layer.name in ("head", "pre_logits"):
            total += layer.input.shape[-1] * layer.units
    return total


def train_flops(model):
    """Training FLOPs per image: 6 x forward MACs."""
    return 6 * forward_macs(model)


def inference_flops(model):
    """Inference FLOPs per image: 2 x forward MACs."""
    return 2 * forward_macs(model)

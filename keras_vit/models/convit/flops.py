"""ConViT's multiply-accumulate counts, as `keras_vit.analysis.flops` counts ViT's."""

import math

from keras_vit.analysis.flops import block_macs
from keras_vit.models.convit.layers import GPSABlock


def layer_macs(layer):
    """MACs of a `GPSABlock` of a built model; None for other layers.

    A pre-norm block's (`block_macs`), with GPSA's positional scores
    `v_pos . r_ij`: 3 MACs per head and query-key pair.
    """
    if not isinstance(layer, GPSABlock):
        return None
    # (batch, tokens, width), or the patch grid (batch, rows, cols, width) of a dynamic size.
    length, width = math.prod(layer.input.shape[1:-1]), layer.input.shape[-1]
    return block_macs(layer, length, width) + length * length * 3 * layer.num_heads

"""Axial-ViT's multiply-accumulate counts (ViT App. D.5), as `keras_vit.analysis.flops` counts ViT's.

A row block on a `(rows, cols)` grid is a pre-norm block whose tokens each
attend to the `cols` of their row, a column block to the `rows` of their
column (`encoder_block_macs` with `attended` set).
"""

from keras_vit.analysis.flops import encoder_block_macs, head_macs, patch_grid_and_size
from keras_vit.models.axial.layers import AXES, AxialTransformerBlock


def axial_block_macs(grid, width, mlp_dim, axis):
    """MACs of one `AxialTransformerBlock` on a `(rows, cols)` grid (ViT App. D.5).

    Args:
        grid: tuple `(rows, cols)`.
        width: int. `D`.
        mlp_dim: int. The MLP's hidden width.
        axis: `"row"` (each token attends to the `cols` tokens of its row) or
            `"column"` (to the `rows` of its column).
    """
    rows, cols = grid
    return encoder_block_macs(rows * cols, width, mlp_dim, attended=cols if axis == "row" else rows)


def axial_vit_forward_macs(
    image_size=224,
    patch_size=16,
    num_channels=3,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    mlp_dim=3072,
    num_classes=1000,
    include_top=True,
    representation_size=None,
):
    """Forward MACs per image of an `AxialViT` from its arguments (ViT App. D.5).

    The patch embedding, a row and a column block per layer on the patch grid
    (no class token) and the head; `num_heads` does not change the count and
    is taken, as in `vit_forward_macs`, so that a table entry passes as it is.

    Returns:
        int.
    """
    grid, patch = patch_grid_and_size(image_size, patch_size)
    total = grid[0] * grid[1] * patch[0] * patch[1] * num_channels * hidden_size
    total += num_layers * sum(axial_block_macs(grid, hidden_size, mlp_dim, axis) for axis in AXES)
    return total + head_macs(hidden_size, num_classes, include_top, representation_size, 1)


def layer_macs(layer):
    """MACs of an `AxialTransformerBlock` of a built model, from its static input grid; None for other layers."""
    if not isinstance(layer, AxialTransformerBlock):
        return None
    _, rows, cols, width = layer.input.shape
    return axial_block_macs((rows, cols), width, layer.mlp_dim, layer.axis)

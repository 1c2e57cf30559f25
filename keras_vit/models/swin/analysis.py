"""Swin's attention maps on its feature maps: where each block's windows lie, and distances within them.

`keras_vit.analysis.attention_maps` gives a Swin block's attention per window
(`(batch, windows, heads, N, N)`); `window_grids` says where the windows lie on
each block's map, `window_attention_to_grid` lays them back onto the map, and
`keras_vit.analysis.nonlocality` / `mean_attention_distance` take the grids in
place of a patch grid (each `WindowGrid` measures its own map).
"""

from typing import NamedTuple

import numpy as np

from keras_vit.models.swin.inspection import swin_stages
from keras_vit.models.swin.window_attention import window_positions


class WindowGrid(NamedTuple):
    """Where one Swin block's windows lie on its feature map.

    Attributes:
        resolution: tuple `(H, W)` of the block's map.
        padded_size: tuple `(Hp, Wp)`, the map padded to whole windows.
        window: tuple `(Mh, Mw)`, the window the block uses.
        shift: tuple `(sh, sw)`, its cyclic shift (0 for W-MSA blocks).
        stride: int. Side of one map cell in patches of the patch embedding
            (`2**stage`: each patch merging halves the map, padding odd sizes).
    """

    resolution: tuple
    padded_size: tuple
    window: tuple
    shift: tuple
    stride: int

    def positions(self):
        """`(num_windows, Mh * Mw)` flat indices into the padded map (`window_positions`)."""
        return window_positions(self.padded_size, self.window, self.shift)

    def nonlocality(self, probs):
        """Mean distance from each image query to what it attends to, in patches, per head.

        What `keras_vit.analysis.nonlocality` asks of each grid of a Swin model.
        """
        return _window_nonlocality(probs, self)


def window_grids(model):
    """One `WindowGrid` per Swin block of `model`, in order (as `attention_maps` lists them)."""
    grids = [
        WindowGrid(block.resolution, block.padded_size, block.window, block.shift, 2**stage)
        for stage, blocks in enumerate(swin_stages(model))
        for block in blocks
    ]
    if not grids:
        raise ValueError(
            f"The model has no SwinTransformerBlock. Received: model={model.name!r}"
        )
    return grids


def attention_grid(model):
    """`(window_grids(model), patch pixels)`: `keras_vit.analysis.attention_grid`'s answer for a Swin model."""
    grids = window_grids(model)
    return grids, model.input_shape[1] / grids[0].resolution[0]


def window_attention_to_grid(probs, grid):
    """One Swin block's window attention as dense maps over its padded feature map.

    Row `q` holds the attention of map position `q` over all positions, flat
    indices `r * Wp + c` on the padded map in its own (un-shifted)
    coordinates: nonzero only within the query's window, which for a shifted
    block is a window of the shifted map (its parts from opposite borders
    masked apart). Rows sum to 1. Positions `r >= H` or `c >= W` are padding:
    `dense.reshape(batch, heads, Hp, Wp, Hp, Wp)[:, :, :H, :W, :H, :W]` keeps
    the image's positions only. The maps take `heads * (Hp * Wp)**2` floats per
    image (about 118 MB for Swin-T's first stage at 224 px).

    Args:
        probs: array `(batch, windows, heads, N, N)`, one entry of `attention_maps`.
        grid: the block's `WindowGrid` (from `window_grids`).

    Returns:
        Array `(batch, heads, Hp * Wp, Hp * Wp)`.
    """
    positions = grid.positions()
    _check_window_maps(probs, positions)
    batch, _, heads = probs.shape[:3]
    size = grid.padded_size[0] * grid.padded_size[1]
    dense = np.zeros((batch, heads, size, size), probs.dtype)
    # Windows partition the map, so every (query, key) cell is written at most once.
    dense[:, :, positions[:, :, None], positions[:, None, :]] = probs.transpose(0, 2, 1, 3, 4)
    return dense


def _check_window_maps(probs, positions):
    expected = (positions.shape[0], None, positions.shape[1], positions.shape[1])
    if probs.ndim != 5 or probs.shape[1] != expected[0] or probs.shape[3:] != expected[2:]:
        raise ValueError(
            "Expected window attention `(batch, windows, heads, N, N)` with "
            f"windows={expected[0]} and N={expected[2]} for this WindowGrid. "
            f"Received: probs.shape={probs.shape}"
        )


def _window_nonlocality(probs, grid):
    """Mean distance from each image query to what it attends to, in patches, per head."""
    positions = grid.positions()
    _check_window_maps(probs, positions)
    wp = grid.padded_size[1]
    points = np.stack(np.divmod(positions, wp), axis=-1).astype("float64")  # (windows, N, 2)
    distances = np.linalg.norm(points[:, :, None] - points[:, None, :], axis=-1) * grid.stride
    per_query = (probs * distances[None, :, None]).sum(-1)  # (batch, windows, heads, N)
    # Padded positions are no image queries; as keys they keep their place on the grid.
    real = (points[..., 0] < grid.resolution[0]) & (points[..., 1] < grid.resolution[1])
    per_head = per_query.transpose(0, 2, 1, 3)[..., real]  # (batch, heads, image positions)
    return per_head.mean(-1).mean(0)

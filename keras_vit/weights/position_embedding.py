"""Resampling learned position embeddings to another patch grid (ViT Sec. 3.2)."""

import numpy as np


def _linear_resize_matrix(in_size, out_size):
    """`(out_size, in_size)` matrix of 1D linear interpolation with half-pixel centres.

    Output sample `o` sits at input coordinate `(o + 0.5) * in / out - 0.5`
    (pixel centres aligned, corners not), the convention of `tf.image.resize`
    and of `torch.nn.functional.interpolate(..., align_corners=False)`.
    """
    coords = (np.arange(out_size) + 0.5) * (in_size / out_size) - 0.5
    coords = np.clip(coords, 0, in_size - 1)
    low = np.floor(coords).astype(int)
    high = np.minimum(low + 1, in_size - 1)
    frac = coords - low
    matrix = np.zeros((out_size, in_size))
    np.add.at(matrix, (np.arange(out_size), low), 1.0 - frac)
    np.add.at(matrix, (np.arange(out_size), high), frac)
    return matrix


def resample_position_embedding(grid, new_grid_size):
    """Bilinearly resamples a `(rows, cols, D)` position-embedding grid.

    ViT Sec. 3.2: when fine-tuning at another resolution the patch size stays the
    same, so the grid of patches changes, and the pre-trained position
    embeddings are interpolated in 2D according to their location in the
    image. The class slot is not part of the grid and is kept as it is.

    Args:
        grid: array of shape `(rows, cols, D)`.
        new_grid_size: tuple `(new_rows, new_cols)`; need not be square.

    Returns:
        float32 array of shape `(new_rows, new_cols, D)`.
    """
    grid = np.asarray(grid)
    if grid.ndim != 3:
        raise ValueError(
            f"`grid` must have shape (rows, cols, width). Received: grid.shape={grid.shape}"
        )
    rows, cols = (int(s) for s in new_grid_size)
    if rows <= 0 or cols <= 0:
        raise ValueError(
            "`new_grid_size` must be two positive integers. "
            f"Received: new_grid_size={new_grid_size}"
        )
    row_matrix = _linear_resize_matrix(grid.shape[0], rows)
    col_matrix = _linear_resize_matrix(grid.shape[1], cols)
    out = np.einsum("ar,rcd,bc->abd", row_matrix, grid.astype("float64"), col_matrix)
    return out.astype("float32")

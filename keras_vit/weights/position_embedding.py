"""Resampling learned position embeddings to another patch grid (ViT Sec. 3.2), and Swin's bias tables to another window.

Each checkpoint family's own code resamples in its own way, and the results
differ by more than float rounding (up to ~5% of the embeddings' spread between
bilinear and bicubic), so the mode is a choice (see
`keras_vit.layers.position.INTERPOLATIONS`):

| checkpoints (their code)                          | interpolation      | antialias |
|---------------------------------------------------|--------------------|-----------|
| official ViT / big_vision `.npz` (`scipy.ndimage.zoom(order=1)`) | `"bilinear_scipy"` | -  |
| timm at load (`checkpoint_filter_fn`, `resample_abs_pos_embed`) | `"bicubic"` | `True` |
| timm `dynamic_img_size=True` (same function, per call) | `"bicubic"`   | `True`    |
| timm's own `.npz` loader (`_load_weights`)        | `"bilinear"`       | `False`   |
| DeiT (its `main.py` fine-tuning), transformers `interpolate_pos_encoding` | `"bicubic"` | `False` |
| Swin (Microsoft `load_pretrained`), bias tables and `ape` | `"bicubic"` | `False` |

(PyTorch's antialiased modes differ from the plain ones when enlarging too:
they use Keys' kernel with a = -0.5 instead of -0.75 and renormalize at the
edges instead of repeating the edge cell.)
"""

import numpy as np

from keras_vit.layers.position import check_interpolation, interpolation_matrix


def resample_separable(grid, new_size, interpolation, antialias, size_name, width_name):
    """Resamples a `(rows, cols, channels)` array along rows and columns, in float64.

    The one implementation behind `resample_position_embedding` and Swin's
    `resample_bicubic`; `size_name` and `width_name` name the arguments in
    their messages.
    """
    check_interpolation(interpolation, antialias)
    grid = np.asarray(grid)
    if grid.ndim != 3:
        raise ValueError(
            f"`grid` must have shape (rows, cols, {width_name}). Received: grid.shape={grid.shape}"
        )
    try:
        rows, cols = (int(s) for s in new_size)
    except (TypeError, ValueError):
        rows = cols = 0
    if rows <= 0 or cols <= 0:
        raise ValueError(
            f"`{size_name}` must be two positive integers. Received: {size_name}={new_size}"
        )
    row_matrix = interpolation_matrix(grid.shape[0], rows, interpolation, antialias)
    col_matrix = interpolation_matrix(grid.shape[1], cols, interpolation, antialias)
    out = np.einsum("ar,rcd,bc->abd", row_matrix, grid.astype("float64"), col_matrix)
    return out.astype("float32")


def resample_position_embedding(grid, new_grid_size, interpolation="bilinear", antialias=False):
    """Resamples a `(rows, cols, D)` position-embedding grid to another patch grid.

    ViT Sec. 3.2: when fine-tuning at another resolution the patch size stays the
    same, so the grid of patches changes, and the pre-trained position
    embeddings are interpolated in 2D according to their location in the
    image. The class slot is not part of the grid and is kept as it is. The
    table in this module's docstring gives the mode each checkpoint family's
    own code uses.

    Args:
        grid: array of shape `(rows, cols, D)`.
        new_grid_size: tuple `(new_rows, new_cols)`; need not be square.
        interpolation: str. `"bilinear"` or `"bicubic"` (PyTorch's
            `interpolate(..., align_corners=False)`) or `"bilinear_scipy"`
            (`scipy.ndimage.zoom(grid, zoom, order=1)`, the ViT authors' code).
            Defaults to `"bilinear"`.
        antialias: bool. PyTorch's `antialias=True` form of `"bilinear"` or
            `"bicubic"` (timm's default). Defaults to `False`.

    Returns:
        float32 array of shape `(new_rows, new_cols, D)`.

    Raises:
        ValueError: for a grid that is not 3-D, a size that is not two
            positive integers, or an unknown mode, naming the argument.
    """
    return resample_separable(grid, new_grid_size, interpolation, antialias, "new_grid_size", "width")


# ---- Swin: bicubic resampling of bias tables and `ape` ---------------------------------


def resample_bicubic(grid, new_size):
    """Bicubically resamples a `(rows, cols, channels)` grid to `new_size`.

    The interpolation of Swin's fine-tuning at another resolution (Microsoft's
    `load_pretrained`): PyTorch's bicubic mode with `align_corners=False` and
    no antialiasing, separable along rows and columns, computed in float64
    (`keras_vit.weights.position_embedding.resample_separable`).

    Args:
        grid: array of shape `(rows, cols, channels)`.
        new_size: tuple `(new_rows, new_cols)` of positive integers.

    Returns:
        float32 array of shape `(new_rows, new_cols, channels)`.
    """
    return resample_separable(grid, new_size, "bicubic", False, "new_size", "channels")


def table_grid(window_size):
    """The `(2 Mh - 1, 2 Mw - 1)` grid of relative offsets of a `(Mh, Mw)` window (Swin Eq. 4)."""
    return tuple(2 * int(m) - 1 for m in window_size)


def resample_bias_table(table, new_window_size, window_size=None):
    """Resamples a relative position bias table to another window (Swin Sec. 3.2, 4.1).

    The `((2 Mh - 1) * (2 Mw - 1), heads)` table is a `(2 Mh - 1, 2 Mw - 1)`
    grid of offsets per head, rows before columns (the layout of
    `keras_vit.models.swin.window_attention.relative_position_index`); each head's
    grid is resampled bicubically, as Microsoft's code does when fine-tuning
    with larger windows.

    Args:
        table: array of shape `(offsets, heads)`.
        new_window_size: tuple `(Mh, Mw)`, the window of the model.
        window_size: tuple or None. The window the table was trained with;
            None means a square one (`offsets` must then be a square number).

    Returns:
        float32 array of shape `((2 Mh - 1) * (2 Mw - 1), heads)`.

    Raises:
        ValueError: for a table that is not 2-D, or of a size that `window_size`
            (or, without it, no square window) explains.
    """
    table = np.asarray(table)
    if table.ndim != 2:
        raise ValueError(
            f"`table` must have shape (offsets, heads). Received: table.shape={table.shape}"
        )
    offsets, heads = table.shape
    if window_size is None:
        side = int(round(offsets**0.5))
        if side * side != offsets or side % 2 == 0:
            raise ValueError(
                "A bias table of a square window has (2M - 1)**2 rows; pass the "
                f"`window_size` of a table of another size. Received: table.shape={table.shape}"
            )
        source = (side, side)
    else:
        source = table_grid(window_size)
        if source[0] * source[1] != offsets:
            raise ValueError(
                f"A table of window_size={tuple(window_size)} has {source[0] * source[1]} rows. "
                f"Received: table.shape={table.shape}"
            )
    target = table_grid(new_window_size)
    grid = table.reshape(*source, heads)
    return resample_bicubic(grid, target).reshape(target[0] * target[1], heads)

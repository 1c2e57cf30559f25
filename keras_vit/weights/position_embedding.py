"""Resampling learned position embeddings to another patch grid (ViT Sec. 3.2).

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

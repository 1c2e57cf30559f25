"""Learned absolute position embeddings: their layouts, resampling them to another grid, Swin's `ape`.

(Over 400 lines on purpose: every learned absolute position layout, its resampling and the
layers that add it share the grid conventions below.)

ViT's position embedding is part of `PatchEncoder` (it adds the embeddings to a
token sequence, with the class-token slot); `AbsolutePositionEmbedding` adds
them to a channels-last map, for models that keep the spatial layout (Swin's
`ape`). The ViT paper's position-embedding study (App. D.3, Table 8) also adds
them at the input of every block: `TokenPositionEmbedding`.

The patch embeddings come in the two learned layouts of that study
(`GRID_LAYOUTS`): `"learned_1d"`, one D-vector per patch of the raster
sequence (stored as a `(rows, cols, D)` grid), and `"learned_2d"`, an X table
`(cols, D / 2)` and a Y table `(rows, D / 2)` whose rows are concatenated by
the patch's coordinates (`two_dimensional_grid`).

Resampling a `(rows, cols, D)` grid to another patch grid (ViT Sec. 3.2) is
separable: `out = R grid C^T` with one `(new, old)` interpolation matrix per
axis. The matrices reproduce the interpolations the checkpoints' own code uses
(see `INTERPOLATIONS`); they are built in numpy (float64) when the new grid is
known in Python, and with `keras.ops` from a symbolic size otherwise (a
SavedModel signature of unknown height and width, a JAX shape-polymorphic
export), with the same formulas written once for both.
"""


import keras
import numpy as np
from keras import ops

from keras_vit.layers.validation import to_pair

# `"bilinear"` and `"bicubic"`: `torch.nn.functional.interpolate(mode=...,
# align_corners=False)` with or without `antialias` (timm, DeiT, Swin,
# transformers). `"bilinear_scipy"`: `scipy.ndimage.zoom(grid, zoom, order=1)`,
# the interpolation of the ViT authors' code (google-research/vision_transformer,
# big_vision), which aligns the corner cells; it has no antialiased form.
INTERPOLATIONS = ("bilinear", "bicubic", "bilinear_scipy")
"""How a position-embedding table is resampled to another grid: `keras.ops.image.resize`'s bilinear
or bicubic, or the original ViT code's `scipy.ndimage.zoom` (`"bilinear_scipy"`).
"""

GRID_LAYOUTS = ("learned_1d", "learned_2d")


def check_grid_layout(layout, hidden_size, name="position_layout"):
    """Raises a ValueError naming `name` unless `layout` is one of `GRID_LAYOUTS` that fits the width.

    Args:
        layout: str. One of `GRID_LAYOUTS`.
        hidden_size: int. Width D; `"learned_2d"` splits it in two halves.
        name: str. Argument name used in the messages.
    """
    if layout not in GRID_LAYOUTS:
        raise ValueError(f"`{name}` must be one of {GRID_LAYOUTS}. Received: {name}={layout!r}")
    if layout == "learned_2d" and hidden_size % 2:
        raise ValueError(
            f"`{name}='learned_2d'` concatenates an X and a Y embedding of hidden_size / 2 each, so "
            f"`hidden_size` must be even. Received: {name}={layout!r}, hidden_size={hidden_size}"
        )


def add_grid_weights(layer, layout, grid_size, hidden_size, initializer):
    """Creates the patch position weights of `layout` on `layer` (see `GRID_LAYOUTS`).

    `"learned_1d"` is the weight `position_embedding` of shape `(rows, cols, D)`;
    `"learned_2d"` the weights `position_embedding_x` `(cols, D / 2)` and
    `position_embedding_y` `(rows, D / 2)`.
    """
    rows, cols = grid_size
    if layout == "learned_1d":
        layer.position_embedding = layer.add_weight(
            shape=(rows, cols, hidden_size), initializer=initializer, name="position_embedding"
        )
        return
    layer.position_embedding_x = layer.add_weight(
        shape=(cols, hidden_size // 2), initializer=initializer, name="position_embedding_x"
    )
    # A clone draws afresh: one unseeded Keras initializer fixes its seed when made,
    # and would give Y the values of X.
    layer.position_embedding_y = layer.add_weight(
        shape=(rows, hidden_size // 2), initializer=initializer.clone(), name="position_embedding_y"
    )


def grid_of_weights(layer, layout):
    """The `(rows, cols, D)` patch position embeddings of the weights `add_grid_weights` made."""
    if layout == "learned_1d":
        return layer.position_embedding
    return two_dimensional_grid(layer.position_embedding_x, layer.position_embedding_y)


def two_dimensional_grid(x_table, y_table):
    """The 2-D position embeddings of ViT App. D.3: `[X[col]; Y[row]]` for the patch at `(row, col)`.

    Args:
        x_table: Tensor `(cols, D / 2)`, one embedding per column.
        y_table: Tensor `(rows, D / 2)`, one embedding per row.

    Returns:
        Tensor `(rows, cols, D)`: the X embedding of the patch's column, then
        the Y embedding of its row (the appendix names X first).
    """
    rows, cols = y_table.shape[0], x_table.shape[0]
    x = ops.broadcast_to(x_table[None, :, :], (rows, cols, x_table.shape[1]))
    y = ops.broadcast_to(y_table[:, None, :], (rows, cols, y_table.shape[1]))
    return ops.concatenate([x, y], axis=-1)


def check_interpolation(interpolation, antialias, names=("interpolation", "antialias")):
    """Raises a ValueError naming the argument unless the pair is a known mode.

    Args:
        interpolation: str. One of `INTERPOLATIONS`.
        antialias: bool. Only with `"bilinear"` or `"bicubic"`.
        names: the two argument names the message uses.
    """
    if interpolation not in INTERPOLATIONS:
        raise ValueError(
            f"`{names[0]}` must be one of {INTERPOLATIONS}. "
            f"Received: {names[0]}={interpolation!r}"
        )
    if not isinstance(antialias, bool):
        raise ValueError(f"`{names[1]}` must be a bool. Received: {names[1]}={antialias!r}")
    if antialias and interpolation == "bilinear_scipy":
        raise ValueError(
            f"`{names[1]}=True` needs {names[0]}='bilinear' or 'bicubic' "
            "(scipy.ndimage.zoom has no antialiased form). "
            f"Received: {names[0]}={interpolation!r}, {names[1]}={antialias!r}"
        )


class _NumpyMath:
    """The array functions `_matrix` needs, in numpy float64 (static sizes)."""

    abs, clip, equal, floor = np.abs, np.clip, np.equal, np.floor
    maximum, minimum, where, sum = np.maximum, np.minimum, np.where, np.sum

    @staticmethod
    def arange(n):
        return np.arange(n, dtype="float64")

    @staticmethod
    def to_float(x):
        return np.asarray(x, dtype="float64")


class _OpsMath:
    """The same functions in `keras.ops` float32, for sizes known only in the graph."""

    abs, clip, equal, floor = ops.abs, ops.clip, ops.equal, ops.floor
    maximum, minimum, where, sum = ops.maximum, ops.minimum, ops.where, ops.sum

    @staticmethod
    def arange(n):
        return ops.cast(ops.arange(n, dtype="int32"), "float32")

    @staticmethod
    def to_float(x):
        return ops.cast(x, "float32")


def _cubic(xp, distance, a):
    """Keys' cubic convolution kernel (Keys 1981); PyTorch uses a = -0.75, and
    a = -0.5 (PIL's) in its antialiased mode."""
    d = xp.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return xp.where(d <= 1, near, xp.where(d < 2, far, 0.0 * d))


def _one_hot(xp, index, in_positions):
    return xp.to_float(xp.equal(index[:, None], in_positions[None, :]))


def _matrix(xp, in_size, out_size, interpolation, antialias):
    """The `(out_size, in_size)` matrix of 1-D resampling, in the math of `xp`.

    `in_size` is a Python int; `out_size` an int or a scalar tensor.
    """
    out_index = xp.arange(out_size)
    in_positions = xp.arange(in_size)
    size_in = float(in_size)
    size_out = xp.to_float(out_size)
    if interpolation == "bilinear_scipy":
        # scipy.ndimage.zoom (grid_mode=False) maps the first and last cells onto
        # each other: input coordinate o (in - 1) / (out - 1).
        source = out_index * (size_in - 1.0) / xp.maximum(size_out - 1.0, 1.0)
        low = xp.clip(xp.floor(source), 0.0, size_in - 1.0)
        high = xp.minimum(low + 1.0, size_in - 1.0)
        frac = source - low
        return (1.0 - frac)[:, None] * _one_hot(xp, low, in_positions) + frac[:, None] * _one_hot(
            xp, high, in_positions
        )
    scale = size_in / size_out
    if antialias:
        # PyTorch's antialiased kernels (PIL's algorithm): a filter widened by
        # the scale when shrinking, cut to the cells inside the grid, rows
        # normalized to sum 1.
        half_taps = 1.0 if interpolation == "bilinear" else 2.0
        widen = xp.maximum(scale, 1.0)
        support = half_taps * widen
        center = scale * (out_index + 0.5)
        first = xp.maximum(xp.floor(center - support + 0.5), 0.0)
        stop = xp.minimum(xp.floor(center + support + 0.5), size_in)
        distance = (in_positions[None, :] - center[:, None] + 0.5) / widen
        if interpolation == "bilinear":
            weights = xp.maximum(1.0 - xp.abs(distance), 0.0 * distance)
        else:
            weights = _cubic(xp, distance, -0.5)
        inside = xp.to_float(in_positions[None, :] >= first[:, None]) * xp.to_float(
            in_positions[None, :] < stop[:, None]
        )
        weights = weights * inside
        total = xp.sum(weights, axis=1)
        return weights / xp.where(xp.equal(total, 0.0), 1.0, total)[:, None]
    # Half-pixel centres (align_corners=False): input coordinate (o + 0.5) in / out - 0.5.
    source = (out_index + 0.5) * scale - 0.5
    if interpolation == "bilinear":
        source = xp.maximum(source, 0.0 * source)  # PyTorch clamps the linear modes only
        low = xp.floor(source)
        high = xp.minimum(low + 1.0, size_in - 1.0)
        frac = source - low
        return (1.0 - frac)[:, None] * _one_hot(xp, low, in_positions) + frac[:, None] * _one_hot(
            xp, high, in_positions
        )
    # Bicubic: four taps around the coordinate, indices clamped to the edge.
    base = xp.floor(source)
    frac = source - base
    matrix = 0.0
    for offset in (-1.0, 0.0, 1.0, 2.0):
        index = xp.clip(base + offset, 0.0, size_in - 1.0)
        matrix = matrix + _cubic(xp, frac - offset, -0.75)[:, None] * _one_hot(xp, index, in_positions)
    return matrix


def _static_int(size):
    """`size` as a Python int when it is one, else `size` (a tensor or symbolic dimension)."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        return int(size)
    return size


def interpolation_matrix(in_size, out_size, interpolation="bilinear", antialias=False):
    """The `(out_size, in_size)` float64 matrix that resamples one axis of a grid.

    Args:
        in_size: int. Cells along the axis now.
        out_size: int. Cells along the axis after resampling.
        interpolation: str. One of `INTERPOLATIONS`. Defaults to `"bilinear"`.
        antialias: bool. PyTorch's antialiased form of `"bilinear"` or
            `"bicubic"`. Defaults to `False`.

    Returns:
        numpy float64 array of shape `(out_size, in_size)`; rows sum to 1.
    """
    check_interpolation(interpolation, antialias)
    return _matrix(_NumpyMath, int(in_size), int(out_size), interpolation, antialias)


def resample_grid(grid, new_size, interpolation="bicubic", antialias=True):
    """Resamples a `(rows, cols, D)` tensor with `keras.ops`, inside a model.

    The new size may be symbolic (a scalar tensor, or a JAX symbolic dimension):
    then the matrices are built in the graph in float32. A size known in Python
    uses the float64 matrices of `interpolation_matrix`, and the size of `grid`
    itself returns `grid` unchanged, so that nothing is computed at the size
    the embeddings were trained for.

    Args:
        grid: Tensor `(rows, cols, D)` with static `rows` and `cols`.
        new_size: pair of ints or scalar tensors, `(new_rows, new_cols)`.
        interpolation: str. One of `INTERPOLATIONS`. Defaults to `"bicubic"`.
        antialias: bool. Defaults to `True` (timm's `dynamic_img_size`).

    Returns:
        Tensor `(new_rows, new_cols, D)` of the dtype of `grid`.
    """
    rows, cols = (int(s) for s in grid.shape[:2])
    new_rows, new_cols = (_static_int(s) for s in new_size)
    if isinstance(new_rows, int) and isinstance(new_cols, int) and (new_rows, new_cols) == (rows, cols):
        return grid

    def matrix(in_size, out_size):
        if isinstance(out_size, int):
            return ops.convert_to_tensor(
                interpolation_matrix(in_size, out_size, interpolation, antialias).astype("float32")
            )
        return _matrix(_OpsMath, in_size, out_size, interpolation, antialias)

    dtype = grid.dtype
    # float32 throughout: bfloat16 weights would blur the embeddings further.
    x = ops.cast(grid, "float32")
    x = ops.einsum("ar,rcd->acd", matrix(rows, new_rows), x)
    x = ops.einsum("bc,acd->abd", matrix(cols, new_cols), x)
    return ops.cast(x, dtype)


@keras.saving.register_keras_serializable(package="keras_vit")
class AbsolutePositionEmbedding(keras.layers.Layer):
    """Adds a learned `(H, W, C)` position embedding to a feature map (Swin's `ape`).

    The optional absolute position embedding of Swin Sec. 3.1 (Table 4
    "abs. pos."), added to the patch embedding.

    Args:
        initializer: Initializer of the embedding. Defaults to a truncated
            normal with standard deviation 0.02 (the Swin reference's).
        **kwargs: Base layer arguments.

    Call arguments:
        x: Tensor `(batch, H, W, C)` with static `H`, `W` and `C`.
    """

    def __init__(self, initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.TruncatedNormal(stddev=0.02)
        )

    def build(self, input_shape):
        if len(input_shape) != 4 or None in tuple(input_shape[1:]):
            raise ValueError(
                "AbsolutePositionEmbedding expects a `(batch, height, width, channels)` "
                f"input with static sizes. Received: input_shape={tuple(input_shape)}"
            )
        self.position_embedding = self.add_weight(
            shape=tuple(input_shape[1:]), initializer=self.initializer, name="position_embedding"
        )

    def call(self, x):
        return x + ops.cast(self.position_embedding, x.dtype)[None]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["initializer"] = keras.initializers.serialize(self.initializer)
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class TokenPositionEmbedding(keras.layers.Layer):
    """Adds learned position embeddings to a token sequence, at the input of a block.

    ViT App. D.3 (Table 8, "Every Layer" and "Every Layer-Shared"): instead of
    once after the stem, learned position embeddings are added at the input
    of every block, each block with its own (one layer per block) or all with
    one (the same layer called before every block). The sequence is
    `[prefix tokens; patch tokens in raster order]`; each prefix token (the
    class token, DeiT's distillation token) has a learned D-vector of its own,
    as its slot of `E_pos` at the stem, and the patches get the embeddings of
    `layout` (see `GRID_LAYOUTS`).

    Args:
        grid_size: int or tuple of 2 ints. The patch grid `(rows, cols)`.
        num_prefix_tokens: int. Tokens before the patches. Defaults to 0.
        layout: str. One of `GRID_LAYOUTS`. Defaults to `"learned_1d"`.
        initializer: Initializer of the embeddings. Defaults to a normal with
            standard deviation 0.02, as the stem's.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, num_prefix_tokens + rows * cols, D)`.

    Returns:
        Tensor of the same shape.
    """

    def __init__(self, grid_size, num_prefix_tokens=0, layout="learned_1d", initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.grid_size = to_pair(grid_size, "grid_size")
        if not isinstance(num_prefix_tokens, int) or isinstance(num_prefix_tokens, bool) or num_prefix_tokens < 0:
            raise ValueError(
                f"`num_prefix_tokens` must be an integer >= 0. Received: num_prefix_tokens={num_prefix_tokens!r}"
            )
        if layout not in GRID_LAYOUTS:
            raise ValueError(f"`layout` must be one of {GRID_LAYOUTS}. Received: layout={layout!r}")
        self.num_prefix_tokens = num_prefix_tokens
        self.layout = layout
        self.initializer = keras.initializers.get(
            initializer or keras.initializers.RandomNormal(stddev=0.02)
        )

    def build(self, input_shape):
        length = self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]
        if len(input_shape) != 3 or input_shape[1] != length or input_shape[2] is None:
            raise ValueError(
                f"TokenPositionEmbedding expects tokens of shape (batch, {length}, width): "
                f"{self.num_prefix_tokens} prefix tokens and a {self.grid_size} patch grid. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        hidden_size = input_shape[2]
        check_grid_layout(self.layout, hidden_size, "layout")
        if self.num_prefix_tokens:
            self.prefix_embedding = self.add_weight(
                shape=(self.num_prefix_tokens, hidden_size), initializer=self.initializer.clone(),
                name="prefix_embedding"
            )
        add_grid_weights(self, self.layout, self.grid_size, hidden_size, self.initializer)

    def call(self, tokens):
        hidden_size = tokens.shape[-1]
        position = ops.reshape(grid_of_weights(self, self.layout), (-1, hidden_size))
        if self.num_prefix_tokens:
            position = ops.concatenate([self.prefix_embedding, position], axis=0)
        return tokens + ops.cast(position, tokens.dtype)[None]

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "grid_size": self.grid_size,
                "num_prefix_tokens": self.num_prefix_tokens,
                "layout": self.layout,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config

"""Axial attention on a grid of patch tokens: Axial-ViT's blocks (ViT App. D.5).

Axial attention (Ho et al. 2019; Huang et al. 2020) attends along one axis of a
multidimensional input at a time: every row of the patch grid is a sequence of
its own, and so is every column. Axial-ViT keeps the patch tokens as a
`(batch, rows, cols, D)` grid and replaces each ViT block, "a self-attention
followed by an MLP", by "a row-self-attention plus an MLP followed by a
column-self-attention plus an MLP" (App. D.5): two `AxialTransformerBlock`s,
`axis="row"` then `axis="column"`.
"""

import keras
from keras import ops

from keras_vit.layers.attention import MultiHeadSelfAttention
from keras_vit.layers.dtype_policies import with_quantized_dtypes
from keras_vit.layers.transformer import PreNormBlock
from keras_vit.layers.validation import check_bool, check_positive_int, check_rate, check_remat_without_dropout

# "row": the tokens of a row attend to each other (along the width);
# "column": those of a column (along the height).
AXES = ("row", "column")


def check_axis(axis):
    """Raises a ValueError naming `axis` unless it is one of `AXES`."""
    if axis not in AXES:
        raise ValueError(f"`axis` must be one of {AXES}. Received: axis={axis!r}")


def check_grid_shape(input_shape, layer_name):
    """Raises a ValueError unless `input_shape` is a `(batch, rows, cols, width)` grid."""
    if len(input_shape) != 4:
        raise ValueError(
            f"{layer_name} takes the patch tokens as a grid of shape (batch, rows, cols, width). "
            f"Received: input_shape={tuple(input_shape)}"
        )


@keras.saving.register_keras_serializable(package="keras_vit")
class AxialSelfAttention(MultiHeadSelfAttention):
    """Multi-head self-attention along one axis of a grid of tokens.

    Each row (`axis="row"`) or column (`axis="column"`) of the grid is attended
    as an independent sequence: `MultiHeadSelfAttention` (ViT Eq. 5-8, the same
    weights `qkv` and `out`) on the grid folded to `(batch * rows, cols, D)` or
    `(batch * cols, rows, D)`, unfolded afterwards. A token thus mixes with the
    `cols` (or `rows`) tokens of its line instead of all `rows * cols`.

    Args:
        num_heads: int. Number of attention heads; must divide the width.
        axis: str. `"row"` or `"column"`. Defaults to `"row"`.
        qkv_bias: bool. Whether the qkv projection has a bias. Defaults to
            `True`.
        attention_dropout_rate: float. Dropout on the attention probabilities.
            Defaults to 0.
        kernel_initializer: Initializer of the projection kernels, as in
            `MultiHeadSelfAttention`. Defaults to `"glorot_uniform"`.
        **kwargs: Base layer arguments.

    Call arguments:
        grid: Tensor `(batch, rows, cols, width)`.
        training: bool. Whether dropout is active.
        return_attention_scores: bool. Also return the attention
            probabilities, `(batch, rows, heads, cols, cols)` for rows and
            `(batch, cols, heads, rows, rows)` for columns.
    """

    def __init__(
        self,
        num_heads,
        axis="row",
        qkv_bias=True,
        attention_dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(
            num_heads,
            qkv_bias=qkv_bias,
            attention_dropout_rate=attention_dropout_rate,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
        check_axis(axis)
        self.axis = axis

    def build(self, input_shape):
        check_grid_shape(input_shape, "AxialSelfAttention")
        super().build(input_shape)

    def call(self, grid, training=None, return_attention_scores=False):
        if self.axis == "column":
            grid = ops.transpose(grid, (0, 2, 1, 3))
        # (batch, lines, length, D): the lines are attended apart, so they join the batch.
        shape = ops.shape(grid)
        sequences = ops.reshape(grid, (-1, shape[2], grid.shape[-1]))
        outputs = super().call(sequences, training=training, return_attention_scores=return_attention_scores)
        if return_attention_scores:
            outputs, probs = outputs
            probs = ops.reshape(probs, (shape[0], shape[1], self.num_heads, shape[2], shape[2]))
        outputs = ops.reshape(outputs, (shape[0], shape[1], shape[2], outputs.shape[-1]))
        if self.axis == "column":
            outputs = ops.transpose(outputs, (0, 2, 1, 3))
        return (outputs, probs) if return_attention_scores else outputs

    def get_config(self):
        config = super().get_config()
        config.update({"axis": self.axis})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class AxialTransformerBlock(PreNormBlock):
    """Pre-LayerNorm transformer block with axial attention (ViT App. D.5).

    `TransformerBlock`'s block (ViT Eq. 2-3) on a `(batch, rows, cols, D)` grid,
    with the attention along one axis (`AxialSelfAttention`):
    `z' = z + DropPath(Dropout(AxialMSA(LN(z))))`, `z'' = z' + DropPath(MLP(LN(z')))`.
    The LayerNorms and the MLP act on every token alone, so only the attention
    sees the grid. Axial-ViT stacks a row block and a column block, each with
    its own MLP, in place of each ViT block. The sublayers are named as
    `TransformerBlock`'s (`norm1`, `attention` with `qkv` and `out`, `norm2`,
    `mlp`). Stochastic depth drops a block's branches per example, as there.

    Args:
        num_heads: int. Number of attention heads.
        mlp_dim: int. Hidden width of the MLP.
        axis: str. `"row"` or `"column"`: the axis the attention runs along.
            Defaults to `"row"`.
        dropout_rate: float. Dropout after the dense layers. Defaults to 0.
        attention_dropout_rate: float. Dropout on attention probabilities.
            Defaults to 0.
        drop_path_rate: float. Stochastic depth rate of both residual branches.
            Defaults to 0.
        layer_norm_epsilon: float. Defaults to 1e-6, as in the reference ViT.
        qkv_bias: bool. Bias in the qkv projection. Defaults to `True`.
        kernel_initializer: Initializer of all kernels. Defaults to
            `"glorot_uniform"`.
        mlp_bias_initializer: Initializer of the MLP biases. Defaults to a
            normal with standard deviation 1e-6 (reference ViT).
        remat: bool. Recompute the block in the backward pass, as
            `TransformerBlock(remat=True)`; refuses dropout and attention
            dropout. Defaults to `False`.
        **kwargs: Base layer arguments.

    Call arguments:
        grid: Tensor `(batch, rows, cols, width)`.
        training: bool.
        return_attention_scores: bool. Also return the attention probabilities
            (see `AxialSelfAttention`).
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        axis="row",
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-6,
        qkv_bias=True,
        kernel_initializer="glorot_uniform",
        mlp_bias_initializer=None,
        remat=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(num_heads, "num_heads")
        check_positive_int(mlp_dim, "mlp_dim")
        check_axis(axis)
        for name, rate in (
            ("dropout_rate", dropout_rate),
            ("attention_dropout_rate", attention_dropout_rate),
            ("drop_path_rate", drop_path_rate),
        ):
            check_rate(rate, name)
        check_bool(qkv_bias, "qkv_bias")
        check_bool(remat, "remat")
        check_remat_without_dropout(remat, dropout_rate, attention_dropout_rate)
        self.num_heads = num_heads
        self.mlp_dim = mlp_dim
        self.axis = axis
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.drop_path_rate = drop_path_rate
        self.layer_norm_epsilon = layer_norm_epsilon
        self.qkv_bias = qkv_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.mlp_bias_initializer = keras.initializers.get(
            mlp_bias_initializer or keras.initializers.RandomNormal(stddev=1e-6)
        )
        self.remat = remat

    def _make_attention(self):
        return AxialSelfAttention(
            self.num_heads,
            axis=self.axis,
            qkv_bias=self.qkv_bias,
            attention_dropout_rate=self.attention_dropout_rate,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )

    def build(self, input_shape):
        check_grid_shape(input_shape, "AxialTransformerBlock")
        super().build(input_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_dim": self.mlp_dim,
                "axis": self.axis,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "drop_path_rate": self.drop_path_rate,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "qkv_bias": self.qkv_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "mlp_bias_initializer": keras.initializers.serialize(self.mlp_bias_initializer),
                "remat": self.remat,
            }
        )
        return with_quantized_dtypes(self, config)

"""Gated positional self-attention, GPSA (d'Ascoli et al. 2021, ConViT Sec. 3, Eq. 5-7).

Content attention and positional attention over fixed relative offsets
`r_ij = (dx, dy, dx^2 + dy^2)`, mixed per head by a sigmoid gate and
renormalized; the positional projections start at the convolutional
initialization (`local_init_kernel`). The shared projections and attention
path are `keras_vit.layers.attention._AttentionBase`.
"""

import math

import keras
import numpy as np
from keras import ops

from keras_vit.layers.attention import _AttentionBase, _merge_heads, _split_heads
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.validation import check_bool, to_pair


def relative_offsets(grid_size):
    """Fixed relative position encodings `r_ij = (dx, dy, dx^2 + dy^2)` (ConViT Eq. 5).

    Tokens are numbered row-major over the patch grid; `dx` and `dy` are the
    column and row offsets of key `j` from query `i`.

    Args:
        grid_size: tuple `(rows, cols)` of the patch grid.

    Returns:
        float32 numpy array of shape `(N, N, 3)` with `N = rows * cols`.
    """
    rows, cols = grid_size
    y, x = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    y, x = y.reshape(-1), x.reshape(-1)
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    return np.stack([dx, dy, dx**2 + dy**2], axis=-1).astype("float32")


def symbolic_relative_offsets(rows, cols):
    """`relative_offsets` with `keras.ops`, for a grid known only in the graph.

    Args:
        rows: int or scalar tensor (a JAX symbolic dimension in an export).
        cols: int or scalar tensor.

    Returns:
        float32 tensor of shape `(N, N, 3)` with `N = rows * cols`.
    """
    index = ops.arange(rows * cols, dtype="int32")
    y = ops.cast(index // cols, "float32")
    x = ops.cast(index % cols, "float32")
    dx = x[None, :] - x[:, None]
    dy = y[None, :] - y[:, None]
    return ops.stack([dx, dy, dx * dx + dy * dy], axis=-1)


def local_init_kernel(num_heads, locality_strength):
    """Positional projection `v_pos` of the convolutional initialization (ConViT Eq. 5).

    Head `h` gets the attention centre `Delta_h = (h // k - c, h % k - c)` of a
    `k x k` kernel, `k = sqrt(num_heads)`, `c` its centre, so that
    `v_pos^h . r_ij = -alpha (|delta_ij - Delta_h|^2 - |Delta_h|^2)` peaks at the
    patch at offset `Delta_h`. The head order is that of the reference
    implementation, so published checkpoints keep their meaning.

    Args:
        num_heads: int. A perfect square.
        locality_strength: float. `alpha`, how sharply each head focuses.

    Returns:
        float32 numpy array of shape `(3, num_heads)`, a Dense kernel on `r_ij`.
    """
    kernel_size = math.isqrt(num_heads)
    if kernel_size * kernel_size != num_heads:
        raise ValueError(
            "The convolutional initialization of GPSA needs a perfect-square "
            "number of heads (one per position of a sqrt(num_heads) x "
            f"sqrt(num_heads) kernel). Received: num_heads={num_heads}"
        )
    center = (kernel_size - 1) / 2
    heads = np.arange(num_heads)
    kernel = np.stack(
        [
            2.0 * (heads // kernel_size - center),
            2.0 * (heads % kernel_size - center),
            -np.ones(num_heads),
        ]
    )
    return (locality_strength * kernel).astype("float32")


@keras.saving.register_keras_serializable(package="keras_vit")
class GPSA(_AttentionBase):
    """Gated positional self-attention (ConViT Eq. 6-7).

    `A^h = (1 - sigma(lambda_h)) softmax(Q^h K^h^T / sqrt(D_h))
          + sigma(lambda_h) softmax(v_pos^h r_ij)`, normalized over keys, then
    `GPSA_h(X) = A^h X W_val^h`. The relative encodings `r_ij` are fixed and
    computed once in `build()` for the patch grid (non-square grids included);
    `v_pos^h` and the gates `lambda_h` are learned, the gates initialized to 1
    (ConViT Sec. 3).

    Tokens given as a grid `(batch, rows, cols, width)` carry their grid with
    them: `r_ij` is then computed for that grid, whatever its size (a model of
    dynamic image size), as constants when the size is static and with
    `keras.ops` when it is known only in the graph. `v_pos` acts on the
    offsets alone, so the same weights serve every grid.

    With `use_local_init`, the layer starts as a convolution (ConViT Sec. 3):
    `W_val` is the identity and `v_pos` centres each head on one position of a
    `sqrt(N_h) x sqrt(N_h)` kernel with sharpness `locality_strength`.

    ConViT's ablations (Table 3) freeze parts of the layer: `train_gating=False`
    fixes every gate at `lambda_h = 0` (row (b)), and the base layer argument
    `trainable=False` freezes all of its weights at their initialization
    (rows (f) and (g)).

    Args:
        num_heads: int. Number of heads; a perfect square with `use_local_init`.
        grid_size: int or tuple of 2 ints. Rows and columns of the patch grid
            of sequence inputs (a grid input brings its own).
        locality_strength: float. `alpha` of the convolutional initialization.
            Defaults to 1.
        use_local_init: bool. Whether to use the convolutional initialization.
            Defaults to `True`.
        qk_bias: bool. Whether the query/key and value projections have a bias.
            Defaults to `False`, as in ConViT.
        attention_dropout_rate: float. Dropout on the attention. Defaults to 0.
        kernel_initializer: Initializer of the q/k/v and output projections.
            Defaults to `"glorot_uniform"`.
        train_gating: bool. Whether the gates `lambda_h` are learned (from 1)
            or a non-trainable weight fixed at 0, so that every head pays
            `sigma(0) = 1/2` of its attention to content and half to position
            (ConViT Table 3 (b), footnote 3: "we freeze all gating parameters
            to lambda = 0"). Defaults to `True`.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor of shape `(batch, rows * cols, width)` or
            `(batch, rows, cols, width)`; patch tokens only.
        training: bool. Whether dropout is active.
        return_attention_scores: bool. Also return `normalize[A]`, shape
            `(batch, heads, length, length)`.

    Returns:
        Tensor of the shape of `tokens`.
    """

    def __init__(
        self,
        num_heads,
        grid_size,
        locality_strength=1.0,
        use_local_init=True,
        qk_bias=False,
        attention_dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        train_gating=True,
        **kwargs,
    ):
        super().__init__(num_heads, attention_dropout_rate, kernel_initializer, **kwargs)
        check_bool(train_gating, "train_gating")
        self.grid_size = to_pair(grid_size, "grid_size")
        self.locality_strength = float(locality_strength)
        self.use_local_init = use_local_init
        self.qk_bias = qk_bias
        self.train_gating = train_gating
        if use_local_init:
            # Fails early, with the message, for a non-square head count.
            local_init_kernel(num_heads, self.locality_strength)

    def build(self, input_shape):
        hidden_size = self._check_width(input_shape)
        self.head_dim = hidden_size // self.num_heads
        num_tokens = self.grid_size[0] * self.grid_size[1]
        if len(input_shape) == 3 and input_shape[1] is not None and input_shape[1] != num_tokens:
            raise ValueError(
                f"GPSA was given a {self.grid_size} grid ({num_tokens} tokens) "
                f"but the input has {input_shape[1]} tokens. "
                f"Received: input_shape={input_shape}"
            )
        self.relative_offsets = relative_offsets(self.grid_size)
        self.qk = self._dense(2 * hidden_size, "qk", self.qk_bias, fused_parts=2)
        self.qk.build(input_shape)
        self.v = self._dense(hidden_size, "v", self.qk_bias)
        self.v.build(input_shape)
        self.out = self._dense(hidden_size, "out")
        self.out.build(input_shape)
        self.pos_proj = keras.layers.Dense(
            self.num_heads,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="pos_proj",
        )
        self.pos_proj.build((None, 3))
        self.gating = self.add_weight(
            shape=(self.num_heads,),
            initializer="ones" if self.train_gating else "zeros",
            trainable=self.train_gating,
            name="gating",
        )
        self.attention_dropout = keras.layers.Dropout(
            self.attention_dropout_rate, dtype=self.dtype_policy
        )
        if self.use_local_init:
            self.v.kernel.assign(np.eye(hidden_size, dtype="float32"))
            self.pos_proj.kernel.assign(
                local_init_kernel(self.num_heads, self.locality_strength)
            )
        if not self.trainable:
            # `trainable=False` given to the constructor freezes only the
            # variables that exist then; the sublayers built here would keep
            # trainable variables, which a parent layer would still train.
            for layer in (self.qk, self.v, self.out, self.pos_proj):
                layer.trainable = False

    def _offsets(self, tokens):
        """`r_ij` for the grid of `tokens`: the built one for a sequence."""
        if len(tokens.shape) == 3:
            offsets = self.relative_offsets
        else:
            shape = ops.shape(tokens)
            rows, cols = shape[1], shape[2]
            if not (isinstance(rows, int) and isinstance(cols, int)):
                offsets = symbolic_relative_offsets(rows, cols)
            elif (rows, cols) == self.grid_size:
                offsets = self.relative_offsets
            else:
                offsets = relative_offsets((rows, cols))
        return ops.cast(ops.convert_to_tensor(offsets), self.compute_dtype)

    def compute_attention(self, tokens):
        """The normalized gated attention of Eq. 6-7, in float32.

        Args:
            tokens: Tensor `(batch, length, width)` or `(batch, rows, cols, width)`.

        Returns:
            Tensor `(batch, heads, length, length)`.
        """
        offsets = self._offsets(tokens)
        tokens = self._as_sequence(tokens)
        qk = _split_heads(dense_on_tokens(self.qk, tokens), 2 * self.num_heads, self.head_dim)
        query, key = qk[:, : self.num_heads], qk[:, self.num_heads :]
        logits = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        logits = ops.cast(logits, "float32") / math.sqrt(self.head_dim)
        content = ops.softmax(logits, axis=-1)
        # r_ij is batch-independent, so the positional scores are computed once
        # per call and broadcast over the batch.
        position = ops.cast(self.pos_proj(offsets), "float32")
        position = ops.softmax(ops.transpose(position, (2, 0, 1)), axis=-1)
        gate = ops.reshape(ops.sigmoid(ops.cast(self.gating, "float32")), (-1, 1, 1))
        attention = (1.0 - gate) * content + gate * position[None]
        return attention / ops.sum(attention, axis=-1, keepdims=True)

    def _as_sequence(self, tokens):
        if len(tokens.shape) == 3:
            return tokens
        shape = ops.shape(tokens)
        return ops.reshape(tokens, (shape[0], shape[1] * shape[2], tokens.shape[-1]))

    def call(self, tokens, training=None, return_attention_scores=False):
        probs = self.compute_attention(tokens)
        sequence = self._as_sequence(tokens)
        values = _split_heads(dense_on_tokens(self.v, sequence), self.num_heads, self.head_dim)
        x = dense_on_tokens(self.out, _merge_heads(self._attend(probs, values, training)))
        if len(tokens.shape) == 4:
            shape = ops.shape(tokens)
            x = ops.reshape(x, (shape[0], shape[1], shape[2], x.shape[-1]))
        return (x, probs) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "grid_size": self.grid_size,
                "locality_strength": self.locality_strength,
                "use_local_init": self.use_local_init,
                "qk_bias": self.qk_bias,
                "train_gating": self.train_gating,
            }
        )
        return config

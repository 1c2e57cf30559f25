"""Window attention of the Swin Transformer (Liu et al. 2021, Sec. 3.2) and its window geometry.

(Over 400 lines on purpose: the layer and the numpy geometry it is built from (relative
index, window partition, shift masks) are checked against each other and against timm's.)

Attention within M x M windows with a learned relative position bias (Eq. 4),
either term of which can be left out for the paper's Table 4 ablation, and the
numpy constants it needs: the relative position index, the windows and
shift of a stage (timm's rule: a stage not larger than the window gets a window
of its own size and no shift), the mask that keeps regions apart after the
cyclic shift (`cyclic_shift`), and where each window token lies on the map
(for analysis).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_vit.layers.attention import _AttentionBase, _merge_heads
from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.validation import check_bool, check_rate, to_pair

# Added to the logits of token pairs from different regions after the cyclic
# shift (`shifted_window_mask`): -100, the value of Microsoft's reference and of
# timm. The softmax runs in float32 (`compute_attention`) and each row's largest
# logit is unmasked (a token always shares its own region), so a masked pair's
# weight is exp(-100) ~ 3.7e-44 times exp(its logit minus that largest). That is
# a float32 subnormal, not zero (PyTorch keeps it), though TensorFlow's and XLA's
# CPU kernels flush subnormals to 0; either way it is negligible next to the
# unmasked weights, as long as a row's logits differ by much less than 100.
MASK_VALUE = -100.0


def _swin_initializer():
    # The reference initializes every Linear with trunc_normal(std=0.02).
    return keras.initializers.TruncatedNormal(stddev=0.02)


def _check_static_map(input_shape, layer_name):
    if len(input_shape) != 4 or input_shape[1] is None or input_shape[2] is None:
        raise ValueError(
            f"{layer_name} expects a `(batch, height, width, channels)` input with "
            f"static height and width. Received: input_shape={tuple(input_shape)}"
        )
    return input_shape[1], input_shape[2]


def _check_shift(shift_size):
    """Returns `shift_size` as a pair of non-negative ints."""
    is_pair = isinstance(shift_size, (tuple, list))
    pair = tuple(shift_size) if is_pair else (shift_size, shift_size)
    valid = (isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in pair)
    if len(pair) != 2 or not all(valid):
        raise ValueError(
            "`shift_size` must be a non-negative integer or a tuple of 2 of them. "
            f"Received: shift_size={shift_size!r}"
        )
    return pair


def check_attention_terms(use_relative_position_bias, use_content_term):
    """Checks which of the two logit terms of Swin Eq. 4 a window attention keeps.

    Raises:
        ValueError: for a non-bool, or for both terms off (the logits would be
            the mask alone: a uniform average over each region, no attention).
    """
    check_bool(use_relative_position_bias, "use_relative_position_bias")
    check_bool(use_content_term, "use_content_term")
    if not (use_relative_position_bias or use_content_term):
        raise ValueError(
            "Window attention needs at least one of its logit terms, the content "
            "term q k^T / sqrt(d) or the relative position bias B. Received: "
            "use_relative_position_bias=False, use_content_term=False"
        )


def relative_position_index(window_size):
    """Index of each (query, key) pair of a window into the bias table (Swin Sec. 3.2).

    The relative offset of two tokens of a `Mh x Mw` window lies in
    `[-Mh + 1, Mh - 1] x [-Mw + 1, Mw - 1]`; the pair indexes the
    `((2 Mh - 1) * (2 Mw - 1), heads)` table at `(dy + Mh - 1) * (2 Mw - 1) + dx + Mw - 1`,
    the reference's layout, so that published tables keep their meaning.

    Args:
        window_size: tuple `(Mh, Mw)`.

    Returns:
        int32 numpy array of shape `(Mh * Mw, Mh * Mw)`.
    """
    win_h, win_w = window_size
    y, x = np.meshgrid(np.arange(win_h), np.arange(win_w), indexing="ij")
    y, x = y.reshape(-1), x.reshape(-1)
    dy = y[:, None] - y[None, :] + win_h - 1
    dx = x[:, None] - x[None, :] + win_w - 1
    return (dy * (2 * win_w - 1) + dx).astype("int32")


def window_and_shift(resolution, window_size, shift_size):
    """The window and shift a block uses on a `resolution` map (timm `_calc_window_shift`).

    Along each axis where the map is not larger than the window, the window
    shrinks to the map and the shift is 0 (one window covers the axis, so
    shifting would only wrap it around).

    Args:
        resolution: tuple `(H, W)`.
        window_size: tuple `(Mh, Mw)`, the requested window.
        shift_size: tuple `(sh, sw)`, the requested shift.

    Returns:
        Two tuples, the window and the shift.
    """
    window = tuple(r if r <= w else w for r, w in zip(resolution, window_size))
    shift = tuple(0 if r <= w else s for r, w, s in zip(resolution, window, shift_size))
    return window, shift


def shifted_window_mask(padded_size, window_size, shift_size):
    """Additive attention mask of the shifted windows (Swin Sec. 3.2, Fig. 4).

    After the cyclic shift of a `padded_size` map, the last window along an axis
    holds tokens from the far side of the map; each axis is cut into the regions
    `[0, Hp - M)`, `[Hp - M, Hp - s)` and `[Hp - s, Hp)` (one region if `s = 0`)
    and pairs of tokens from different regions get `MASK_VALUE`.

    Args:
        padded_size: tuple `(Hp, Wp)`, multiples of the window.
        window_size: tuple `(Mh, Mw)`.
        shift_size: tuple `(sh, sw)`.

    Returns:
        float32 numpy array of shape `(num_windows, Mh * Mw, Mh * Mw)`.
    """

    def regions(size, window, shift):
        index = np.arange(size)
        if shift == 0:
            return np.zeros(size, "int64")
        return (index >= size - window).astype("int64") + (index >= size - shift)

    (hp, wp), (mh, mw) = padded_size, window_size
    region = regions(hp, mh, shift_size[0])[:, None] * 3 + regions(wp, mw, shift_size[1])[None, :]
    windows = region.reshape(hp // mh, mh, wp // mw, mw).transpose(0, 2, 1, 3)
    windows = windows.reshape(-1, mh * mw)
    different = windows[:, :, None] != windows[:, None, :]
    return np.where(different, MASK_VALUE, 0.0).astype("float32")


def window_positions(padded_size, window_size, shift_size):
    """Where each window token of a block sits on its map, before the cyclic shift.

    Token `t` of window `w` (both row-major, as `window_partition` lays them out
    on the map rolled by `-shift`) holds the map position `(r, c)` with
    `r = (w_row * Mh + t_row + sh) mod Hp` and likewise for `c`: the index maps
    window attention back onto the (padded) feature grid, for analysis.

    Args:
        padded_size: tuple `(Hp, Wp)`, multiples of the window.
        window_size: tuple `(Mh, Mw)`.
        shift_size: tuple `(sh, sw)`.

    Returns:
        int64 numpy array `(num_windows, Mh * Mw)` of flat indices `r * Wp + c`.
    """
    (hp, wp), (mh, mw), (sh, sw) = padded_size, window_size, shift_size
    rows = (np.arange(hp) + sh) % hp
    cols = (np.arange(wp) + sw) % wp
    flat = rows[:, None] * wp + cols[None, :]
    windows = flat.reshape(hp // mh, mh, wp // mw, mw).transpose(0, 2, 1, 3)
    return windows.reshape(-1, mh * mw).astype("int64")


def cyclic_shift(x, shift):
    """`ops.roll(x, shift, axis=(1, 2))` of a `(batch, H, W, C)` map with static `H`, `W`.

    Written as two slices and a concatenation per axis, the way JAX lowers a
    roll: TensorFlow's `Roll` op has no LiteRT builtin, so a Swin model that
    rolls with it converts to LiteRT only with TensorFlow ("Flex") kernels.

    Args:
        x: Tensor `(batch, H, W, C)`.
        shift: tuple `(sh, sw)` of ints; element `(i, j)` moves to
            `((i + sh) mod H, (j + sw) mod W)`.

    Returns:
        Tensor of the shape of `x`.
    """
    for axis, amount in zip((1, 2), shift):
        size = x.shape[axis]
        amount %= size
        if amount:
            lead = (slice(None),) * axis
            tail = x[lead + (slice(size - amount, None),)]
            x = ops.concatenate([tail, x[lead + (slice(0, size - amount),)]], axis=axis)
    return x


def window_partition(x, window_size):
    """`(batch, Hp, Wp, C)` -> `(batch * num_windows, Mh * Mw, C)`, windows row-major."""
    (mh, mw), (hp, wp), channels = window_size, x.shape[1:3], x.shape[3]
    x = ops.reshape(x, (-1, hp // mh, mh, wp // mw, mw, channels))
    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
    return ops.reshape(x, (-1, mh * mw, channels))


def window_reverse(windows, window_size, padded_size):
    """Inverse of `window_partition`, back to `(batch, Hp, Wp, C)`."""
    (mh, mw), (hp, wp), channels = window_size, padded_size, windows.shape[-1]
    x = ops.reshape(windows, (-1, hp // mh, wp // mw, mh, mw, channels))
    x = ops.transpose(x, (0, 1, 3, 2, 4, 5))
    return ops.reshape(x, (-1, hp, wp, channels))


@keras.saving.register_keras_serializable(package="keras_vit")
class WindowAttention(_AttentionBase):
    """Multi-head self-attention within windows, with relative position bias (Swin Eq. 4).

    `Attention(Q, K, V) = SoftMax(Q K^T / sqrt(d) + B) V` in each `Mh x Mw`
    window, `B` gathered from a learned `((2 Mh - 1) * (2 Mw - 1), heads)` table
    by `relative_position_index` (Sec. 3.2). The index is a constant computed in
    `build()`. An additive mask per window (the shifted windows' one, see
    `shifted_window_mask`) can be passed at call time.

    Either logit term can be dropped, for the position rows of Table 4:
    without the bias (`use_relative_position_bias=False`, "no pos." and
    "abs. pos.") the layer is plain window attention with no table; without
    the content term (`use_content_term=False`, "rel. pos. w/o app.", "app."
    being the paper's name for the first, scaled dot-product term of Eq. 4)
    the weights are `SoftMax(B [+ mask])`, the same for every image, and the
    layer projects only the values (a `value` projection replaces `qkv`:
    queries and keys would have no use).

    Args:
        num_heads: int. Number of heads; must divide the width.
        window_size: int or tuple of 2 ints. `(Mh, Mw)`; the input holds
            `Mh * Mw` tokens per window.
        qkv_bias: bool. Whether the fused qkv projection (or the value
            projection, without the content term) has a bias. Defaults to
            `True`.
        attention_dropout_rate: float. Dropout on the attention probabilities.
            Defaults to 0.
        dropout_rate: float. Dropout after the output projection. Defaults to 0.
        kernel_initializer: Initializer of the projections. Defaults to a
            truncated normal with standard deviation 0.02 (the reference's).
        use_relative_position_bias: bool. Add the learned relative position
            bias `B` to the logits. Defaults to `True` (Swin's).
        use_content_term: bool. Include the content (appearance) term
            `Q K^T / sqrt(d)` in the logits. Defaults to `True` (Swin's). At
            least one of the two terms must be kept.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch * num_windows, Mh * Mw, width)`, the windows of
            each image consecutive (as `window_partition` lays them out).
        attention_mask: None or array `(num_windows, Mh * Mw, Mh * Mw)` added to
            the logits of every image's windows.
        training: bool. Whether dropout is active.
        return_attention_scores: bool. Also return the probabilities,
            `(batch * num_windows, heads, Mh * Mw, Mh * Mw)`.
    """

    def __init__(
        self,
        num_heads,
        window_size,
        qkv_bias=True,
        attention_dropout_rate=0.0,
        dropout_rate=0.0,
        kernel_initializer=None,
        use_relative_position_bias=True,
        use_content_term=True,
        **kwargs,
    ):
        super().__init__(
            num_heads,
            attention_dropout_rate,
            kernel_initializer or _swin_initializer(),
            **kwargs,
        )
        check_rate(dropout_rate, "dropout_rate")
        check_attention_terms(use_relative_position_bias, use_content_term)
        self.window_size = to_pair(window_size, "window_size")
        self.qkv_bias = qkv_bias
        self.dropout_rate = dropout_rate
        self.use_relative_position_bias = use_relative_position_bias
        self.use_content_term = use_content_term

    def build(self, input_shape):
        hidden_size = self._check_width(input_shape)
        num_tokens = self.window_size[0] * self.window_size[1]
        if input_shape[1] is not None and input_shape[1] != num_tokens:
            raise ValueError(
                f"WindowAttention with window_size={self.window_size} expects "
                f"{num_tokens} tokens per window. Received: input_shape={tuple(input_shape)}"
            )
        self.head_dim = hidden_size // self.num_heads
        self.relative_position_index = None
        self.relative_position_bias_table = None
        if self.use_relative_position_bias:
            self.relative_position_index = relative_position_index(self.window_size)
            table_size = (2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1)
            self.relative_position_bias_table = self.add_weight(
                shape=(table_size, self.num_heads),
                initializer=_swin_initializer(),
                name="relative_position_bias_table",
            )
        self.qkv = self.value = None
        if self.use_content_term:
            self.qkv = self._dense(3 * hidden_size, "qkv", self.qkv_bias, fused_parts=3)
            self.qkv.build(input_shape)
        else:
            self.value = self._dense(hidden_size, "value", self.qkv_bias)
            self.value.build(input_shape)
        self.out = self._dense(hidden_size, "out")
        self.out.build(input_shape)
        self.attention_dropout = keras.layers.Dropout(
            self.attention_dropout_rate, dtype=self.dtype_policy
        )
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
        resolve_dtype_policies(self)

    def relative_position_bias(self):
        """`B` of Eq. 4, shape `(heads, Mh * Mw, Mh * Mw)`, in float32."""
        if not self.use_relative_position_bias:
            raise ValueError(
                "This WindowAttention has no relative position bias. Received: "
                "use_relative_position_bias=False"
            )
        num_tokens = self.relative_position_index.shape[0]
        bias = ops.take(
            ops.cast(self.relative_position_bias_table, "float32"),
            self.relative_position_index.reshape(-1),
            axis=0,
        )
        return ops.transpose(ops.reshape(bias, (num_tokens, num_tokens, self.num_heads)), (2, 0, 1))

    def compute_attention(self, query, key, attention_mask=None):
        """Probabilities `softmax(q k^T / sqrt(d) + B [+ mask])`, in float32.

        Without `use_relative_position_bias`, `softmax(q k^T / sqrt(d) [+ mask])`.

        Args:
            query: Tensor `(batch * num_windows, heads, N, head_dim)`.
            key: Tensor `(batch * num_windows, heads, N, head_dim)`.
            attention_mask: None or array `(num_windows, N, N)`.

        Returns:
            Tensor `(batch * num_windows, heads, N, N)`.
        """
        query = query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
        logits = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))
        # Softmax in float32 with the bias and mask: bfloat16 would round the
        # bias differences between neighbouring offsets away.
        logits = ops.cast(logits, "float32")
        bias = self.relative_position_bias() if self.use_relative_position_bias else None
        if attention_mask is None:
            return ops.softmax(logits if bias is None else logits + bias[None], axis=-1)
        # Bias and mask summed first, `(windows, heads, N, N)`: one pass over the
        # logits instead of two.
        mask = ops.convert_to_tensor(attention_mask, "float32")
        bias = mask[:, None] if bias is None else mask[:, None] + bias[None]
        num_windows, num_tokens = mask.shape[0], logits.shape[-1]
        logits = ops.reshape(logits, (-1, num_windows, self.num_heads, num_tokens, num_tokens)) + bias[None]
        logits = ops.reshape(logits, (-1, self.num_heads, num_tokens, num_tokens))
        return ops.softmax(logits, axis=-1)

    def position_attention(self, value, attention_mask=None):
        """Probabilities `softmax(B [+ mask])` of the attention without content term, in float32.

        The same for every image: computed once per window position, then
        broadcast over the batch by adding zeros shaped like `value` (whose
        batch size may be unknown until called).

        Args:
            value: Tensor `(batch * num_windows, heads, N, head_dim)`.
            attention_mask: None or array `(num_windows, N, N)`.

        Returns:
            Tensor `(batch * num_windows, heads, N, N)`.
        """
        bias = self.relative_position_bias()[None]
        if attention_mask is not None:
            bias = ops.convert_to_tensor(attention_mask, "float32")[:, None] + bias
        probs = ops.softmax(bias, axis=-1)
        num_windows, num_tokens = probs.shape[0], probs.shape[-1]
        zeros = ops.zeros_like(ops.cast(value[:, :1, :1, :1], "float32"))
        probs = ops.reshape(zeros, (-1, num_windows, 1, 1, 1)) + probs[None]
        return ops.reshape(probs, (-1, self.num_heads, num_tokens, num_tokens))

    def call(self, tokens, attention_mask=None, training=None, return_attention_scores=False):
        if not self.use_content_term:
            value = dense_on_tokens(self.value, tokens)
            value = ops.reshape(value, (-1, tokens.shape[1], self.num_heads, self.head_dim))
            value = ops.transpose(value, (0, 2, 1, 3))
            probs = self.position_attention(value, attention_mask)
            return self._project(probs, value, training, return_attention_scores)
        # q, k and v along a leading axis: taking them apart is free and its
        # gradient one concatenation, where slicing the heads axis of a
        # `(windows, 3 * heads, N, d)` tensor costs zero-padded copies backward.
        qkv = ops.reshape(dense_on_tokens(self.qkv, tokens), (-1, tokens.shape[1], 3, self.num_heads, self.head_dim))
        query, key, value = ops.unstack(ops.transpose(qkv, (2, 0, 3, 1, 4)), 3, axis=0)
        probs = self.compute_attention(query, key, attention_mask)
        return self._project(probs, value, training, return_attention_scores)

    def _project(self, probs, value, training, return_attention_scores):
        x = _merge_heads(self._attend(probs, value, training))
        x = self.dropout(dense_on_tokens(self.out, x), training=training)
        return (x, probs) if return_attention_scores else x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "window_size": self.window_size,
                "qkv_bias": self.qkv_bias,
                "dropout_rate": self.dropout_rate,
                "use_relative_position_bias": self.use_relative_position_bias,
                "use_content_term": self.use_content_term,
            }
        )
        return with_quantized_dtypes(self, config)

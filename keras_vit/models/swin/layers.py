"""Swin Transformer layers (Liu et al. 2021): windows, shifted windows, patch merging.

(Over 400 lines on purpose: Swin's patch embedding, block and merging are one
family that shares the padding and map conventions below; its window attention
is in `keras_vit.models.swin.window_attention`.)

Feature maps stay channels-last, `(batch, H, W, C)`, between the layers, so that
the stage resolution is static and the window masks and relative position
indices are numpy constants computed in `build()`; `call` only reads them.

Order of operations in a block whose map is not a multiple of the window (the
order of Microsoft's detection/segmentation code): pad at the bottom/right to a
multiple of the window, cyclically shift the padded map, attend in windows with
the mask of the padded map, shift back on the same padded size, crop. Padded
tokens are zeros (after the first LayerNorm) that are not masked, as in the
reference implementations. timm 1.0.31 shifts before padding instead, which puts
its wrapped-around rows at `H - s` while its mask (computed on the padded size)
separates them at `Hp - s`; both orders agree whenever `H` and `W` are multiples
of the window, which they are in every published configuration at its training
resolution.
"""

import math

import keras
from keras import ops

from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.transformer import PreNormBlock
from keras_vit.layers.validation import (
    check_bool,
    check_non_negative_float,
    check_positive_int,
    check_rate,
    check_remat_without_dropout,
    to_pair,
)
from keras_vit.models.swin.window_attention import (
    WindowAttention,
    check_attention_terms,
    cyclic_shift,
    _check_shift,
    _check_static_map,
    _swin_initializer,
    shifted_window_mask,
    window_and_shift,
    window_partition,
    window_reverse,
)


@keras.saving.register_keras_serializable(package="keras_vit")
class SwinPatchEmbedding(keras.layers.Layer):
    """Patch partition and linear embedding, then LayerNorm (Swin Sec. 3.1, Fig. 3).

    Non-overlapping `P x P` patches (P = 4 in Swin) are projected to `embed_dim`
    by a stride-P convolution and normalized (the reference's `patch_norm=True`).
    An image whose height or width is not a multiple of P is zero-padded at the
    bottom/right to the next multiple, as Microsoft's implementation does (timm's
    patch embedding refuses such images instead).

    Args:
        embed_dim: int. `C`, the width of the tokens.
        patch_size: int or tuple of 2 ints. Defaults to 4.
        use_norm: bool. Whether a LayerNorm follows the projection. Defaults to
            `True`.
        layer_norm_epsilon: float. Defaults to 1e-5, as in the reference.
        kernel_initializer: Initializer of the projection. Defaults to
            `"glorot_uniform"`.
        **kwargs: Base layer arguments.

    Call arguments:
        images: Tensor `(batch, H, W, channels)`.

    Returns:
        Tensor `(batch, ceil(H / P), ceil(W / P), embed_dim)`.
    """

    def __init__(
        self,
        embed_dim,
        patch_size=4,
        use_norm=True,
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(embed_dim, "embed_dim")
        check_non_negative_float(layer_norm_epsilon, "layer_norm_epsilon")
        self.embed_dim = embed_dim
        self.patch_size = to_pair(patch_size, "patch_size")
        self.use_norm = use_norm
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _padding(self, input_shape):
        return tuple(
            0 if size is None else -size % p for size, p in zip(input_shape[1:3], self.patch_size)
        )

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "SwinPatchEmbedding expects images `(batch, height, width, channels)`. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        self.proj = keras.layers.Conv2D(
            self.embed_dim,
            self.patch_size,
            strides=self.patch_size,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="proj",
        )
        self.proj.build(input_shape)
        self.norm = None
        if self.use_norm:
            self.norm = LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
            )
            self.norm.build((*input_shape[:-1], self.embed_dim))

    def call(self, images):
        pad_h, pad_w = self._padding(images.shape)
        if pad_h or pad_w:
            images = ops.pad(images, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)))
        x = self.proj(images)
        return self.norm(x) if self.norm is not None else x

    def compute_output_shape(self, input_shape):
        size = [
            None if s is None else -(-s // p) for s, p in zip(input_shape[1:3], self.patch_size)
        ]
        return (input_shape[0], *size, self.embed_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "embed_dim": self.embed_dim,
                "patch_size": self.patch_size,
                "use_norm": self.use_norm,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class SwinTransformerBlock(PreNormBlock):
    """Swin Transformer block with (shifted) window attention (Swin Eq. 3, Sec. 3.2).

    `z' = z + DropPath((S)W-MSA(LN(z)))`, `z'' = z' + DropPath(MLP(LN(z')))`, the
    MLP fc1-GELU-dropout-fc2-dropout: the pre-norm residual body of ViT's blocks
    (`PreNormBlock`), its attention on windows. With a shift, the normalized map is padded to
    a multiple of the window, rolled by `-shift`, attended with the shifted-window
    mask, rolled back by `+shift` on the padded size and cropped (see the module
    docstring). The window shrinks to the map, without shift, along an axis where
    the map is not larger than the window (`window_and_shift`). The window, shift,
    mask and relative position index are constants of the input resolution,
    fixed in `build()`.

    Args:
        num_heads: int. Number of attention heads.
        window_size: int or tuple of 2 ints. `M`. Defaults to 7.
        shift_size: int or tuple of 2 ints. The cyclic shift, `M // 2` in every
            second block of the reference and 0 in the others. Defaults to 0.
        mlp_ratio: float. MLP hidden width over the token width, the hidden
            width being `int(width * mlp_ratio)`. Defaults to 4.
        qkv_bias: bool. Bias of the qkv projection. Defaults to `True`.
        dropout_rate: float. Dropout after the attention projection and the MLP
            layers. Defaults to 0.
        attention_dropout_rate: float. Dropout on attention probabilities.
            Defaults to 0.
        drop_path_rate: float. Stochastic depth of both residual branches.
            Defaults to 0.
        layer_norm_epsilon: float. Defaults to 1e-5, as in the reference.
        kernel_initializer: Initializer of all kernels. Defaults to a truncated
            normal with standard deviation 0.02 (the reference's).
        remat: bool. Recompute the block in the backward pass instead of
            storing its activations (`keras.remat`: `tf.recompute_grad`,
            `jax.checkpoint`). Supports stochastic depth, whose masks are
            drawn outside the recomputed function (`call_with_remat`); refuses
            dropout and attention dropout, whose masks would be drawn anew.
            Defaults to `False`.
        use_relative_position_bias: bool. Whether the window attention adds
            its relative position bias `B` (Eq. 4); `False` for Table 4's
            "no pos." and "abs. pos." rows. Defaults to `True`.
        use_content_term: bool. Whether the window attention's logits include
            the content term `q k^T / sqrt(d)`; `False` for Table 4's "rel.
            pos. w/o app." row. Defaults to `True`.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, H, W, width)` with static `H` and `W`.
        training: bool.
        return_attention_scores: bool. Also return the attention probabilities
            `(batch * num_windows, heads, Mh * Mw, Mh * Mw)`.
    """

    # What `keras_vit.inspection.family` says of a model of these blocks, and the
    # family of the checkpoints it loads (`keras_vit.families`).
    checkpoint_family = "Swin"

    def __init__(
        self,
        num_heads,
        window_size=7,
        shift_size=0,
        mlp_ratio=4.0,
        qkv_bias=True,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-5,
        kernel_initializer=None,
        remat=False,
        use_relative_position_bias=True,
        use_content_term=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(num_heads, "num_heads")
        check_bool(remat, "remat")
        check_attention_terms(use_relative_position_bias, use_content_term)
        check_remat_without_dropout(remat, dropout_rate, attention_dropout_rate)
        window = to_pair(window_size, "window_size")
        shift = _check_shift(shift_size)
        if any(s >= w for s, w in zip(shift, window)):
            raise ValueError(
                "`shift_size` must be smaller than `window_size` along both axes. "
                f"Received: shift_size={shift_size!r}, window_size={window_size!r}"
            )
        check_non_negative_float(mlp_ratio, "mlp_ratio")
        if mlp_ratio <= 0:
            raise ValueError(f"`mlp_ratio` must be positive. Received: mlp_ratio={mlp_ratio!r}")
        for name, rate in (
            ("dropout_rate", dropout_rate),
            ("attention_dropout_rate", attention_dropout_rate),
            ("drop_path_rate", drop_path_rate),
        ):
            check_rate(rate, name)
        check_non_negative_float(layer_norm_epsilon, "layer_norm_epsilon")
        self.num_heads = num_heads
        self.window_size = window
        self.shift_size = shift
        self.mlp_ratio = mlp_ratio
        self.qkv_bias = qkv_bias
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.drop_path_rate = drop_path_rate
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or _swin_initializer()
        )
        self.remat = remat
        self.use_relative_position_bias = use_relative_position_bias
        self.use_content_term = use_content_term

    def build(self, input_shape):
        resolution = _check_static_map(input_shape, "SwinTransformerBlock")
        self.resolution = resolution
        self.window, self.shift = window_and_shift(resolution, self.window_size, self.shift_size)
        self.padded_size = tuple(-(-r // w) * w for r, w in zip(resolution, self.window))
        self.attention_mask = None
        if any(self.shift):
            self.attention_mask = shifted_window_mask(self.padded_size, self.window, self.shift)
        # The MLP of the pre-norm body (`_make_mlp`): the reference's hidden width and zero biases.
        self.mlp_dim = int(input_shape[-1] * self.mlp_ratio)
        self.mlp_bias_initializer = keras.initializers.get("zeros")
        super().build(input_shape)

    def _make_attention(self):
        return WindowAttention(
            self.num_heads,
            self.window,
            qkv_bias=self.qkv_bias,
            attention_dropout_rate=self.attention_dropout_rate,
            dropout_rate=self.dropout_rate,
            kernel_initializer=self.kernel_initializer,
            use_relative_position_bias=self.use_relative_position_bias,
            use_content_term=self.use_content_term,
            dtype=self.dtype_policy,
            name="attention",
        )

    def _attention_input_shape(self, input_shape):
        return (None, self.window[0] * self.window[1], input_shape[-1])

    def _make_attention_dropout(self):
        return None  # WindowAttention drops its projection's output itself, as the reference's does

    def _attend(self, x, training, return_attention_scores):
        """Window attention on the normalized map: padded, shifted, partitioned, and back."""
        (height, width), (hp, wp) = self.resolution, self.padded_size
        if (hp, wp) != (height, width):
            x = ops.pad(x, ((0, 0), (0, hp - height), (0, wp - width), (0, 0)))
        if any(self.shift):
            x = cyclic_shift(x, (-self.shift[0], -self.shift[1]))
        windows = window_partition(x, self.window)
        windows = self.attention(
            windows,
            attention_mask=self.attention_mask,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        scores = None
        if return_attention_scores:
            windows, scores = windows
        x = window_reverse(windows, self.window, self.padded_size)
        if any(self.shift):
            x = cyclic_shift(x, self.shift)
        return x[:, :height, :width], scores

    def attention_maps_per_image(self, probs):
        """Attention probabilities `(batch * windows, heads, N, N)` as `(batch, windows, heads, N, N)`.

        Takes and returns a numpy array: `keras_vit.analysis.attention_maps`
        asks for this once it has the block's scores as numbers. Each image's
        windows are consecutive (`window_partition`).
        """
        windows = math.prod(p // w for p, w in zip(self.padded_size, self.window))
        return probs.reshape(-1, windows, *probs.shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "window_size": self.window_size,
                "shift_size": self.shift_size,
                "mlp_ratio": self.mlp_ratio,
                "qkv_bias": self.qkv_bias,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "drop_path_rate": self.drop_path_rate,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "remat": self.remat,
                "use_relative_position_bias": self.use_relative_position_bias,
                "use_content_term": self.use_content_term,
            }
        )
        return with_quantized_dtypes(self, config)


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchMerging(keras.layers.Layer):
    """Merges 2 x 2 neighbouring tokens, then LayerNorm and a linear map (Swin Sec. 3.1).

    The four neighbours are concatenated in the reference's order
    `[x(0::2, 0::2), x(1::2, 0::2), x(0::2, 1::2), x(1::2, 1::2)]` (rows, cols),
    which is also the order timm 1.0.31's reshape produces (channel
    `(2 * dw + dh) * C + c`), normalized over the `4C` channels and projected to
    `output_dim` without bias. An odd height or width is zero-padded at the
    bottom/right first, as in the reference.

    Args:
        output_dim: int or None. Output width; `2C` when None. Defaults to None.
        layer_norm_epsilon: float. Defaults to 1e-5, as in the reference.
        kernel_initializer: Initializer of the reduction. Defaults to a
            truncated normal with standard deviation 0.02 (the reference's).
        **kwargs: Base layer arguments.

    Call arguments:
        x: Tensor `(batch, H, W, C)` with static `H` and `W`.

    Returns:
        Tensor `(batch, ceil(H / 2), ceil(W / 2), output_dim)`.
    """

    def __init__(self, output_dim=None, layer_norm_epsilon=1e-5, kernel_initializer=None, **kwargs):
        super().__init__(**kwargs)
        if output_dim is not None:
            check_positive_int(output_dim, "output_dim")
        check_non_negative_float(layer_norm_epsilon, "layer_norm_epsilon")
        self.output_dim = output_dim
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer or _swin_initializer())

    def build(self, input_shape):
        _check_static_map(input_shape, "PatchMerging")
        channels = input_shape[-1]
        merged = (*input_shape[:-1], 4 * channels)
        self.norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.build(merged)
        self.reduction = keras.layers.Dense(
            self.output_dim or 2 * channels,
            use_bias=False,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="reduction",
        )
        self.reduction.build(merged)
        resolve_dtype_policies(self)

    def call(self, x):
        height, width, channels = x.shape[1:]
        if height % 2 or width % 2:
            x = ops.pad(x, ((0, 0), (0, height % 2), (0, width % 2), (0, 0)))
        h2, w2 = (height + 1) // 2, (width + 1) // 2
        # (batch, h2, dh, w2, dw, C) -> (batch, h2, w2, dw, dh, C): x0, x1, x2, x3.
        x = ops.reshape(x, (-1, h2, 2, w2, 2, channels))
        x = ops.transpose(x, (0, 1, 3, 4, 2, 5))
        x = ops.reshape(x, (-1, h2, w2, 4 * channels))
        return dense_on_tokens(self.reduction, self.norm(x))

    def compute_output_shape(self, input_shape):
        height, width, channels = input_shape[1:]
        output_dim = self.output_dim or 2 * channels
        return (input_shape[0], (height + 1) // 2, (width + 1) // 2, output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_dim": self.output_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return with_quantized_dtypes(self, config)

"""The pre-norm transformer encoder block (ViT Eq. 2-3), stochastic depth and remat."""

import keras
from keras import ops

from keras_vit.layers.attention import MultiHeadSelfAttention
from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from keras_vit.layers.mlp import MLPBlock
from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.relative_attention import RelativeSelfAttention
from keras_vit.layers.validation import check_bool, check_positive_int, check_rate, check_remat_without_dropout


@keras.saving.register_keras_serializable(package="keras_vit")
class StochasticDepth(keras.layers.Layer):
    """Drops a whole residual branch per example (Huang et al. 2016).

    During training each example's branch is zeroed with probability `rate` and
    scaled by `1 / (1 - rate)` otherwise, so that inference needs no rescaling.

    Args:
        rate: float. Probability of dropping the branch, in [0, 1).
        seed: int or None. Seed of the random generator.
        **kwargs: Base layer arguments.
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_rate(rate, "rate")
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        # No weights to create: built from the start, like `keras.layers.Dropout`.
        # Blocks create this layer in their `build()` and the functional model
        # never calls it symbolically, so it would otherwise stay unbuilt, and
        # `Model.quantize` refuses models with unbuilt layers.
        self.built = True

    def call(self, x, training=None):
        (mask,) = self.keep_masks(x, training, 1)
        return self.apply_keep_mask(x, mask)

    def keep_masks(self, x, training, count):
        """`count` independent per-example keep masks for branches shaped like `x`.

        Drawn apart from `apply_keep_mask` so that a block can draw the masks of
        its residual branches before a rematerialized function and pass them in
        (`call_with_remat`).

        Args:
            x: Tensor `(batch, ...)`, shaped like the branches.
            training: bool. Masks are drawn in training only.
            count: int. Number of masks, one per residual branch.

        Returns:
            A tuple of `count` tensors `(batch, 1, ..., 1)` of 0s and 1s in
            `x.dtype`, or of `count` Nones when nothing is dropped (outside
            training or at rate 0).
        """
        if not training or self.rate == 0.0:
            return (None,) * count
        shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        return tuple(
            ops.cast(keras.random.uniform(shape, seed=self.seed_generator) < 1.0 - self.rate, x.dtype)
            for _ in range(count)
        )

    def apply_keep_mask(self, x, mask):
        """`x` with the examples of a 0 mask zeroed and the others scaled by `1 / (1 - rate)`.

        Args:
            x: Tensor `(batch, ...)`.
            mask: A mask of `keep_masks`, or None (nothing dropped).
        """
        if mask is None:
            return x
        return x * mask / ops.cast(1.0 - self.rate, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config


def call_with_remat(forward, inputs, keep_masks):
    """`forward(inputs, keep_masks)`, recomputed in the backward pass (`keras.remat`).

    Only tensors cross the remat boundary: the block draws its stochastic-depth
    masks before it (`StochasticDepth.keep_masks`, as it does without remat)
    and passes them in, so that the recomputation sees the forward pass's
    masks, no random-generator state is updated inside `jax.checkpoint` (which
    would leak a tracer) or drawn anew by `tf.recompute_grad`, and the block
    gives the same outputs and gradients with and without remat.

    Args:
        forward: Callable `(inputs, keep_masks)` returning the block's output.
        inputs: Tensor. The block's input.
        keep_masks: Tuple of the block's stochastic-depth masks (or of Nones).

    Returns:
        The output of `forward`.
    """
    # Positional arguments only: backends' remat wrappers take no keywords.
    if all(mask is None for mask in keep_masks):
        return keras.remat(lambda x: forward(x, keep_masks))(inputs)
    return keras.remat(lambda x, *masks: forward(x, masks))(inputs, *keep_masks)


class PreNormBlock(keras.layers.Layer):
    """The pre-LayerNorm residual body of the encoder blocks (ViT Eq. 2-3).

    `z' = z + DropPath(Dropout(Attention(LN(z))))`, `z'' = z' + DropPath(MLP(LN(z')))`,
    with remat and the attention scores on request. A subclass sets the
    attributes its `__init__` checks (`num_heads`, `mlp_dim`, the rates,
    `layer_norm_epsilon`, `kernel_initializer`, `mlp_bias_initializer`, `remat`;
    in `build` before this class's, where they depend on the input, as Swin's
    MLP width) and builds its attention in `_make_attention`; the sublayers are `norm1`,
    `attention`, `norm2` and `mlp`. A subclass may replace the MLP
    (`_make_mlp`), scale each residual branch before it is added
    (`_make_branch_scales`, e.g. LayerScale), and run its attention on
    another layout of the tokens (`_attention_input_shape` and `_attend`,
    e.g. Swin's windows; `_make_attention_dropout` returns None where the
    attention drops its own output).
    """

    def _make_attention(self):
        raise NotImplementedError

    def attention_gates(self):
        """The gates that weigh this block's attention terms, per head, or None where it has none.

        A block whose attention mixes two terms by a learned gate (ConViT's GPSA,
        Eq. 6) gives each head's gate; `keras_vit.analysis.attention_gates`
        stacks them.

        Returns:
            None here. A gated block: numpy array `(heads,)`, each head's
            weight of its positional term (`sigma(lambda_h)`: 1 purely
            positional, 0 purely content).
        """
        return None

    def _make_mlp(self):
        """The MLP of the block: ViT's two dense layers with a GELU (`MLPBlock`)."""
        return MLPBlock(
            self.mlp_dim,
            dropout_rate=self.dropout_rate,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.mlp_bias_initializer,
            dtype=self.dtype_policy,
            name="mlp",
        )

    def _make_branch_scales(self):
        """Layers applied to the attention and the MLP branch before their residual sums; `(None, None)` for none."""
        return None, None

    def _make_attention_dropout(self):
        """Dropout on the attention branch's output, or None where the attention applies its own."""
        return keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)

    def _attention_input_shape(self, input_shape):
        """The shape the attention layer is built for: the block's input by default."""
        return input_shape

    def _attend(self, x, training, return_attention_scores):
        """The attention branch on the normalized tokens: `(output, scores or None)`."""
        x = self.attention(x, training=training, return_attention_scores=return_attention_scores)
        scores = None
        if return_attention_scores:
            x, scores = x
        if self.dropout is not None:
            x = self.dropout(x, training=training)
        return x, scores

    def build(self, input_shape):
        def layer_norm(name):
            norm = LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
            )
            norm.build(input_shape)
            return norm

        self.norm1 = layer_norm("norm1")
        self.attention = self._make_attention()
        self.attention.build(self._attention_input_shape(input_shape))
        self.norm2 = layer_norm("norm2")
        self.mlp = self._make_mlp()
        self.mlp.build(input_shape)
        self.attention_scale, self.mlp_scale = self._make_branch_scales()
        for scale in (self.attention_scale, self.mlp_scale):
            if scale is not None:
                scale.build(input_shape)
        self.dropout = self._make_attention_dropout()
        self.drop_path = StochasticDepth(self.drop_path_rate, dtype=self.dtype_policy, name="drop_path")
        resolve_dtype_policies(self)

    def call(self, tokens, training=None, return_attention_scores=False):
        keep_masks = self.drop_path.keep_masks(tokens, training, 2)
        if self.remat and not return_attention_scores:
            return call_with_remat(
                lambda t, masks: self._forward(t, masks, training, False), tokens, keep_masks
            )
        return self._forward(tokens, keep_masks, training, return_attention_scores)

    def _forward(self, tokens, keep_masks, training, return_attention_scores):
        # `training` passed on explicitly: `tf.recompute_grad` reruns this
        # function after the model's call (and its training context) has ended.
        attention_keep, mlp_keep = keep_masks
        x, scores = self._attend(self.norm1(tokens, training=training), training, return_attention_scores)
        if self.attention_scale is not None:
            x = self.attention_scale(x)
        tokens = tokens + self.drop_path.apply_keep_mask(x, attention_keep)
        x = self.mlp(self.norm2(tokens, training=training), training=training)
        if self.mlp_scale is not None:
            x = self.mlp_scale(x)
        tokens = tokens + self.drop_path.apply_keep_mask(x, mlp_keep)
        return (tokens, scores) if return_attention_scores else tokens

    def compute_output_shape(self, input_shape):
        return input_shape


@keras.saving.register_keras_serializable(package="keras_vit")
class TransformerBlock(PreNormBlock):
    """Pre-LayerNorm transformer encoder block (ViT Eq. 2-3).

    `z' = z + DropPath(Dropout(MSA(LN(z))))`, `z'' = z' + DropPath(MLP(LN(z')))`.
    Dropout follows every dense layer but the qkv projection (ViT App. B.1). With
    `relative_positions`, self-attention with the 1-D relative position logits
    of ViT App. D.3 (`RelativeSelfAttention`). A family's block with another
    attention subclasses it and overrides `_make_attention` (ConViT's
    `GPSABlock`, in `keras_vit.models.convit`).

    Args:
        num_heads: int. Number of attention heads.
        mlp_dim: int. Hidden width of the MLP.
        dropout_rate: float. Dropout after the dense layers. Defaults to 0.
        attention_dropout_rate: float. Dropout on attention probabilities.
            Defaults to 0.
        drop_path_rate: float. Stochastic depth rate of both residual branches.
            Defaults to 0.
        layer_norm_epsilon: float. Defaults to 1e-6, as in the reference.
        qkv_bias: bool. Bias in the qkv projection. Defaults to `True`.
        relative_positions: int or None. The number of patch tokens (after
            the prefix tokens, in raster order) between which the attention
            adds 1-D relative position logits (`RelativeSelfAttention`); None
            for none. Defaults to `None`.
        relative_position_initializer: Initializer of the relative
            embeddings. Defaults to `None`: `RelativeSelfAttention`'s, a
            normal with standard deviation 0.02.
        kernel_initializer: Initializer of all kernels. Defaults to
            `"glorot_uniform"`.
        mlp_bias_initializer: Initializer of the MLP biases. Defaults to a
            normal with standard deviation 1e-6 (reference ViT).
        remat: bool. Recompute the block in the backward pass instead of
            storing its activations (`keras.remat`: `tf.recompute_grad`,
            `jax.checkpoint`). Supports stochastic depth, whose masks are
            drawn outside the recomputed function (`call_with_remat`); refuses
            dropout and attention dropout, whose masks would be drawn anew.
            Defaults to `False`.
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, length, width)`.
        training: bool.
        return_attention_scores: bool. Also return the attention probabilities
            `(batch, heads, length, length)`.
    """

    def __init__(
        self,
        num_heads,
        mlp_dim,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        drop_path_rate=0.0,
        layer_norm_epsilon=1e-6,
        qkv_bias=True,
        relative_positions=None,
        relative_position_initializer=None,
        kernel_initializer="glorot_uniform",
        mlp_bias_initializer=None,
        remat=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(num_heads, "num_heads")
        check_positive_int(mlp_dim, "mlp_dim")
        for name, rate in (
            ("dropout_rate", dropout_rate),
            ("attention_dropout_rate", attention_dropout_rate),
            ("drop_path_rate", drop_path_rate),
        ):
            check_rate(rate, name)
        check_bool(remat, "remat")
        check_remat_without_dropout(remat, dropout_rate, attention_dropout_rate)
        if relative_positions is not None:
            check_positive_int(relative_positions, "relative_positions")
        self.num_heads = num_heads
        self.mlp_dim = mlp_dim
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.drop_path_rate = drop_path_rate
        self.layer_norm_epsilon = layer_norm_epsilon
        self.qkv_bias = qkv_bias
        self.relative_positions = relative_positions
        # Left None without relative attention: a random initializer draws its
        # seed from Python's generator when it is made, which would change the
        # initial weights of seeded default models.
        self.relative_position_initializer = (
            None if relative_position_initializer is None else keras.initializers.get(relative_position_initializer)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.mlp_bias_initializer = keras.initializers.get(
            mlp_bias_initializer or keras.initializers.RandomNormal(stddev=1e-6)
        )
        self.remat = remat

    def _attention_arguments(self):
        """The arguments every attention of the block takes, for `_make_attention` and its overrides."""
        return dict(
            num_heads=self.num_heads,
            attention_dropout_rate=self.attention_dropout_rate,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="attention",
        )

    def _make_attention(self):
        common = self._attention_arguments()
        if self.relative_positions is not None:
            return RelativeSelfAttention(
                num_patches=self.relative_positions,
                qkv_bias=self.qkv_bias,
                position_initializer=self.relative_position_initializer,
                **common,
            )
        return MultiHeadSelfAttention(qkv_bias=self.qkv_bias, **common)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "mlp_dim": self.mlp_dim,
                "dropout_rate": self.dropout_rate,
                "attention_dropout_rate": self.attention_dropout_rate,
                "drop_path_rate": self.drop_path_rate,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "qkv_bias": self.qkv_bias,
                "relative_positions": self.relative_positions,
                "relative_position_initializer": (
                    None
                    if self.relative_position_initializer is None
                    else keras.initializers.serialize(self.relative_position_initializer)
                ),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "mlp_bias_initializer": keras.initializers.serialize(self.mlp_bias_initializer),
                "remat": self.remat,
            }
        )
        return with_quantized_dtypes(self, config)

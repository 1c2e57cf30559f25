"""DINOv2's parts beyond ViT's: LayerScale, the SwiGLU MLP, register tokens and the block.

DINOv2 (Oquab et al. 2023) trains ViT's pre-norm block with two additions:
LayerScale (Touvron et al. 2021, CaiT Sec. 2.1), a learned per-channel scale on
each residual branch, started at 1e-5; and for ViT-g a SwiGLU MLP (Shazeer
2020). Darcet et al. (ICLR 2024) add register tokens: learned tokens without a
position embedding between the class token and the patches, which the model
may use as scratch space and which the head never reads.
"""

import keras
from keras import ops

from keras_vit.layers.mlp import MLPBlock
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_positive_int

MLP_ACTIVATIONS = ("gelu", "swiglu")
"""The block's MLP: ViT's GELU MLP, or the SwiGLU MLP of DINOv2's ViT-g."""


def check_layer_scale_init(value, name="init_value"):
    """Raises a ValueError naming `name` unless `value` is a positive number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")


@keras.saving.register_keras_serializable(package="keras_vit")
class LayerScale(keras.layers.Layer):
    """Multiplies each channel by a learned scale (LayerScale, CaiT Sec. 2.1).

    Args:
        init_value: float. The scales' initial value; DINOv2 starts them at
            1e-5 so that every residual branch starts near zero. Defaults to
            1e-5.
        **kwargs: Base layer arguments.

    Call arguments:
        x: Tensor `(..., width)`.
    """

    def __init__(self, init_value=1e-5, **kwargs):
        super().__init__(**kwargs)
        check_layer_scale_init(init_value)
        self.init_value = float(init_value)

    def build(self, input_shape):
        self.gamma = self.add_weight(
            shape=(input_shape[-1],), initializer=keras.initializers.Constant(self.init_value), name="gamma"
        )

    def call(self, x):
        return x * ops.cast(self.gamma, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"init_value": self.init_value})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class SwiGLUBlock(MLPBlock):
    """The SwiGLU MLP: `fc2(SiLU(a) * b)` with `[a; b] = fc1(x)` (Shazeer 2020, Eq. 6).

    ViT's `MLPBlock` with a gated hidden layer: `fc1` is one dense layer of
    `2 * mlp_dim` outputs, the first half the gated branch `a`, as DINOv2's
    `SwiGLUFFNFused` (`w12`) and timm's `SwiGLUPacked` lay it out, so
    checkpoints load without splitting.

    Args:
        mlp_dim: int. Width of the gated hidden layer (`fc2`'s input); 4096 in
            DINOv2's ViT-g.
        dropout_rate: float. Dropout after the gating and after `fc2`.
            Defaults to 0.
        kernel_initializer: Initializer of the kernels. Defaults to
            `"glorot_uniform"`.
        bias_initializer: Initializer of the biases. Defaults to `"zeros"`.
        **kwargs: Base layer arguments.
    """

    def __init__(self, mlp_dim, dropout_rate=0.0, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__(mlp_dim, dropout_rate=dropout_rate, kernel_initializer=kernel_initializer,
                         bias_initializer=bias_initializer, **kwargs)

    def _hidden_units(self):
        return 2 * self.mlp_dim

    def call(self, x, training=None):
        hidden = dense_on_tokens(self.fc1, x)
        gated, linear = hidden[..., : self.mlp_dim], hidden[..., self.mlp_dim:]
        x = self.dropout(ops.silu(gated) * linear, training=training)
        return self.dropout(dense_on_tokens(self.fc2, x), training=training)


@keras.saving.register_keras_serializable(package="keras_vit")
class DINOv2Block(TransformerBlock):
    """ViT's pre-norm block with LayerScale on both branches, and GELU or SwiGLU MLP (DINOv2).

    `z' = z + DropPath(gamma_1 * MSA(LN(z)))`,
    `z'' = z' + DropPath(gamma_2 * MLP(LN(z')))`.

    Args:
        num_heads: int. Number of attention heads.
        mlp_dim: int. Hidden width of the MLP (the gated width for SwiGLU).
        layer_scale_init: float. Initial value of LayerScale's `gamma_1`,
            `gamma_2`. Defaults to 1e-5 (DINOv2's).
        mlp_activation: str. `"gelu"` (ViT's MLP) or `"swiglu"`
            (`SwiGLUBlock`, DINOv2's ViT-g). Defaults to `"gelu"`.
        **kwargs: `TransformerBlock`'s other arguments (rates, initializers,
            `remat`, ...; not GPSA's or relative attention's).
    """

    # The family `keras_vit.inspection.family` reports for a model of these blocks.
    checkpoint_family = "DINOv2"

    def __init__(self, num_heads, mlp_dim, layer_scale_init=1e-5, mlp_activation="gelu", **kwargs):
        if mlp_activation not in MLP_ACTIVATIONS:
            raise ValueError(
                f"`mlp_activation` must be one of {MLP_ACTIVATIONS}. Received: mlp_activation={mlp_activation!r}"
            )
        if kwargs.get("relative_positions") is not None:
            raise ValueError(
                "DINOv2Block attends with plain multi-head self-attention. Received: "
                f"relative_positions={kwargs.get('relative_positions')!r}"
            )
        check_layer_scale_init(layer_scale_init, "layer_scale_init")
        super().__init__(num_heads, mlp_dim, **kwargs)
        self.layer_scale_init = float(layer_scale_init)
        self.mlp_activation = mlp_activation

    def _make_mlp(self):
        if self.mlp_activation == "gelu":
            return super()._make_mlp()
        return SwiGLUBlock(
            self.mlp_dim, dropout_rate=self.dropout_rate, kernel_initializer=self.kernel_initializer,
            bias_initializer=self.mlp_bias_initializer, dtype=self.dtype_policy, name="mlp",
        )

    def _make_branch_scales(self):
        return tuple(
            LayerScale(self.layer_scale_init, dtype=self.dtype_policy, name=name) for name in ("ls1", "ls2")
        )

    def get_config(self):
        config = super().get_config()
        for key in ("relative_positions", "relative_position_initializer"):
            config.pop(key)
        config.update({"layer_scale_init": self.layer_scale_init, "mlp_activation": self.mlp_activation})
        return config


@keras.saving.register_keras_serializable(package="keras_vit")
class RegisterTokens(keras.layers.Layer):
    """Prepends learned register tokens, without position embeddings (Darcet et al. 2024, Sec. 2.2).

    Called before the class token joins (`keras_vit.models.skeleton.Family.extra_tokens`),
    so the sequence becomes `[class; registers; patches]`, the order of the
    reference and of timm.

    Args:
        num_tokens: int. How many registers (4 in the published DINOv2 models).
        initializer: Initializer of the tokens. Defaults to a normal with
            standard deviation 1e-6 (timm's).
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, length, width)`.

    Returns:
        Tensor `(batch, num_tokens + length, width)`.
    """

    def __init__(self, num_tokens, initializer=None, **kwargs):
        super().__init__(**kwargs)
        check_positive_int(num_tokens, "num_tokens")
        self.num_tokens = num_tokens
        self.initializer = keras.initializers.get(initializer or keras.initializers.RandomNormal(stddev=1e-6))

    @property
    def adds_prefix_tokens(self):
        """How many non-patch tokens this layer puts before the patches (read by `keras_vit.inspection`)."""
        return self.num_tokens

    def build(self, input_shape):
        self.tokens = self.add_weight(shape=(self.num_tokens, input_shape[-1]), initializer=self.initializer,
                                      name="tokens")

    def call(self, tokens):
        registers = ops.cast(self.tokens, tokens.dtype)[None]
        registers = ops.broadcast_to(registers, (ops.shape(tokens)[0], self.num_tokens, tokens.shape[-1]))
        return ops.concatenate([registers, tokens], axis=1)

    def compute_output_shape(self, input_shape):
        length = None if input_shape[1] is None else input_shape[1] + self.num_tokens
        return (input_shape[0], length, input_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update({"num_tokens": self.num_tokens, "initializer": keras.initializers.serialize(self.initializer)})
        return config

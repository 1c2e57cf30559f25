"""The DINOv2 builder (Oquab et al. 2023), with or without registers (Darcet et al. 2024)."""

from keras_vit.layers.validation import check_bool
from keras_vit.models.common import check_choice
from keras_vit.models.dinov2.layers import MLP_ACTIVATIONS, DINOv2Block, RegisterTokens, check_layer_scale_init
from keras_vit.models.skeleton import EncoderConfig, Family, build_encoder_model


def check_register_count(num_register_tokens):
    """Raises a ValueError unless `num_register_tokens` is an integer >= 0."""
    if isinstance(num_register_tokens, bool) or not isinstance(num_register_tokens, int) or num_register_tokens < 0:
        raise ValueError(
            "`num_register_tokens` must be an integer >= 0 (4 in the published models with registers). "
            f"Received: num_register_tokens={num_register_tokens!r}"
        )


def DINOv2(
    image_size=518,
    patch_size=14,
    num_channels=3,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    mlp_dim=3072,
    mlp_activation="gelu",
    layer_scale_init=1e-5,
    num_register_tokens=0,
    num_classes=1000,
    include_top=False,
    classifier_activation=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    preprocessing="imagenet",
    dynamic_image_size=False,
    dynamic_padding=False,
    position_interpolation="bicubic",
    position_antialias=None,
    dtype=None,
    remat=False,
    weights=None,
    name="dinov2",
):
    """Builds a DINOv2 ViT: ViT's encoder with LayerScale, optional registers and SwiGLU.

    The image is cut into 14 x 14 patches, embedded with learned position
    embeddings (the class token has its own slot, or with registers its
    position folded into it as in timm; the registers have none), and
    passed through `num_layers` pre-norm blocks whose two residual branches
    are scaled by LayerScale (`DINOv2Block`), then a final LayerNorm. The
    class token after it is DINOv2's image feature (timm's pre-logits,
    Hugging Face's `pooler_output`); `keras_vit.backbone(model)` gives every
    token in the order class, registers, patches.

    Args:
        image_size: int or tuple `(height, width)`. Input size. Defaults to
            518, the size DINOv2's position embeddings were trained at
            (37 x 37 patches).
        patch_size: int or tuple. Defaults to 14.
        num_channels: int. Defaults to 3.
        hidden_size: int. Width D. Defaults to 768.
        num_layers: int. Defaults to 12.
        num_heads: int. Defaults to 12.
        mlp_dim: int. Hidden width of the MLPs (for SwiGLU the gated width,
            4096 in ViT-g). Defaults to 3072.
        mlp_activation: str. `"gelu"` or `"swiglu"` (ViT-g). Defaults to
            `"gelu"`.
        layer_scale_init: float. LayerScale's initial value. Defaults to 1e-5.
        num_register_tokens: int. Register tokens between the class token and
            the patches (0 for the original DINOv2, 4 for the `_reg4`
            models). Defaults to 0.
        num_classes: int. Classes of the head with `include_top`. Defaults
            to 1000.
        include_top: bool. Add a zero-initialized linear head on the class
            token. DINOv2's checkpoints have none, so the default is `False`:
            the model returns the normalized class token.
        classifier_activation: Activation of the head. Defaults to `None`.
        dropout_rate: float. Dropout after the position embeddings and the
            dense layers. Defaults to 0.
        attention_dropout_rate: float. Defaults to 0.
        drop_path_rate: float. Stochastic depth, rising linearly to this value
            in the last block. Defaults to 0.
        preprocessing: `"imagenet"` (ImageNet mean/std on [0, 255] pixels,
            DINOv2's), `"inception"` or `None`. Defaults to `"imagenet"`.
        dynamic_image_size: bool. Take any image size the patch divides,
            resampling the position embeddings per call. Defaults to `False`.
        dynamic_padding: bool. Pad images the patch does not divide.
            Defaults to `False`.
        position_interpolation: str. How position embeddings are resampled
            with `dynamic_image_size`. Defaults to `"bicubic"`.
        position_antialias: bool or None. Antialias that resampling. Defaults
            to `None`: as the reference, antialiased with registers and not
            without (Meta's hub builds its models with registers with
            `interpolate_antialias=True`, the others without; transformers'
            `Dinov2WithRegistersModel` and `Dinov2Model` follow). Meta's code
            also offsets the scale factor of the models without registers by
            0.1 patch (`interpolate_offset`), which transformers, timm and
            keras_vit do not.
        dtype: dtype policy. Defaults to the global policy.
        remat: bool. Recompute each block in the backward pass. Defaults to
            `False`.
        weights: str, path or None. A checkpoint file or known checkpoint
            name. Defaults to `None`.
        name: str. Model name.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images.

    Raises:
        ValueError: for an invalid argument, naming it.
    """
    arguments = dict(locals())
    check_choice(mlp_activation, "mlp_activation", MLP_ACTIVATIONS)
    check_register_count(num_register_tokens)
    if position_antialias is None:
        arguments["position_antialias"] = position_antialias = bool(num_register_tokens)
    check_layer_scale_init(layer_scale_init, "layer_scale_init")
    check_bool(include_top, "include_top")
    config = EncoderConfig.from_arguments(
        {**arguments, "pooling": "token", "representation_size": None, "initialization": "deit",
         "distillation": False}
    )
    init = config.init

    def make_block(index):
        return DINOv2Block(
            num_heads,
            mlp_dim,
            layer_scale_init=layer_scale_init,
            mlp_activation=mlp_activation,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=config.drop_path_rate_at(index),
            kernel_initializer=init["kernel"],
            mlp_bias_initializer=init["mlp_bias"],
            dtype=dtype,
            remat=remat,
            name=f"encoderblock_{index}",
        )

    extra_tokens = None
    if num_register_tokens:
        extra_tokens = RegisterTokens(num_register_tokens, dtype=dtype, name="register_tokens")
    # With registers, the class token's position is part of the token itself
    # (timm's `no_embed_class`), as the published files with registers have it.
    family = Family(make_block, token_position_embeddings=not num_register_tokens, extra_tokens=extra_tokens)
    return build_encoder_model(config, family)

"""ConViT: a ViT whose first blocks use gated positional self-attention (d'Ascoli et al. 2021)."""

from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_bool, check_non_negative_float
from keras_vit.models.common import patch_grid
from keras_vit.models.convit.layers import GPSABlock
from keras_vit.models.skeleton import EncoderConfig, Family, build_encoder_model


def ConViT(
    image_size=224,
    patch_size=16,
    num_channels=3,
    hidden_size=432,
    num_layers=12,
    num_heads=9,
    mlp_dim=1728,
    num_gpsa_layers=10,
    locality_strength=1.0,
    train_gating=True,
    train_gpsa_attention=True,
    num_classes=1000,
    include_top=True,
    pooling="token",
    representation_size=None,
    classifier_activation=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    preprocessing="imagenet",
    initialization="deit",
    distillation=False,
    dynamic_image_size=False,
    dynamic_padding=False,
    position_interpolation="bicubic",
    position_antialias=True,
    dtype=None,
    remat=False,
    weights=None,
    name="convit",
):
    """Builds a ConViT (ConViT Sec. 3, Fig. 4).

    The first `num_gpsa_layers` blocks use GPSA (Eq. 6-7) on the patch tokens,
    which carry position embeddings without a class slot; the class token is
    inserted after the last GPSA block and the remaining blocks are ordinary
    self-attention. The q/k/v projections have no bias, as in the reference.

    The ablations of ConViT Table 3 (and Fig. 8 and 12) are arguments, the
    table's columns: "Train gating" is `train_gating`, "Conv init" is
    `locality_strength > 0`, "GPSA" is `num_gpsa_layers > 0` and "Train
    attention" is `train_gpsa_attention`. Row (b) is `train_gating=False`,
    (c) `locality_strength=0`, (d) both, (e) `num_gpsa_layers=0`, (f)
    `train_gpsa_attention=False, locality_strength=0` (frozen at a random
    initialization) and (g) `train_gpsa_attention=False` (frozen at the
    convolutional one), the labels of the paper's text (Sec. 4): its table
    prints (f) and (g) the other way round, with the same accuracies for the
    same settings (73.7% frozen at random, 78.6% at the convolutional
    initialization).

    Args:
        image_size: int or tuple `(height, width)`; non-square works.
            Defaults to 224.
        patch_size: int or tuple. Defaults to 16.
        num_channels: int. Defaults to 3.
        hidden_size: int. Width D. Defaults to 432 (ConViT-S).
        num_layers: int. Defaults to 12.
        num_heads: int. With convolutional initialization a perfect square.
            Defaults to 9.
        mlp_dim: int. Defaults to 1728 (4 D).
        num_gpsa_layers: int. Number of leading GPSA blocks, in
            `[0, num_layers]` (`num_layers` needs `pooling="gap"`; Fig. 8
            varies it). `0` is Table 3 (e), a DeiT of the same size as the
            reference code builds it (`local_up_to_layer=0`): the class token
            joins before the first block, after the embedding dropout and
            without a position embedding of its own (a DeiT adds one to it,
            which reparametrizes the same learned vector), and the q/k/v
            projections have no bias (a DeiT's have one). Defaults to 10.
        locality_strength: float. `alpha` of the convolutional initialization
            (Eq. 5; Fig. 8 varies it). `0` switches that initialization off
            (Table 3 (c)): `W_val` and `v_pos` then start random like every
            other kernel, the reference's `use_local_init=False` (the
            reference's `locality_strength=0` alone would keep `W_val = I`
            and zero `v_pos`). Defaults to 1.
        train_gating: bool. `False` freezes the gating parameters of every
            GPSA block at `lambda_h = 0`, half of the attention on content and
            half on position (Table 3 (b), footnote 3): the gates become
            non-trainable weights. A checkpoint's learned gates would replace
            the zeros, so `weights` and `keras_vit.load_weights` refuse a
            known checkpoint for such a model before downloading it, and a
            checkpoint file whose gates are not 0 before assigning anything.
            Defaults to `True`.
        train_gpsa_attention: bool. `False` freezes all the attention weights
            of the GPSA blocks (`W_qry`, `W_key`, `W_val`, the output
            projection, `v_pos` and the gates) at their initialization, so
            that only the patch embedding, the position embeddings, the class
            token, the LayerNorms, the MLPs, the self-attention blocks and
            the head train (Table 3 (f) and (g)). The gates then stay at their
            initial `lambda_h = 1` (at 0 with `train_gating=False`). The
            weights keep their shapes and meaning, so a checkpoint loads:
            the attention is then frozen at the checkpoint's values instead
            of an initialization. Setting `model.trainable` afterwards (False
            for a frozen phase, then True) reaches these weights too and
            unfreezes them (the gates of `train_gating=False` stay frozen):
            to fine-tune such a model in phases, set `trainable` on the layers
            that should train. Defaults to `True`.
        num_classes: As in `VisionTransformer`.
        include_top: As in `VisionTransformer`.
        pooling: As in `VisionTransformer`.
        representation_size: As in `VisionTransformer`.
        classifier_activation: As in `VisionTransformer`.
        dropout_rate: As in `VisionTransformer`.
        attention_dropout_rate: As in `VisionTransformer`.
        drop_path_rate: As in `VisionTransformer`.
        dtype: As in `VisionTransformer`.
        remat: As in `VisionTransformer`.
        weights: As in `VisionTransformer`.
        name: As in `VisionTransformer`.
        preprocessing: Defaults to `"imagenet"` (mean/std, as DeiT and ConViT).
        initialization: `"deit"` (the reference's: truncated normal 0.02 for
            the linear kernels, the classifier, position embeddings and class
            token; zero biases) or `"vit"` (see `VisionTransformer`). The
            convolutional initialization of the GPSA position projections
            applies under both. Defaults to `"deit"`.
        distillation: bool. Add DeiT's distillation token, inserted with the
            class token after the last GPSA block, and a second head on it,
            as in `VisionTransformer` (ConViT SM B trains ConViTs so).
            Defaults to `False`.
        dynamic_image_size: As in `VisionTransformer`. The GPSA blocks then
            take the patch tokens as a grid and compute their relative
            positions `r_ij` (Eq. 5) for each call's grid; the position
            embeddings are resampled as in the ViT (timm's ConViT has no
            dynamic size: the default follows its ViT).
        dynamic_padding: As in `VisionTransformer`.
        position_interpolation: As in `VisionTransformer`.
        position_antialias: As in `VisionTransformer`.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images.
    """
    # Taken first, so that it holds exactly the arguments.
    config = EncoderConfig.from_arguments(locals())
    if (
        not isinstance(num_gpsa_layers, int)
        or isinstance(num_gpsa_layers, bool)
        or not 0 <= num_gpsa_layers <= num_layers
    ):
        raise ValueError(
            f"`num_gpsa_layers` must be an integer in [0, num_layers={num_layers}]. "
            f"Received: num_gpsa_layers={num_gpsa_layers!r}"
        )
    if pooling == "token" and num_gpsa_layers == num_layers:
        raise ValueError(
            "With `pooling='token'` the class token is inserted after the last GPSA "
            "block, so at least one block must follow it: use num_gpsa_layers < "
            f"num_layers or pooling='gap'. Received: num_gpsa_layers={num_gpsa_layers}, "
            f"num_layers={num_layers}"
        )
    # 0 disables the convolutional initialization.
    check_non_negative_float(locality_strength, "locality_strength")
    check_bool(train_gating, "train_gating")
    check_bool(train_gpsa_attention, "train_gpsa_attention")
    grid_size = patch_grid(config.image_size, config.patch_size, dynamic_padding)
    init = config.init

    def make_block(index):
        common = dict(
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=config.drop_path_rate_at(index),
            qkv_bias=False,
            kernel_initializer=init["kernel"],
            mlp_bias_initializer=init["mlp_bias"],
            dtype=dtype,
            remat=remat,
            name=f"encoderblock_{index}",
        )
        if index >= num_gpsa_layers:
            return TransformerBlock(num_heads, mlp_dim, **common)
        return GPSABlock(
            num_heads,
            mlp_dim,
            grid_size=grid_size,
            locality_strength=locality_strength,
            use_local_init=locality_strength > 0,
            train_gating=train_gating,
            train_gpsa_attention=train_gpsa_attention,
            **common,
        )

    family = Family(
        make_block,
        # The class token joins after the last GPSA block, without a position embedding.
        tokens_at=num_gpsa_layers,
        tokens_before_dropout=False,
        token_position_embeddings=False,
        # A dynamic grid reaches the GPSA blocks as a grid, which tells them its size.
        grid_blocks=num_gpsa_layers if dynamic_image_size else 0,
    )
    return build_encoder_model(config, family)

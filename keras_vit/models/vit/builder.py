"""The Vision Transformer and the hybrid ResNet+ViT (Dosovitskiy et al. 2021)."""

import keras

from keras_vit.layers.bit import ResNetStage, StandardizedConv2D
from keras_vit.layers.pooling import SeparableMaxPooling2D
from keras_vit.layers.transformer import TransformerBlock
from keras_vit.layers.validation import check_positive_int
from keras_vit.models.common import patch_grid
from keras_vit.models.skeleton import EncoderConfig, Family, build_encoder_model


def resnet_stride(resnet_stages):
    """Downsampling of the BiT ResNet: the root divides by 4, each stage after the first by 2."""
    return 2 ** (2 + max(len(resnet_stages) - 1, 0))


def resnet_feature_size(image_size, resnet_stages):
    """Spatial size of the BiT ResNet's output, `ceil(size / resnet_stride)`.

    Every stride-2 step has "same" padding, which rounds up, and rounding up
    at each halving is rounding up once.
    """
    stride = resnet_stride(resnet_stages)
    return tuple(int(-(-s // stride)) for s in image_size)


def check_resnet_args(resnet_stages, resnet_width):
    """Returns `resnet_stages` as a tuple (or None), after checking both arguments."""
    check_positive_int(resnet_width, "resnet_width")
    if resnet_stages is None:
        return None
    stages = tuple(resnet_stages) if isinstance(resnet_stages, (list, tuple)) else None
    if stages is None or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in stages):
        raise ValueError(
            "`resnet_stages` must be None (a pure ViT) or a tuple with the positive "
            "number of units of each ResNet stage, `()` for the root alone. "
            f"Received: resnet_stages={resnet_stages!r}"
        )
    return stages


def bit_resnet(x, resnet_stages, width, dtype):
    """The BiT ResNet backbone of the hybrids (ViT Sec. 3.1 "Hybrid Architecture", 4.1).

    The root is a standardized 7x7/2 convolution, GroupNorm, ReLU and a 3x3/2 max
    pool; stage `i` (from 0) has bottleneck width `64 * width * 2**i` and stride 2
    except the first. Layer names follow the reference (`conv_root`, `gn_root`,
    `block1`, ...), which the checkpoint converters rely on.
    """
    root_width = 64 * width
    x = StandardizedConv2D(
        root_width, 7, strides=2, padding="same", use_bias=False, dtype=dtype, name="conv_root"
    )(x)
    x = keras.layers.GroupNormalization(groups=32, epsilon=1e-6, dtype=dtype, name="gn_root")(x)
    x = keras.layers.ReLU(dtype=dtype, name="relu_root")(x)
    # The same pooling either way; with a static size its gradient avoids the
    # select-and-scatter that XLA:CPU runs slowly (SeparableMaxPooling2D).
    static = x.shape[1] is not None and x.shape[2] is not None
    pooling = SeparableMaxPooling2D if static else keras.layers.MaxPooling2D
    x = pooling(3, strides=2, padding="same", dtype=dtype, name="pool_root")(x)
    for index, num_units in enumerate(resnet_stages):
        x = ResNetStage(
            num_units,
            root_width * 2**index,
            strides=1 if index == 0 else 2,
            dtype=dtype,
            name=f"block{index + 1}",
        )(x)
    return x


def VisionTransformer(
    image_size=224,
    patch_size=16,
    num_channels=3,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    mlp_dim=3072,
    num_classes=1000,
    include_top=True,
    pooling="token",
    representation_size=None,
    classifier_activation=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    resnet_stages=None,
    resnet_width=1,
    preprocessing="inception",
    initialization="vit",
    distillation=False,
    dynamic_image_size=False,
    dynamic_padding=False,
    position_interpolation="bicubic",
    position_antialias=True,
    position_embedding="learned_1d",
    position_embedding_at="stem",
    dtype=None,
    remat=False,
    weights=None,
    name="vision_transformer",
):
    """Builds a Vision Transformer, optionally on a BiT ResNet (a hybrid).

    The image is cut into patches (for a hybrid: the ResNet feature map is),
    embedded with position embeddings and a class token (Eq. 1), passed through
    `num_layers` pre-norm transformer blocks (Eq. 2-3) and a final LayerNorm, and
    the class token (or the token average) goes to the head (Eq. 4).

    Args:
        image_size: int or tuple `(height, width)`. Input size; non-square works.
            Defaults to 224.
        patch_size: int or tuple. Patch size in pixels, or in feature-map cells
            for a hybrid. Defaults to 16.
        num_channels: int. Input channels (1 for grayscale). Defaults to 3.
        hidden_size: int. Width D. Defaults to 768.
        num_layers: int. Number of transformer blocks. Defaults to 12.
        num_heads: int. Attention heads; must divide `hidden_size`. Defaults to 12.
        mlp_dim: int. Hidden width of the MLPs. Defaults to 3072.
        num_classes: int. Classes of the head. Defaults to 1000.
        include_top: bool. If `False`, the model returns the pooled features
            (before pre-logits and head). Defaults to `True`.
        pooling: `"token"` (class token, Eq. 4) or `"gap"` (average of the patch
            tokens; no class token, as in the reference). Defaults to `"token"`.
        representation_size: int or None. Width of the pre-logits layer (Dense +
            tanh) used in pre-training; `None` for none. Defaults to `None`.
        classifier_activation: Activation of the head, e.g. `"softmax"`.
            Defaults to `None` (logits).
        dropout_rate: float. Dropout after the position embeddings and every
            dense layer but qkv (App. B.1). Defaults to 0.
        attention_dropout_rate: float. Dropout on attention. Defaults to 0.
        drop_path_rate: float. Stochastic depth, rising linearly from 0 in the
            first block to this value in the last. Defaults to 0.
        resnet_stages: None for a pure ViT, or a tuple with the number of units
            of each BiT ResNet stage, `()` for the root alone. Defaults to `None`.
        resnet_width: int. Width multiplier of the ResNet. Defaults to 1.
        preprocessing: `"inception"` ([0, 255] to [-1, 1]), `"imagenet"`
            (mean/std) or `None`. Defaults to `"inception"`.
        initialization: `"vit"` (the reference ViT's: LeCun-normal patch
            kernel, Xavier-uniform kernels, zero class token and classifier) or
            `"deit"` (DeiT's: truncated normal 0.02 for the linear kernels,
            classifiers, position embeddings and tokens, zero biases).
            Defaults to `"vit"`.
        distillation: bool. Add DeiT's distillation token after the class
            token, with its own position-embedding slot, and a second head
            `"head_dist"` on it (DeiT Sec. 5). The model then outputs the
            average of the two heads' logits (DeiT's inference), with
            `classifier_activation` applied to the average;
            `keras_vit.distillation_heads(model)` gives both logits for
            training. Needs `pooling="token"` and no `representation_size`.
            Without the top, the output is the average of the two tokens'
            features. Defaults to `False`.
        dynamic_image_size: bool. Take images of any height and width that the
            patches divide (the input shape is `(batch, None, None, channels)`),
            resampling the position embeddings to each call's patch grid with
            `position_interpolation` (timm's `dynamic_img_size`). The weight
            keeps the grid of `image_size`, so checkpoints load as for a
            fixed-size model, and at `image_size` the output is exactly the
            fixed-size model's. Defaults to `False`.
        dynamic_padding: bool. Pad images (for a hybrid: the ResNet's feature
            map) whose size the patch does not divide with zeros at the bottom
            and right, to the next multiple of the patch (timm's
            `dynamic_img_pad`; zeros after the preprocessing, as there). The
            position embeddings cover the padded grid. Defaults to `False`.
        position_interpolation: str. How `dynamic_image_size` resamples the
            position embeddings: `"bicubic"`, `"bilinear"` (PyTorch's
            `interpolate`, `align_corners=False`) or `"bilinear_scipy"` (the
            ViT authors' `scipy.ndimage.zoom(order=1)`); see
            `keras_vit.weights.position_embedding` for what each checkpoint
            family's code uses. Defaults to `"bicubic"`.
        position_antialias: bool. PyTorch's antialiased form of the
            interpolation. Defaults to `True`: with `"bicubic"`, what timm's
            `dynamic_img_size=True` computes.
        position_embedding: str. How the position is encoded, the rows of the
            ViT paper's Table 8 (App. D.3): `"learned_1d"` (one learned
            embedding per patch in raster order), `"learned_2d"` (an X and a Y
            table of `hidden_size / 2` each, concatenated by the patch's column
            and row; `hidden_size` even), `"relative"` (no absolute
            embeddings: every block's attention adds to its logits those of
            the queries against a learned embedding per raster offset
            `p_q - p_k`, see `keras_vit.layers.relative_attention`) or
            `"none"` (a bag of patches). The class and distillation tokens
            keep a learned slot of their own with the absolute embeddings,
            have none with `"none"`, and share one relative embedding with
            `"relative"`. Only the default fits the checkpoints (`weights`).
            Defaults to `"learned_1d"`.
        position_embedding_at: str. Where `"learned_1d"` and `"learned_2d"`
            embeddings are added, the columns of Table 8: `"stem"` (once,
            to the patch embeddings, Eq. 1), `"every_layer"` (a learned one
            at the input of every block) or `"every_layer_shared"` (one
            learned one added at the input of every block). Other values
            than `"stem"` need a fixed image size (no `dynamic_image_size`),
            as does `"relative"`. Defaults to `"stem"`.
        dtype: dtype policy name or `keras.DTypePolicy`, e.g. `"mixed_bfloat16"`.
            Defaults to the global policy.
        remat: bool. Recompute each transformer block in the backward pass
            instead of storing its activations: less memory for about a third
            more compute, so larger batches fit. Works with stochastic depth
            (`drop_path_rate`), not with `dropout_rate` or
            `attention_dropout_rate` above 0. Defaults to `False`.
        weights: str, path or None. A checkpoint file or a known checkpoint
            name to load (see `keras_vit.load_weights`). Defaults to `None`
            (random init).
        name: str. Model name.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images;
        a batch of another shape raises a `ValueError` naming `num_channels`
        or `image_size` (with `dynamic_image_size`: `patch_size`, for a size
        the patches do not divide).

    Raises:
        ValueError: for an invalid argument, naming it.
    """
    # Taken first, so that it holds exactly the arguments.
    config = EncoderConfig.from_arguments(locals())
    resnet_stages = check_resnet_args(resnet_stages, resnet_width)
    stem, feature_size, feature_stride = None, config.image_size, 1
    if resnet_stages is not None:
        feature_size = resnet_feature_size(config.image_size, resnet_stages)
        feature_stride = resnet_stride(resnet_stages)

        def stem(x):
            return bit_resnet(x, resnet_stages, resnet_width, dtype)

    init = config.init
    relative_positions = None
    if position_embedding == "relative":
        grid = patch_grid(feature_size, config.patch_size, dynamic_padding)
        relative_positions = grid[0] * grid[1]

    def make_block(index):
        return TransformerBlock(
            num_heads,
            mlp_dim,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            drop_path_rate=config.drop_path_rate_at(index),
            kernel_initializer=init["kernel"],
            mlp_bias_initializer=init["mlp_bias"],
            relative_positions=relative_positions,
            relative_position_initializer=init["position"] if relative_positions else None,
            dtype=dtype,
            remat=remat,
            name=f"encoderblock_{index}",
        )

    family = Family(make_block, stem=stem, feature_size=feature_size, feature_stride=feature_stride)
    return build_encoder_model(config, family)

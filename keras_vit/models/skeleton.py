"""The skeleton of the ViT-like families: stem, tokens, blocks, head.

ViT, the hybrid ResNet+ViT, DeiT and ConViT are one graph with different parts
plugged in (`docs/design.md` draws it):

    images -> shape check -> preprocessing -> [stem: BiT ResNet] -> Patches -> PatchEncoder
           -> embedding dropout -> blocks[:tokens_at] -> [class (, distillation) token]
           -> blocks[tokens_at:] -> encoder_norm                        (the backbone ends here)
           -> token or average pooling -> [pre-logits] -> head          (DeiT: two heads, averaged)

The learned position embeddings are added by `PatchEncoder` and the tokens
(`position_embedding_at="stem"`), or by a `TokenPositionEmbedding` before every
block (ViT App. D.3, Table 8; see `check_position_args`).

A family is a `Family`: the block it builds at each depth, where its class
token joins (ViT: before the first block, with a position embedding; ConViT:
after the last GPSA block, without) and an optional stem. `EncoderConfig`
holds, checked, the arguments every ViT-like builder shares.
"""

import dataclasses
from typing import Callable, Optional

import keras

from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.patching import PatchEncoder, Patches
from keras_vit.layers.position import GRID_LAYOUTS, TokenPositionEmbedding, check_grid_layout
from keras_vit.layers.tokens import ClassToken, DistillationToken
from keras_vit.layers.validation import check_remat_without_dropout
from keras_vit.models.common import (
    check_choice,
    check_common_args,
    check_dynamic_args,
    check_grid,
    check_model_args,
    classification_head,
    finish_model,
    image_input,
    initializers,
    patch_grid,
    pool,
    preprocess,
)
from keras_vit.models.distillation import check_distillation_args, distilled_top

# ViT App. D.3, Table 8: how position is encoded, and where the learned
# embeddings are added. The first of each is today's model (and the only one
# the checkpoints fit).
POSITION_EMBEDDINGS = ("learned_1d", "learned_2d", "relative", "none")
POSITION_EMBEDDING_PLACES = ("stem", "every_layer", "every_layer_shared")


def check_position_args(position_embedding, position_embedding_at, hidden_size, dynamic_image_size, weights):
    """Checks the position-embedding arguments of ViT App. D.3 (Table 8) together.

    Raises:
        ValueError: for a value outside `POSITION_EMBEDDINGS` or
            `POSITION_EMBEDDING_PLACES`; `position_embedding_at` other than
            `"stem"` with embeddings that are not learned absolute ones (the
            table's "N/A" cells); `"learned_2d"` with an odd `hidden_size`;
            `dynamic_image_size` with embeddings added inside the encoder or
            relative ones (their grid is fixed by `image_size`); or `weights`
            with anything but the defaults (no checkpoint has other
            position embeddings).
    """
    check_choice(position_embedding, "position_embedding", POSITION_EMBEDDINGS)
    check_choice(position_embedding_at, "position_embedding_at", POSITION_EMBEDDING_PLACES)
    if position_embedding_at != "stem" and position_embedding not in GRID_LAYOUTS:
        raise ValueError(
            f"`position_embedding_at` other than 'stem' places learned absolute embeddings, so it needs "
            f"position_embedding in {GRID_LAYOUTS}. Received: position_embedding_at={position_embedding_at!r}, "
            f"position_embedding={position_embedding!r}"
        )
    if position_embedding in GRID_LAYOUTS:
        check_grid_layout(position_embedding, hidden_size, name="position_embedding")
    if dynamic_image_size and (position_embedding == "relative" or position_embedding_at != "stem"):
        raise ValueError(
            "`dynamic_image_size=True` resamples the position embeddings of the stem to each image's patch "
            "grid; relative embeddings (1-D offsets in the raster order of a grid) and embeddings added at "
            "every block keep the grid of `image_size`. Build the model at the image size instead. Received: "
            f"position_embedding={position_embedding!r}, position_embedding_at={position_embedding_at!r}, "
            "dynamic_image_size=True"
        )
    if weights is not None and (position_embedding, position_embedding_at) != ("learned_1d", "stem"):
        raise ValueError(
            "The checkpoints have learned 1-D position embeddings at the stem, so `weights` needs "
            "position_embedding='learned_1d' and position_embedding_at='stem' (load a `.keras` file of "
            "another model with `keras.saving.load_model`). Received: "
            f"weights={weights!r}, position_embedding={position_embedding!r}, "
            f"position_embedding_at={position_embedding_at!r}"
        )


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The arguments every ViT-like builder shares, checked (see `VisionTransformer`)."""

    image_size: tuple
    patch_size: tuple
    num_channels: int
    hidden_size: int
    num_layers: int
    num_heads: int
    mlp_dim: int
    num_classes: int
    include_top: bool
    pooling: str
    representation_size: Optional[int]
    classifier_activation: object
    dropout_rate: float
    attention_dropout_rate: float
    drop_path_rate: float
    preprocessing: Optional[str]
    initialization: str
    distillation: bool
    dynamic_image_size: bool
    dynamic_padding: bool
    position_interpolation: str
    position_antialias: bool
    dtype: object
    remat: bool
    weights: object
    name: str
    # Last and with defaults: builders without them (ConViT) get today's model.
    position_embedding: str = "learned_1d"
    position_embedding_at: str = "stem"

    @classmethod
    def from_arguments(cls, arguments):
        """Checks and normalizes a builder's arguments.

        Args:
            arguments: dict holding (at least) every field without a
                default, e.g. a builder's `locals()` taken before it defines
                anything else.

        Returns:
            An `EncoderConfig` with `image_size` and `patch_size` as pairs.

        Raises:
            ValueError: for an invalid argument, naming it, before any layer
                is built.
        """
        values = {
            field.name: arguments[field.name] if field.default is dataclasses.MISSING
            else arguments.get(field.name, field.default)
            for field in dataclasses.fields(cls)
        }
        values["image_size"], values["patch_size"] = check_common_args(
            *(values[key] for key in (
                "image_size", "patch_size", "num_channels", "hidden_size", "num_layers", "num_heads",
                "mlp_dim", "pooling", "preprocessing", "dropout_rate", "attention_dropout_rate",
                "drop_path_rate",
            ))
        )
        check_model_args(
            *(values[key] for key in (
                "num_classes", "include_top", "representation_size", "classifier_activation", "dtype",
                "remat", "weights", "name",
            ))
        )
        check_remat_without_dropout(values["remat"], values["dropout_rate"], values["attention_dropout_rate"])
        initializers(values["initialization"])
        check_distillation_args(values["distillation"], values["pooling"], values["representation_size"])
        check_dynamic_args(
            values["dynamic_image_size"], values["dynamic_padding"], values["position_interpolation"],
            values["position_antialias"],
        )
        check_position_args(
            values["position_embedding"], values["position_embedding_at"], values["hidden_size"],
            values["dynamic_image_size"], values["weights"],
        )
        return cls(**values)

    @property
    def init(self):
        """The initializers of `initialization` (see `keras_vit.models.common.initializers`)."""
        return initializers(self.initialization)

    @property
    def stem_position_embedding(self):
        """Whether the learned absolute position embeddings are added once, by the stem."""
        return self.position_embedding in GRID_LAYOUTS and self.position_embedding_at == "stem"

    def drop_path_rate_at(self, index):
        """Stochastic depth of block `index`: linear from 0 in the first block to the rate in the last."""
        return self.drop_path_rate * index / max(self.num_layers - 1, 1)


@dataclasses.dataclass(frozen=True)
class Family:
    """What a ViT-like family plugs into the skeleton.

    Attributes:
        make_block: callable `index -> layer`, the transformer block at depth
            `index` (named `encoderblock_{index}`).
        tokens_at: int. The block before which the class (and distillation)
            token joins the patch tokens.
        tokens_before_dropout: bool. With `tokens_at=0`, whether the tokens
            join before the embedding dropout (ViT drops out `z_0` of Eq. 1,
            class token included) or after it, with the blocks (ConViT's
            reference inserts its class token inside the stack of blocks).
        token_position_embeddings: bool. Whether those tokens carry position
            embeddings of their own (ViT, DeiT) or not (ConViT).
        grid_blocks: int. How many leading blocks take the patch tokens as a
            `(batch, rows, cols, D)` grid instead of a sequence (ConViT's GPSA
            blocks with a dynamic image size, which read the grid's size); at
            most `tokens_at`, since the tokens join a sequence.
        stem: callable `x -> feature map` run on the preprocessed images
            before the patches are cut (the hybrid's BiT ResNet), or None.
        feature_size: tuple. The stem's output size at `image_size` (the
            image size without a stem).
        feature_stride: int. The stem's downsampling (1 without a stem).
        extra_tokens: callable `tokens -> tokens` that prepends tokens of the
            family's own before the class (and distillation) token joins, so
            that they sit between it and the patches (DINOv2's registers,
            Darcet et al. 2024), or None.
    """

    make_block: Callable
    tokens_at: int = 0
    tokens_before_dropout: bool = True
    token_position_embeddings: bool = True
    grid_blocks: int = 0
    stem: Optional[Callable] = None
    feature_size: Optional[tuple] = None
    feature_stride: int = 1
    extra_tokens: Optional[Callable] = None

    def __post_init__(self):
        if self.grid_blocks > self.tokens_at:
            raise ValueError(
                "The prefix tokens join a token sequence, so the blocks that take a grid must "
                f"come before them. Received: grid_blocks={self.grid_blocks}, tokens_at={self.tokens_at}"
            )


def build_encoder_model(config, family):
    """Builds a ViT-like `keras.Model` from the shared arguments and a family's parts.

    Args:
        config: `EncoderConfig`.
        family: `Family`.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images.
    """
    init = config.init
    feature_size = family.feature_size or config.image_size
    check_grid(feature_size, config.patch_size, config.image_size, config.dynamic_padding)
    dtype = config.dtype

    # Stem.
    images, x = image_input(
        config.image_size, config.num_channels, dtype, config.patch_size, config.dynamic_image_size,
        config.dynamic_padding, family.feature_stride,
    )
    x = preprocess(x, config.preprocessing, config.num_channels, dtype)
    if family.stem is not None:
        x = family.stem(x)
    x = Patches(config.patch_size, dynamic_padding=config.dynamic_padding, dtype=dtype, name="patches")(x)
    grid_size = patch_grid(feature_size, config.patch_size, config.dynamic_padding)
    x = PatchEncoder(
        config.hidden_size,
        **_stem_position_arguments(config),
        kernel_initializer=init["patch_kernel"],
        position_initializer=init["position"],
        grid_size=grid_size,
        dynamic_grid=config.dynamic_image_size,
        interpolation=config.position_interpolation,
        antialias=config.position_antialias,
        flatten=family.grid_blocks == 0,
        dtype=dtype,
        name="patch_encoder",
    )(x)
    # Tokens and blocks (see `Family.tokens_before_dropout`).
    early = family.tokens_at == 0 and family.tokens_before_dropout
    if early:
        x = _prefix_tokens(x, config, family, init)
    x = keras.layers.Dropout(config.dropout_rate, dtype=dtype, name="embedding_dropout")(x)
    block_position = _block_position_embeddings(config, grid_size, init)
    for index in range(config.num_layers):
        if index == family.tokens_at and not early:
            x = _prefix_tokens(x, config, family, init)
        if block_position is not None:
            x = block_position(index, x)
        x = family.make_block(index)(x)
        if family.grid_blocks and index == family.grid_blocks - 1:
            x = keras.layers.Reshape((-1, config.hidden_size), dtype=dtype, name="flatten_grid")(x)
    x = LayerNormalization(epsilon=1e-6, dtype=dtype, name="encoder_norm")(x)

    # Head.
    if config.distillation:
        x = distilled_top(x, config.include_top, config.num_classes, config.classifier_activation, dtype,
                          init["head_kernel"])
    else:
        x = pool(x, config.pooling, dtype)
        if config.include_top:
            x = classification_head(x, config.num_classes, config.representation_size,
                                    config.classifier_activation, dtype, init["head_kernel"])
    return finish_model(images, x, config.name, config.weights)


def _prefix_tokens(x, config, family, init):
    """The class token (with `pooling="token"`), DeiT's distillation token and the family's extra tokens."""
    if family.extra_tokens is not None:
        x = family.extra_tokens(x)
    if config.pooling != "token":
        return x
    if family.token_position_embeddings and config.stem_position_embedding:
        position = dict(position_initializer=init["position"])
    else:
        position = dict(use_position_embedding=False)
    x = ClassToken(initializer=init["class_token"], **position, dtype=config.dtype, name="class_token")(x)
    if config.distillation:
        x = DistillationToken(**position, dtype=config.dtype, name="distillation_token")(x)
    return x


def _stem_position_arguments(config):
    """`PatchEncoder`'s position arguments: today's exactly unless the embeddings go elsewhere."""
    if config.stem_position_embedding:
        if config.position_embedding == "learned_1d":
            return {}
        return dict(position_layout=config.position_embedding)
    return dict(use_position_embedding=False)


def _block_position_embeddings(config, grid_size, init):
    """`(index, tokens) -> tokens` adding the position embeddings at block `index`'s input, or None.

    ViT App. D.3: "every_layer" learns one `TokenPositionEmbedding` per block,
    "every_layer_shared" calls one before every block. The prefix tokens present
    at a block (class, distillation) each get a learned slot of their own, as
    at the stem.
    """
    if config.position_embedding not in GRID_LAYOUTS or config.position_embedding_at == "stem":
        return None
    shared = config.position_embedding_at == "every_layer_shared"
    layers = {}

    def add(index, x):
        key = "shared" if shared else index
        if key not in layers:
            layers[key] = TokenPositionEmbedding(
                grid_size,
                num_prefix_tokens=x.shape[1] - grid_size[0] * grid_size[1],
                layout=config.position_embedding,
                initializer=init["position"],
                dtype=config.dtype,
                name="position_embedding" if shared else f"position_embedding_{index}",
            )
        return layers[key](x)

    return add

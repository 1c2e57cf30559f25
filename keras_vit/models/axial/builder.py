"""Axial-ViT (Dosovitskiy et al. 2021, App. D.5): ViT with row and column attention.

"We have modified ViT to process inputs in the 2-dimensional shape, instead of
a 1-dimensional sequence of patches, and incorporate Axial Transformer blocks,
in which instead of a self-attention followed by an MLP, we have a
row-self-attention plus an MLP followed by a column-self-attention plus an
MLP." The paper's Fig. 12 compares Axial-ViT-B/32 and B/16 with ViT-B: better
5-shot accuracy, at more compute (the extra MLP of every block;
`keras_vit.analysis.flops` counts it).

The appendix leaves two things open, settled here:

- **No class token.** A class token has no row or column, so no axial block
  could attend to it or from it; the head averages the patch tokens after the
  final norm (`pooling="gap"`, the only pooling accepted), as AxialResNet (the
  appendix's other axial model) pools.
- **Position embeddings at the stem**, as ViT's Eq. 1: a learned embedding per
  patch (`"learned_1d"`, one per grid cell) or ViT App. D.3's X and Y tables
  (`"learned_2d"`), added to the patch embeddings before the first block. The
  attention inside a row or a column is blind to order, so without them
  (`"none"`) the model only knows which tokens share a line.

No checkpoint was published: `weights` must be None.
"""

from keras_vit.models.axial.layers import AxialTransformerBlock
from keras_vit.models.axial.sizes import NO_CHECKPOINTS
from keras_vit.models.skeleton import EncoderConfig, Family, build_encoder_model

# Those of `VisionTransformer` that need a class token or 1-D raster offsets are left out.
AXIAL_POOLINGS = ("gap",)
AXIAL_POSITION_EMBEDDINGS = ("learned_1d", "learned_2d", "none")


def check_axial_args(pooling, position_embedding, weights):
    """Checks the arguments whose `VisionTransformer` values Axial-ViT cannot take.

    Raises:
        ValueError: for `weights` other than None (no checkpoint exists),
            `pooling` other than `"gap"` (no class token) or
            `position_embedding` outside `AXIAL_POSITION_EMBEDDINGS`.
    """
    if weights is not None:
        raise ValueError(
            f"{NO_CHECKPOINTS}, so `weights` must be "
            "None: train the model, or load weights you saved with `model.load_weights` or a `.keras` file "
            f"with `keras.saving.load_model`. Received: weights={weights!r}"
        )
    if pooling not in AXIAL_POOLINGS:
        raise ValueError(
            f"`pooling` must be one of {AXIAL_POOLINGS} for Axial-ViT: a class token has no row or column "
            f"for the axial blocks to attend along, so the head averages the patch tokens. "
            f"Received: pooling={pooling!r}"
        )
    if position_embedding not in AXIAL_POSITION_EMBEDDINGS:
        raise ValueError(
            f"`position_embedding` must be one of {AXIAL_POSITION_EMBEDDINGS} for Axial-ViT (ViT's "
            "'relative' embeddings are offsets in the raster order of a token sequence, which the axial "
            f"blocks do not attend over). Received: position_embedding={position_embedding!r}"
        )


def AxialViT(
    image_size=224,
    patch_size=16,
    num_channels=3,
    hidden_size=768,
    num_layers=12,
    num_heads=12,
    mlp_dim=3072,
    num_classes=1000,
    include_top=True,
    pooling="gap",
    representation_size=None,
    classifier_activation=None,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.0,
    preprocessing="inception",
    initialization="vit",
    dynamic_image_size=False,
    dynamic_padding=False,
    position_interpolation="bicubic",
    position_antialias=True,
    position_embedding="learned_1d",
    dtype=None,
    remat=False,
    weights=None,
    name="axial_vit",
):
    """Builds an Axial-ViT (ViT App. D.5).

    The image is cut into patches and embedded with position embeddings as in
    ViT (Eq. 1), but the tokens stay a `(rows, cols)` grid. Each of the
    `num_layers` ViT blocks becomes two pre-norm blocks (`AxialTransformerBlock`),
    `encoderblock_{i}_row` (row self-attention + MLP) then
    `encoderblock_{i}_column` (column self-attention + MLP); after the last,
    the grid is flattened to `rows * cols` tokens, normalized
    (`encoder_norm`) and averaged for the head.

    Args:
        image_size: int or tuple `(height, width)`. Non-square works (a grid
            of unequal rows and columns). Defaults to 224.
        patch_size: int or tuple. Patch size in pixels. Defaults to 16.
        num_channels: int. Input channels. Defaults to 3.
        hidden_size: int. Width D. Defaults to 768.
        num_layers: int. Number of ViT blocks replaced: the model has
            `2 * num_layers` axial blocks. Defaults to 12.
        num_heads: int. Attention heads of every axial attention; must divide
            `hidden_size`. Defaults to 12.
        mlp_dim: int. Hidden width of every block's MLP. Defaults to 3072.
        num_classes: As in `VisionTransformer`.
        include_top: As in `VisionTransformer`.
        representation_size: As in `VisionTransformer`.
        classifier_activation: As in `VisionTransformer`.
        dropout_rate: As in `VisionTransformer`.
        attention_dropout_rate: As in `VisionTransformer`.
        preprocessing: As in `VisionTransformer`.
        initialization: As in `VisionTransformer`.
        dynamic_image_size: As in `VisionTransformer`; the axial blocks then
            attend along each call's rows and columns, of any length.
        dynamic_padding: As in `VisionTransformer`.
        position_interpolation: As in `VisionTransformer`.
        position_antialias: As in `VisionTransformer`.
        dtype: As in `VisionTransformer`.
        remat: As in `VisionTransformer`.
        name: As in `VisionTransformer`.
        pooling: str. `"gap"`, the only value: the average of the patch
            tokens (no class token; see the module docstring). Taken so that
            code passing ViT's arguments passes it. Defaults to `"gap"`.
        drop_path_rate: float. Stochastic depth, rising linearly from 0 in the
            first axial block to this value in the last (of `2 * num_layers`).
            Defaults to 0.
        position_embedding: str. `"learned_1d"` (one learned embedding per
            patch), `"learned_2d"` (an X and a Y table of `hidden_size / 2`,
            concatenated by the patch's column and row; `hidden_size` even) or
            `"none"`, added once at the stem. Defaults to `"learned_1d"`.
        weights: None. Axial-ViT has no published checkpoint; any other value
            raises a `ValueError`.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images.

    Raises:
        ValueError: for an invalid argument, naming it.
    """
    # Taken first, so that it holds exactly the arguments.
    arguments = dict(locals())
    check_axial_args(pooling, position_embedding, weights)
    config = EncoderConfig.from_arguments(dict(arguments, distillation=False))
    init = config.init
    num_blocks = 2 * num_layers

    def axial_block(position, axis, name):
        return AxialTransformerBlock(
            num_heads,
            mlp_dim,
            axis=axis,
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            # Linear over all 2L residual blocks, as over ViT's L.
            drop_path_rate=drop_path_rate * position / max(num_blocks - 1, 1),
            kernel_initializer=init["kernel"],
            mlp_bias_initializer=init["mlp_bias"],
            dtype=dtype,
            remat=remat,
            name=name,
        )

    def make_block(index):
        row = axial_block(2 * index, "row", f"encoderblock_{index}_row")
        column = axial_block(2 * index + 1, "column", f"encoderblock_{index}_column")
        return lambda grid: column(row(grid))

    # Every block takes the grid; with no class token, `tokens_at` past the last block adds none.
    family = Family(make_block, tokens_at=num_layers, grid_blocks=num_layers)
    return build_encoder_model(config, family)


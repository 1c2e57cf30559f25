"""The Swin Transformer (Liu et al. 2021): a hierarchical ViT with shifted windows.

The graph keeps channels-last feature maps `(batch, H, W, C)` from the patch
embedding to the final norm (Swin Sec. 3.1, Fig. 3), so every stage's
resolution is static and the blocks fix their windows, masks and indices in
`build()` (see `keras_vit.models.swin.layers`).

Layer names and timm 1.0.31's `SwinTransformer` keys (`keras_vit.models.swin.checkpoints.timm_key_map`
lists every weight with its transform; stages `i` and blocks `j` count from 0 in both):

- `patch_embed/proj`, `patch_embed/norm` -> `patch_embed.proj`, `patch_embed.norm`
- `stage_{i}_downsample/norm`, `/reduction` (i >= 1; the merging opens stage i)
  -> `layers.{i}.downsample.norm`, `layers.{i}.downsample.reduction`
- `stage_{i}_block_{j}/norm1`, `/norm2` -> `layers.{i}.blocks.{j}.norm1`, `.norm2`
- `stage_{i}_block_{j}/attention/qkv`, `/attention/out`,
  `/attention/relative_position_bias_table` -> `layers.{i}.blocks.{j}.attn.qkv`,
  `.attn.proj`, `.attn.relative_position_bias_table`
- `stage_{i}_block_{j}/mlp/fc1`, `/mlp/fc2` -> `layers.{i}.blocks.{j}.mlp.fc1`, `.mlp.fc2`
- `norm` -> `norm`; `head` -> `head.fc`
- `absolute_position_embedding` -> none in timm 1.0.31; Microsoft's
  `absolute_pos_embed` (`ape=True`), shaped `(1, H * W, C)` there.

The ablations of Table 4 change the weights: `position_embedding="none"` or
`"absolute"` drops every `relative_position_bias_table`, and
`"relative_without_content"` replaces each `attention/qkv` by an
`attention/value` projection of a third of its width (no queries or keys), which
no checkpoint holds. `shifted_windows=False` changes no weight.

timm's relative position indices and attention masks are buffers, not weights;
here they are constants of the blocks. Microsoft's original checkpoints put the
merging at the end of stage `i - 1` (`layers.{i-1}.downsample`) and name the
blocks as timm does.
"""

import keras

from keras_vit.models.swin.sizes import swin_absolute_embedding
from keras_vit.layers.normalization import LayerNormalization
from keras_vit.layers.position import AbsolutePositionEmbedding
from keras_vit.models.swin.layers import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock
from keras_vit.layers.validation import (
    check_bool,
    check_positive_int,
    check_remat_without_dropout,
    to_pair,
)
from keras_vit.models.swin.window_attention import _swin_initializer
from keras_vit.models.common import (
    PREPROCESSINGS,
    check_choice,
    check_model_args,
    check_rates,
    classification_head,
    finish_model,
    image_input,
    preprocess,
)

SWIN_POOLINGS = ("avg", None)

# The position terms of Swin Table 4, in the table's order; "relative" (Eq. 4's
# bias beside the content term) is Swin's own. "absolute" is ViT's learned
# embedding added after the patch embedding (the reference's `ape`), and
# "relative_without_content" drops the content ("app.") term q k^T / sqrt(d)
# from the logits, leaving softmax(B [+ mask]).
SWIN_POSITION_EMBEDDINGS = ("none", "absolute", "absolute+relative", "relative_without_content", "relative")


def check_stage_sizes(depths, num_heads, embed_dim):
    """Returns `depths` and `num_heads` as tuples, after checking them against `embed_dim`.

    Stage `i` has width `embed_dim * 2**i`, which its number of heads must divide.
    """

    def positive_ints(value, name):
        ok = isinstance(value, (list, tuple)) and len(value) > 0 and all(
            isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value
        )
        if not ok:
            raise ValueError(
                f"`{name}` must be a non-empty tuple of positive integers, one per stage. "
                f"Received: {name}={value!r}"
            )
        return tuple(value)

    check_positive_int(embed_dim, "embed_dim")
    depths = positive_ints(depths, "depths")
    num_heads = positive_ints(num_heads, "num_heads")
    if len(depths) != len(num_heads):
        raise ValueError(
            "`depths` and `num_heads` must have one entry per stage each. "
            f"Received: depths={depths}, num_heads={num_heads}"
        )
    for index, heads in enumerate(num_heads):
        width = embed_dim * 2**index
        if width % heads:
            raise ValueError(
                f"The width of stage {index}, embed_dim * 2**{index} = {width}, must be "
                f"divisible by its `num_heads`. Received: embed_dim={embed_dim}, "
                f"num_heads={num_heads}"
            )
    return depths, num_heads


def position_terms(position_embedding, absolute_position_embedding=False):
    """Which position terms a Swin model has, for its `position_embedding` (Swin Table 4).

    Args:
        position_embedding: str. One of `SWIN_POSITION_EMBEDDINGS`.
        absolute_position_embedding: bool. The builder's older switch for the
            absolute embedding, added to what `position_embedding` selects.

    Returns:
        A dict of three bools: `absolute` (a learned embedding after the patch
        embedding), `relative_bias` (`B` in every window attention) and
        `content` (`q k^T / sqrt(d)` in every window attention).

    Raises:
        ValueError: for an unknown `position_embedding`, a non-bool
            `absolute_position_embedding`, or `absolute_position_embedding=True`
            with `position_embedding="none"`.
    """
    check_choice(position_embedding, "position_embedding", SWIN_POSITION_EMBEDDINGS)
    check_bool(absolute_position_embedding, "absolute_position_embedding")
    if absolute_position_embedding and position_embedding == "none":
        raise ValueError(
            "`absolute_position_embedding=True` adds a position embedding, which "
            "`position_embedding='none'` rules out; use position_embedding='absolute'. "
            f"Received: absolute_position_embedding=True, position_embedding={position_embedding!r}"
        )
    return {
        "absolute": swin_absolute_embedding(position_embedding, absolute_position_embedding),
        "relative_bias": position_embedding in ("absolute+relative", "relative_without_content", "relative"),
        "content": position_embedding != "relative_without_content",
    }


def _check_swin_args(
    image_size, patch_size, num_channels, window_size, mlp_ratio, qkv_bias,
    rates, pooling, include_top, preprocessing, remat,
):
    received = f"image_size={image_size!r}, patch_size={patch_size!r}"
    image_size = to_pair(image_size, "image_size")
    patch_size = to_pair(patch_size, "patch_size")
    # Smaller images are padded up to a patch, but the embedding's convolution is
    # built for the unpadded size and refuses a kernel larger than the image.
    if any(side < patch for side, patch in zip(image_size, patch_size)):
        raise ValueError(
            "`image_size` must be at least `patch_size` on each side (one patch). "
            f"Received: {received}"
        )
    window_size = to_pair(window_size, "window_size")
    check_positive_int(num_channels, "num_channels")
    if isinstance(mlp_ratio, bool) or not isinstance(mlp_ratio, (int, float)) or mlp_ratio <= 0:
        raise ValueError(f"`mlp_ratio` must be a positive number. Received: mlp_ratio={mlp_ratio!r}")
    check_bool(qkv_bias, "qkv_bias")
    check_rates(**rates)
    check_choice(pooling, "pooling", SWIN_POOLINGS)
    if pooling is None and include_top:
        raise ValueError(
            "`pooling=None` (the final feature map as output) needs `include_top=False`. "
            f"Received: pooling={pooling!r}, include_top={include_top!r}"
        )
    check_choice(preprocessing, "preprocessing", PREPROCESSINGS)
    check_remat_without_dropout(remat, rates["dropout_rate"], rates["attention_dropout_rate"])
    return image_size, patch_size, window_size


def SwinTransformer(
    image_size=224,
    patch_size=4,
    num_channels=3,
    embed_dim=96,
    depths=(2, 2, 6, 2),
    num_heads=(3, 6, 12, 24),
    window_size=7,
    mlp_ratio=4.0,
    qkv_bias=True,
    absolute_position_embedding=False,
    shifted_windows=True,
    position_embedding="relative",
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    drop_path_rate=0.1,
    num_classes=1000,
    include_top=True,
    pooling="avg",
    classifier_activation=None,
    preprocessing="imagenet",
    dtype=None,
    remat=False,
    return_stages=False,
    weights=None,
    name="swin_transformer",
):
    """Builds a Swin Transformer (Liu et al. 2021, Sec. 3, Fig. 3).

    Patch partition and linear embedding (with LayerNorm), an optional absolute
    position embedding, then `len(depths)` stages of Swin blocks; every second
    block of a stage shifts its windows by `window_size // 2` (Sec. 3.2), and a
    patch merging halves the resolution and doubles the width before every
    stage but the first. A final LayerNorm, global average pooling and a linear
    head follow (Sec. 3.3). Any image size of at least one patch works: the
    patch embedding, the blocks and the merging pad at the bottom/right as needed.
    `shifted_windows` and `position_embedding` build the variants of the
    paper's ablation (Table 4); their defaults build Swin itself.

    Args:
        image_size: int or tuple `(height, width)`. Input size; non-square
            works. Defaults to 224.
        patch_size: int or tuple. Patch size in pixels. Defaults to 4.
        num_channels: int. Input channels. Defaults to 3.
        embed_dim: int. `C`, the width of the first stage; stage `i` has
            `C * 2**i`. Defaults to 96 (Swin-T).
        depths: tuple of ints. Blocks per stage. Defaults to `(2, 2, 6, 2)`.
        num_heads: tuple of ints. Heads per stage; each must divide its stage's
            width. Defaults to `(3, 6, 12, 24)`.
        window_size: int or tuple. `M`, the attention window. Defaults to 7.
        mlp_ratio: float. MLP hidden width over the block width. Defaults to 4.
        qkv_bias: bool. Bias of the qkv projections. Defaults to `True`.
        absolute_position_embedding: bool. Add a learned `(H/P, W/P, C)`
            embedding after the patch embedding (the reference's `ape`), on
            top of what `position_embedding` selects: with the default
            `"relative"` this is `"absolute+relative"`. Not with
            `position_embedding="none"`. Defaults to `False`.
        shifted_windows: bool. Shift the windows of every second block by
            `window_size // 2` (SW-MSA, Sec. 3.2). `False` is Table 4's "w/o
            shifting": every block partitions the map into the same regular
            windows, with no cyclic shift and no mask, so no information
            crosses a window border within a stage. Defaults to `True`.
        position_embedding: str. The position terms (Table 4): `"none"`;
            `"absolute"`, ViT's learned absolute embedding added after the
            patch embedding (truncated normal, std 0.02, then the embedding
            dropout, as the reference's `ape`; a checkpoint's is resampled
            bicubically to another image size), with no relative bias;
            `"absolute+relative"`, both; `"relative_without_content"`, the
            relative position bias alone, the attention being
            `SoftMax(B [+ mask]) V` without the content ("app.") term
            `Q K^T / sqrt(d)`, and so without query and key projections; or
            `"relative"`, Swin's `SoftMax(Q K^T / sqrt(d) + B) V` (Eq. 4).
            Defaults to `"relative"`.
        dropout_rate: float. Dropout after the embedding, the attention
            projections and the MLP layers. Defaults to 0.
        attention_dropout_rate: float. Dropout on attention. Defaults to 0.
        drop_path_rate: float. Stochastic depth, rising linearly over all blocks
            from 0 to this value. Defaults to 0.1 (Swin-T's).
        num_classes: int. Classes of the head. Defaults to 1000.
        include_top: bool. If `False`, the model returns the pooled features
            (or, with `pooling=None`, the final feature map). Defaults to `True`.
        pooling: `"avg"` (global average) or `None` (no pooling; only with
            `include_top=False`). Defaults to `"avg"`.
        classifier_activation: Activation of the head, e.g. `"softmax"`.
            Defaults to `None` (logits).
        preprocessing: `"imagenet"` (mean/std, the reference's), `"inception"`
            or `None`. Defaults to `"imagenet"`.
        dtype: dtype policy name or `keras.DTypePolicy`. Defaults to the
            global policy.
        remat: bool. Recompute each block in the backward pass instead of
            storing its activations (`SwinTransformerBlock(remat=True)`): less memory
            for about a third more compute. Not with `dropout_rate` or
            `attention_dropout_rate` above 0. Defaults to `False`.
        return_stages: bool. Return the feature map of every stage, as a
            backbone for dense prediction (Swin Sec. 4.2-4.3), instead of
            pooled features or logits; needs `include_top=False`, and
            `pooling` does not apply. Defaults to `False`.
        weights: str, path or None. A checkpoint to load (see
            `keras_vit.load_weights`). Defaults to `None` (random init).
        name: str. Model name.

    Returns:
        A `keras.Model` taking `(batch, height, width, num_channels)` images.
        With `return_stages=True` its output is a dict `{"stage_0": ...,
        "stage_{n-1}": ...}` of channels-last maps, stage `i` of shape
        `(batch, ceil(H / (P * 2**i)), ceil(W / (P * 2**i)), embed_dim * 2**i)`
        (strides 4, 8, 16, 32 for Swin's four stages; odd sizes round up, as the
        patch merging pads). The last stage passes through the final `norm`,
        the others are the raw outputs of their last block: timm's
        `forward_intermediates(norm=True)`. Microsoft's detection backbone adds
        a fresh LayerNorm on every output (`norm{i}` for `out_indices`); those
        have no pretrained values, so they are left to the detection neck and
        every weight of this backbone is in the ImageNet checkpoints
        (`keras_vit.models.swin.checkpoints.timm_key_map(depths, include_top=False)`).

    Raises:
        ValueError: for an invalid argument, naming it.
    """
    depths, num_heads = check_stage_sizes(depths, num_heads, embed_dim)
    image_size, patch_size, window_size = _check_swin_args(
        image_size, patch_size, num_channels, window_size, mlp_ratio, qkv_bias,
        dict(dropout_rate=dropout_rate, attention_dropout_rate=attention_dropout_rate,
             drop_path_rate=drop_path_rate),
        pooling, include_top, preprocessing, remat,
    )
    check_model_args(num_classes, include_top, None, classifier_activation, dtype, remat, weights, name)
    check_bool(shifted_windows, "shifted_windows")
    terms = position_terms(position_embedding, absolute_position_embedding)
    check_bool(return_stages, "return_stages")
    if return_stages and include_top:
        raise ValueError(
            "`return_stages=True` returns the stages' feature maps and needs "
            f"`include_top=False`. Received: return_stages=True, include_top={include_top!r}"
        )

    images, x = image_input(image_size, num_channels, dtype)
    x = preprocess(x, preprocessing, num_channels, dtype)
    x = SwinPatchEmbedding(embed_dim, patch_size, dtype=dtype, name="patch_embed")(x)
    if terms["absolute"]:
        x = AbsolutePositionEmbedding(dtype=dtype, name="absolute_position_embedding")(x)
    x = keras.layers.Dropout(dropout_rate, dtype=dtype, name="embedding_dropout")(x)
    total_blocks, block_index = sum(depths), 0
    stage_outputs = {}
    shift = tuple(w // 2 for w in window_size) if shifted_windows else 0
    for stage, (depth, heads) in enumerate(zip(depths, num_heads)):
        if stage > 0:
            x = PatchMerging(dtype=dtype, name=f"stage_{stage}_downsample")(x)
        for index in range(depth):
            # torch.linspace(0, drop_path_rate, total_blocks), as the reference.
            rate = drop_path_rate * block_index / max(total_blocks - 1, 1)
            x = SwinTransformerBlock(
                heads,
                window_size,
                shift_size=shift if index % 2 else 0,
                mlp_ratio=mlp_ratio,
                qkv_bias=qkv_bias,
                dropout_rate=dropout_rate,
                attention_dropout_rate=attention_dropout_rate,
                drop_path_rate=rate,
                remat=remat,
                use_relative_position_bias=terms["relative_bias"],
                use_content_term=terms["content"],
                dtype=dtype,
                name=f"stage_{stage}_block_{index}",
            )(x)
            block_index += 1
        stage_outputs[f"stage_{stage}"] = x
    x = LayerNormalization(epsilon=1e-5, dtype=dtype, name="norm")(x)
    if return_stages:
        stage_outputs[f"stage_{len(depths) - 1}"] = x
        return finish_model(images, stage_outputs, name, weights)
    if pooling == "avg":
        x = keras.layers.GlobalAveragePooling2D(dtype=dtype, name="avg_pool")(x)
    if include_top:
        # The reference's trunc-normal(0.02) classifier with zero bias, not ViT's zero kernel.
        x = classification_head(x, num_classes, None, classifier_activation, dtype, _swin_initializer())
    return finish_model(images, x, name, weights)

"""Attention probabilities, attention rollout, attention distance and nonlocality.

All functions work on any keras_vit model (ViT, hybrid, ConViT) and any backend:
the model's layers are applied one after the other, with every transformer block
asked for its attention probabilities (the explicit attention path). For Swin
models, `attention_maps`, `nonlocality` and `mean_attention_distance` work per
window (with `window_grids` in place of the patch grid) and
`window_attention_to_grid` lays the windows back onto the feature map; rollout
has no single token grid to run on there. For Axial-ViT (ViT App. D.5),
`attention_maps` gives each row or column block's attention within its lines
and `nonlocality` and `mean_attention_distance` measure it along them; rollout,
which multiplies attention over the whole token sequence, refuses it.
"""

import numpy as np
from keras import ops

from keras_vit import inspection
from keras_vit.inspection import has_class_token


def grid_size(model):
    """(rows, cols) of the model's patch grid.

    Raises:
        ValueError: for a model without one token grid (a Swin model: see
            `window_grids`).
    """
    return inspection.patch_encoder(model).grid_size


def attention_grid(model):
    """What `nonlocality` takes as `grid` for `model`'s attention maps, and the pixels one patch spans.

    A ViT-like model's patch grid `(rows, cols)`; a registered family's own
    answer where its blocks attend on other grids (`FamilySpec.attention_grid`:
    Swin's one `WindowGrid` per block).

    Returns:
        `(grid, patch_pixels)`: `nonlocality(maps, grid) * patch_pixels` is
        the mean attention distance in pixels.

    Raises:
        ValueError: for a model without a patch grid of either kind, naming it.
    """
    spec = inspection.registered_family(model)
    if spec is not None and spec.attention_grid is not None:
        return spec.attention_grid(model)
    grid = grid_size(model)
    return grid, model.input_shape[1] / grid[0]


def attention_gates(model):
    """The gates of every block whose attention has them (ConViT's GPSA, Fig. 6), in order.

    Each block answers for itself (`attention_gates()`, None for a block
    without gates).

    Returns:
        Array `(gated_blocks, heads)`.

    Raises:
        ValueError: for a model none of whose blocks has gates, naming it.
    """
    gates = [block.attention_gates() for block in inspection.blocks(model)]
    gates = [gate for gate in gates if gate is not None]
    if not gates:
        raise ValueError(f"`model` has no block with attention gates. Received: model={model.name!r}")
    return np.stack(gates)


def attention_maps(model, images):
    """Attention probabilities of every block.

    Args:
        model: A keras_vit model.
        images: array `(batch, height, width, channels)` as the model takes it.

    Returns:
        List with one numpy array per block. ViT, hybrid and ConViT blocks:
        `(batch, heads, tokens, tokens)`; blocks after a class token see it as
        token 0, ConViT's GPSA blocks (before the class token is inserted) see
        patch tokens only. Swin blocks: `(batch, windows, heads, Mh * Mw,
        Mh * Mw)`, the windows row-major over the block's padded map after its
        cyclic shift (Swin Sec. 3.2), the tokens row-major within a window;
        `window_grids(model)` says where they lie and `window_attention_to_grid`
        puts them there. Axial-ViT blocks (a row block, then a column block,
        per ViT block): `(batch, rows, heads, cols, cols)` for a row block,
        each row's tokens attending among themselves, and `(batch, cols,
        heads, rows, rows)` for a column block (see `AxialSelfAttention`).
    """
    last = model.layers.index(inspection.blocks(model)[-1])
    block_classes = inspection.block_classes()
    x = ops.convert_to_tensor(images)
    maps = []
    # keras_vit builders make single chains up to the last block, so the layers in
    # order are the graph there; after it a distilled model branches into two heads.
    for layer in model.layers[1 : last + 1]:
        if isinstance(layer, block_classes):
            x, probs = layer(x, return_attention_scores=True)
            probs = np.asarray(ops.convert_to_numpy(ops.cast(probs, "float32")))
            # A block that attends within windows gives them per image (Swin's).
            per_image = getattr(layer, "attention_maps_per_image", None)
            maps.append(per_image(probs) if per_image is not None else probs)
        else:
            x = layer(x)
    return maps


def _with_class_token(matrix, prefix=1):
    """Extends a patch-only (batch, N, N) matrix with `prefix` tokens that attend to themselves."""
    batch, n, _ = matrix.shape
    out = np.zeros((batch, n + prefix, n + prefix), matrix.dtype)
    out[:, np.arange(prefix), np.arange(prefix)] = 1.0
    out[:, prefix:, prefix:] = matrix
    return out


def attention_rollout(maps, grid, class_token=True, residual_weight=0.5):
    """Attention rollout from the output token to the input patches (ViT App. D.7).

    Abnar & Zuidema (2020): average each layer's attention over heads, add the
    identity for the residual connection (`A' = (1 - w) A + w I`), renormalize the
    rows, and multiply the matrices of all layers. The row of the output token
    (the class token, or the average over tokens for GAP models) over the patches
    is the map of what the prediction attends to.

    Args:
        maps: list from `attention_maps`.
        grid: tuple `(rows, cols)` of the patch grid.
        class_token: bool. Whether the model has a class token.
        residual_weight: float `w`. Defaults to 0.5.

    Returns:
        Array `(batch, rows, cols)`, each map summing to 1 over the patches.

    Raises:
        ValueError: for maps other than `(batch, heads, tokens, tokens)`: Swin's
            window maps, or an Axial-ViT's row and column maps, whose tokens
            attend within a window or a line and not over one sequence.
    """
    for probs in maps:
        if np.ndim(probs) != 4:
            raise ValueError(
                "Attention rollout multiplies each block's attention over the whole token sequence, "
                "`(batch, heads, tokens, tokens)`; a 5-D map attends within a window or within "
                "a row or a column of the patch grid and has no such matrix. "
                f"Received: a map of shape {np.shape(probs)}"
            )
    rollout = None
    # Tokens before the patches: the class token, and DeiT's distillation token.
    prefix = maps[-1].shape[-1] - grid[0] * grid[1] if class_token else 0
    for probs in maps:
        matrix = probs.mean(axis=1)
        if prefix and matrix.shape[-1] == grid[0] * grid[1]:
            matrix = _with_class_token(matrix, prefix)  # a ConViT block before the tokens are inserted
        eye = np.eye(matrix.shape[-1], dtype=matrix.dtype)
        matrix = (1 - residual_weight) * matrix + residual_weight * eye
        matrix = matrix / matrix.sum(axis=-1, keepdims=True)
        rollout = matrix if rollout is None else matrix @ rollout
    if class_token:
        relevance = rollout[:, 0, prefix:]
    else:
        relevance = rollout.mean(axis=1)
    relevance = relevance / relevance.sum(axis=-1, keepdims=True)
    return relevance.reshape(-1, *grid)


def rollout_heatmap(model, images):
    """`attention_rollout` of a model, resized to the images' size (ViT Fig. 6).

    Returns:
        Array `(batch, height, width)` in [0, 1] (each map divided by its maximum).

    Raises:
        ValueError: for a model whose blocks do not attend over the whole
            token sequence (Swin's windows, Axial-ViT's rows and columns;
            `FamilySpec.attends_within`), naming it.
    """
    inspection.check_whole_sequence_attention(model, "Attention rollout")
    grid = grid_size(model)
    relevance = attention_rollout(attention_maps(model, images), grid, has_class_token(model))
    height, width = np.asarray(images).shape[1:3]
    resized = ops.image.resize(relevance[..., None].astype("float32"), (height, width), interpolation="bilinear")
    heat = np.asarray(ops.convert_to_numpy(resized))[..., 0]
    return heat / heat.max(axis=(1, 2), keepdims=True)


def patch_distances(grid):
    """Euclidean distances between patch centres, in patches: `(N, N)`."""
    rows, cols = np.meshgrid(np.arange(grid[0]), np.arange(grid[1]), indexing="ij")
    points = np.stack([rows.ravel(), cols.ravel()], axis=-1).astype("float64")
    return np.linalg.norm(points[:, None] - points[None], axis=-1)


def _patch_part(probs, grid):
    """Attention among patch tokens only, renormalized over the patch keys."""
    n = grid[0] * grid[1]
    patch = probs[..., -n:, -n:] if probs.shape[-1] > n else probs
    return patch / patch.sum(axis=-1, keepdims=True)


def _line_nonlocality(probs, grid):
    """Mean distance from each query to what it attends to, in patches, per head, of a row or column block.

    A row block's query attends to the tokens of its row, a column block's to
    those of its column: the distance between line positions `i` and `j` is
    `|i - j|` patches either way.
    """
    lines, length = probs.shape[1], probs.shape[-1]
    if (lines, length) not in ((grid[0], grid[1]), (grid[1], grid[0])) or probs.shape[3] != length:
        raise ValueError(
            f"Expected a row or column block's attention on the {tuple(grid)} patch grid: "
            f"`(batch, rows, heads, cols, cols)` = (batch, {grid[0]}, heads, {grid[1]}, {grid[1]}) "
            f"for a row block, `(batch, cols, heads, rows, rows)` = (batch, {grid[1]}, heads, "
            f"{grid[0]}, {grid[0]}) for a column block. Received: probs.shape={probs.shape}"
        )
    positions = np.arange(length, dtype="float64")
    distances = np.abs(positions[:, None] - positions[None])
    per_query = (probs * distances).sum(-1)  # (batch, lines, heads, length)
    # Every token is the query of exactly one line: the mean over lines and positions is over all tokens.
    return per_query.mean(axis=(1, 3)).mean(0)


def nonlocality(maps, grid):
    """ConViT's nonlocality (Eq. 8) per layer and head, in patches.

    `D^{l,h} = 1/L sum_ij A_ij^{h,l} ||delta_ij||` over the patch tokens. When
    a class token is present it has no position: it is left out as a query, and
    each query's attention is renormalized over the patch keys.

    For a Swin model (`grid` the list from `window_grids`), the distances are
    between the centres of map cells, in patches of the patch embedding (a
    cell of stage `i` is `2**i` patches wide), on each block's map before its
    cyclic shift; the queries are the image's positions, the keys every
    position of the query's window, padding included (it is attended to, at
    its place beyond the border).

    For an Axial-ViT (`grid` its `(rows, cols)`, the maps 5-D), each query's
    keys are the tokens of its row (row block) or of its column (column
    block), `|i - j|` patches from it along that line.

    Args:
        maps: list from `attention_maps`.
        grid: `(rows, cols)` of the patch grid, or for a Swin model the list
            of `WindowGrid` from `window_grids`, one per map.

    Returns:
        Array `(layers, heads)`, averaged over the batch. Swin's stages have
        different head counts: `heads` is then the largest, and a block with
        fewer heads is NaN beyond them (plots skip NaN).
    """
    if isinstance(grid, (list, tuple)) and grid and hasattr(grid[0], "nonlocality"):
        # One grid per map that measures its own map (Swin's `WindowGrid`).
        if len(grid) != len(maps):
            raise ValueError(
                f"`grid` must hold one {type(grid[0]).__name__} per attention map. "
                f"Received: {len(grid)} grids for {len(maps)} maps"
            )
        out = [block_grid.nonlocality(probs) for probs, block_grid in zip(maps, grid)]
        table = np.full((len(out), max(len(o) for o in out)), np.nan)
        for index, distances in enumerate(out):
            table[index, : len(distances)] = distances
        return table
    distances = patch_distances(grid)
    out = []
    for probs in maps:
        if np.ndim(probs) == 5:
            out.append(_line_nonlocality(np.asarray(probs), grid))
            continue
        patch = _patch_part(probs, grid)
        out.append((patch * distances).sum(-1).mean(-1).mean(0))
    return np.stack(out)


def mean_attention_distance(maps, grid, patch_pixels):
    """ViT App. D.6 "attention distance" per layer and head, in pixels.

    The distance between query and key patches weighted by the attention,
    averaged over queries and images; the analogue of a CNN's receptive field.
    `patch_pixels` is the patch size in pixels (for a hybrid: image size over
    grid size; for Swin: the patch embedding's, 4). Swin models pass the list
    from `window_grids` as `grid`; an Axial-ViT's row and column maps are
    measured along their lines (see `nonlocality`).

    Returns:
        Array `(layers, heads)` (NaN-padded for Swin, see `nonlocality`).
    """
    return nonlocality(maps, grid) * patch_pixels

"""Attention probabilities, attention rollout, attention distance and nonlocality.

All functions work on any keras_vit model (ViT, hybrid, ConViT) and any backend:
the model's layers are applied one after the other, with every transformer block
asked for its attention probabilities (the explicit attention path).
"""

import numpy as np
from keras import ops

from keras_vit.layers.patching import ClassToken, PatchEncoder
from keras_vit.layers.transformer import TransformerBlock


def grid_size(model):
    """(rows, cols) of the model's patch grid."""
    return next(layer for layer in model.layers if isinstance(layer, PatchEncoder)).grid_size


def has_class_token(model):
    return any(isinstance(layer, ClassToken) for layer in model.layers)


def attention_maps(model, images):
    """Attention probabilities of every block.

    Args:
        model: A keras_vit model.
        images: array `(batch, height, width, channels)` as the model takes it.

    Returns:
        List with one numpy array per block, `(batch, heads, tokens, tokens)`.
        Blocks after a class token see it as token 0; ConViT's GPSA blocks
        (before the class token is inserted) see patch tokens only.
    """
    x = ops.convert_to_tensor(images)
    maps = []
    # keras_vit builders make single chains, so the layers in order are the graph.
    for layer in model.layers[1:]:
        if isinstance(layer, TransformerBlock):
            x, probs = layer(x, return_attention_scores=True)
            maps.append(np.asarray(ops.convert_to_numpy(ops.cast(probs, "float32"))))
        else:
            x = layer(x)
    return maps


def _with_class_token(matrix):
    """Extends a patch-only (batch, N, N) matrix with a class token that attends to itself."""
    batch, n, _ = matrix.shape
    out = np.zeros((batch, n + 1, n + 1), matrix.dtype)
    out[:, 0, 0] = 1.0
    out[:, 1:, 1:] = matrix
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
    """
    rollout = None
    for probs in maps:
        matrix = probs.mean(axis=1)
        if class_token and matrix.shape[-1] == grid[0] * grid[1]:
            matrix = _with_class_token(matrix)  # a ConViT block before the class token
        eye = np.eye(matrix.shape[-1], dtype=matrix.dtype)
        matrix = (1 - residual_weight) * matrix + residual_weight * eye
        matrix = matrix / matrix.sum(axis=-1, keepdims=True)
        rollout = matrix if rollout is None else matrix @ rollout
    if class_token:
        relevance = rollout[:, 0, 1:]
    else:
        relevance = rollout.mean(axis=1)
    relevance = relevance / relevance.sum(axis=-1, keepdims=True)
    return relevance.reshape(-1, *grid)


def rollout_heatmap(model, images):
    """`attention_rollout` of a model, resized to the images' size (ViT Fig. 6).

    Returns:
        Array `(batch, height, width)` in [0, 1] (each map divided by its maximum).
    """
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


def nonlocality(maps, grid):
    """ConViT's nonlocality (Eq. 8) per layer and head, in patches.

    `D^{l,h} = 1/L sum_ij A_ij^{h,l} ||delta_ij||` over the patch tokens. When
    a class token is present it has no position: it is left out as a query, and
    each query's attention is renormalized over the patch keys.

    Returns:
        Array `(layers, heads)`, averaged over the batch.
    """
    distances = patch_distances(grid)
    out = []
    for probs in maps:
        patch = _patch_part(probs, grid)
        out.append((patch * distances).sum(-1).mean(-1).mean(0))
    return np.stack(out)


def mean_attention_distance(maps, grid, patch_pixels):
    """ViT App. D.6 "attention distance" per layer and head, in pixels.

    The distance between query and key patches weighted by the attention,
    averaged over queries and images; the analogue of a CNN's receptive field.
    `patch_pixels` is the patch size in pixels (for a hybrid: image size over
    grid size).

    Returns:
        Array `(layers, heads)`.
    """
    return nonlocality(maps, grid) * patch_pixels

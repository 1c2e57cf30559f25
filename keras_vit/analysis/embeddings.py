"""Position-embedding similarity and patch-embedding filters (ViT Fig. 7)."""

import numpy as np
from keras import ops

from keras_vit import inspection
from keras_vit.layers.patching import Patches


def _numpy(variable):
    return np.asarray(ops.convert_to_numpy(variable), dtype="float64")


def position_embedding_similarity(model):
    """Cosine similarity between the position embeddings of all patch pairs (ViT Fig. 7 centre).

    Returns:
        Array `(rows, cols, rows, cols)`: entry `[i, j]` is the map of patch
        `(i, j)`'s similarity to every patch.
    """
    grid = _numpy(inspection.patch_encoder(model).position_embedding)
    rows, cols, width = grid.shape
    flat = grid.reshape(-1, width)
    flat = flat / np.linalg.norm(flat, axis=-1, keepdims=True)
    return (flat @ flat.T).reshape(rows, cols, rows, cols)


def patch_embedding_components(model, num_components=28):
    """Principal components of the patch-embedding filters (ViT Fig. 7 left).

    The linear embedding `E` holds `D` filters of `P x P x C` pixels; their
    principal components (of the centred filters) show what the first layer
    represents. Hybrids embed ResNet features, not pixels, and have no such filters.

    Returns:
        Tuple `(components, explained)`: `(k, P, P, C)` filters and the fraction
        of variance each explains.
    """
    encoder = inspection.patch_encoder(model)
    patches = inspection.first_layer(model, Patches)
    kernel = _numpy(encoder.projection.kernel)  # (P * P * C, D)
    ph, pw = patches.patch_size
    channels = kernel.shape[0] // (ph * pw)
    filters = kernel.T - kernel.T.mean(axis=0, keepdims=True)  # D filters as rows
    _, singular, vt = np.linalg.svd(filters, full_matrices=False)
    k = min(num_components, vt.shape[0])
    explained = singular**2 / (singular**2).sum()
    return vt[:k].reshape(k, ph, pw, channels), explained[:k]

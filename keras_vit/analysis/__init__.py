"""The papers' analysis tools for keras_vit models (backend-agnostic)."""

from keras_vit.analysis.attention import (
    WindowGrid,
    attention_maps,
    attention_rollout,
    grid_size,
    has_class_token,
    mean_attention_distance,
    nonlocality,
    patch_distances,
    rollout_heatmap,
    window_attention_to_grid,
    window_grids,
)
from keras_vit.analysis.embeddings import gpsa_gating, patch_embedding_components, position_embedding_similarity

__all__ = [
    "WindowGrid",
    "attention_maps",
    "attention_rollout",
    "gpsa_gating",
    "grid_size",
    "has_class_token",
    "mean_attention_distance",
    "nonlocality",
    "patch_distances",
    "patch_embedding_components",
    "position_embedding_similarity",
    "rollout_heatmap",
    "window_attention_to_grid",
    "window_grids",
]

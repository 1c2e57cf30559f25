"""The papers' analysis tools for keras_vit models (backend-agnostic)."""

from keras_vit.analysis.attention import (
    attention_maps,
    attention_rollout,
    grid_size,
    has_class_token,
    mean_attention_distance,
    nonlocality,
    patch_distances,
    rollout_heatmap,
)
from keras_vit.analysis.embeddings import gpsa_gating, patch_embedding_components, position_embedding_similarity

__all__ = [
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
]

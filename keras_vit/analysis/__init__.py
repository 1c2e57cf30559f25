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
from keras_vit.analysis.flops import (
    axial_block_macs,
    axial_vit_forward_macs,
    encoder_block_macs,
    forward_macs,
    inference_flops,
    swin_forward_macs,
    train_flops,
    vit_forward_macs,
)

__all__ = [
    "WindowGrid",
    "attention_maps",
    "attention_rollout",
    "axial_block_macs",
    "axial_vit_forward_macs",
    "encoder_block_macs",
    "forward_macs",
    "gpsa_gating",
    "grid_size",
    "has_class_token",
    "inference_flops",
    "mean_attention_distance",
    "nonlocality",
    "patch_distances",
    "patch_embedding_components",
    "position_embedding_similarity",
    "rollout_heatmap",
    "swin_forward_macs",
    "train_flops",
    "vit_forward_macs",
    "window_attention_to_grid",
    "window_grids",
]

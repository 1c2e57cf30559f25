"""The papers' analysis tools for keras_vit models (backend-agnostic).

A family keeps the tools of its own model in its folder's package: Swin's
window grids and FLOP counts (`keras_vit.models.swin`), ConViT's gates
(`keras_vit.models.convit.gpsa_gating`), Axial-ViT's FLOP counts
(`keras_vit.models.axial`).
"""

from keras_vit.analysis.attention import (
    attention_gates,
    attention_grid,
    attention_maps,
    attention_rollout,
    grid_size,
    has_class_token,
    mean_attention_distance,
    nonlocality,
    patch_distances,
    rollout_heatmap,
)
from keras_vit.analysis.embeddings import patch_embedding_components, position_embedding_similarity
from keras_vit.analysis.flops import (
    encoder_block_macs,
    forward_macs,
    inference_flops,
    train_flops,
    vit_forward_macs,
)

__all__ = [
    "attention_gates",
    "attention_grid",
    "attention_maps",
    "attention_rollout",
    "encoder_block_macs",
    "forward_macs",
    "grid_size",
    "has_class_token",
    "inference_flops",
    "mean_attention_distance",
    "nonlocality",
    "patch_distances",
    "patch_embedding_components",
    "position_embedding_similarity",
    "rollout_heatmap",
    "train_flops",
    "vit_forward_macs",
]

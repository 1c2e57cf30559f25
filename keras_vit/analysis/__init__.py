"""The papers' analysis tools for keras_vit models (backend-agnostic).

A family that lives in its folder keeps its own counts there
(`keras_vit.models.<family>`); those it exported here before it had one are
still answered here, through the family's registration (`FamilySpec.exports`).
"""

from keras_vit import families

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
from keras_vit.analysis.embeddings import patch_embedding_components, position_embedding_similarity
from keras_vit.analysis.flops import (
    encoder_block_macs,
    forward_macs,
    inference_flops,
    train_flops,
    vit_forward_macs,
)

__all__ = [
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

__getattr__, __dir__ = families.answer_exports(__name__, globals())

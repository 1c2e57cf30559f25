"""Axial-ViT's named sizes (ViT App. D.5, Fig. 12): ViT-B's, at patch 16 and 32."""

from keras_vit.architectures import VIT_SIZES

# `num_layers` counts the ViT blocks, each of which becomes a row and a column block.
ARCHITECTURES = {
    "AxialViT_B16": ("AxialViT", dict(VIT_SIZES["B"], patch_size=16)),
    "AxialViT_B32": ("AxialViT", dict(VIT_SIZES["B"], patch_size=32)),
}

# Why `weights` must be None: the start of the messages that refuse one.
NO_CHECKPOINTS = "Axial-ViT has no published checkpoints (the ViT authors released none)"

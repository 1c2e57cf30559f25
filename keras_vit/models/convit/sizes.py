"""ConViT's named sizes (ConViT Table 1), its ablation switch and a tiny model for tests."""


def _convit(num_heads, head_dim):
    width = num_heads * head_dim
    # ConViT Sec. 4: GPSA in the first 10 of the 12 blocks, at every size.
    return dict(hidden_size=width, num_layers=12, num_heads=num_heads, mlp_dim=4 * width,
                num_gpsa_layers=10)


# `D_emb = 48 N_h` (Ti, S, B); the "+" models 64 N_h.
ARCHITECTURES = {
    "ConViT_Ti": ("ConViT", _convit(4, 48)),
    "ConViT_S": ("ConViT", _convit(9, 48)),
    "ConViT_B": ("ConViT", _convit(16, 48)),
    "ConViT_Ti_plus": ("ConViT", _convit(4, 64)),
    "ConViT_S_plus": ("ConViT", _convit(9, 64)),
    "ConViT_B_plus": ("ConViT", _convit(16, 64)),
}

# The arguments that fix a ConViT's weights besides ViT's: how many blocks are GPSA
# blocks, and whether their gates are learned (Table 3 (b) freezes them at 0, which a
# checkpoint's learned gates would undo).
ARCHITECTURE_KEYS = ("num_gpsa_layers", "train_gating")
# Table 3's switch that changes what the weights mean, at the published models' value.
# `train_gpsa_attention=False` is not among them: the same weights, frozen.
ABLATION_DEFAULTS = {"ConViT": {"train_gating": True}}

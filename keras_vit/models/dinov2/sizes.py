"""DINOv2's named sizes (Oquab et al. 2023, Table 17; registers: Darcet et al. 2024).

ViT-S/B/L/g at patch 14 and 518 px. ViT-g (1536 wide, 40 blocks, 24 heads)
has a SwiGLU MLP of gated width 4096 (DINOv2's `SwiGLUFFNFused`:
`int(2 / 3 * 4 * 1536)` rounded up to a multiple of 8). The `_reg4` models add
four register tokens.
"""

_SIZES = {
    "S": dict(hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "G": dict(hidden_size=1536, num_layers=40, num_heads=24, mlp_dim=4096, mlp_activation="swiglu"),
}

ARCHITECTURES = {
    f"DINOv2_{size}14{suffix}": (
        "DINOv2",
        dict({"mlp_activation": "gelu", **config}, patch_size=14, num_register_tokens=registers),
    )
    for size, config in _SIZES.items()
    for suffix, registers in (("", 0), ("_reg4", 4))
}
"""`variant -> ("DINOv2", arguments)`, added to `keras_vit.architectures.ARCHITECTURES` on registration."""

# The arguments that fix a DINOv2 model's weights besides the shared ones: ViT-g's SwiGLU
# MLP and the register tokens.
ARCHITECTURE_KEYS = ("mlp_activation", "num_register_tokens")

"""Swin's named sizes (Swin Sec. 3.3), its ablation switches and how its position arguments compare."""


def _swin(embed_dim, depths, num_heads, window_size=7, image_size=224):
    # Swin Sec. 3.3: C = 96, 96, 128, 192 and heads C / 32 in the first stage.
    return dict(image_size=image_size, embed_dim=embed_dim, depths=depths,
                num_heads=num_heads, window_size=window_size)


# T, S, B, L at 224 px with 7 x 7 windows; B and L also at 384 px with 12 x 12.
ARCHITECTURES = {
    "Swin_T": ("SwinTransformer", _swin(96, (2, 2, 6, 2), (3, 6, 12, 24))),
    "Swin_S": ("SwinTransformer", _swin(96, (2, 2, 18, 2), (3, 6, 12, 24))),
    "Swin_B": ("SwinTransformer", _swin(128, (2, 2, 18, 2), (4, 8, 16, 32))),
    "Swin_L": ("SwinTransformer", _swin(192, (2, 2, 18, 2), (6, 12, 24, 48))),
    "Swin_B384": ("SwinTransformer", _swin(128, (2, 2, 18, 2), (4, 8, 16, 32), 12, 384)),
    "Swin_L384": ("SwinTransformer", _swin(192, (2, 2, 18, 2), (6, 12, 24, 48), 12, 384)),
}

# The arguments that fix a Swin model's weights besides the shared ones (`num_heads` is
# a tuple there, one per stage). Not the window: the loader resamples the relative
# position bias tables to another window (bicubic, as Swin's fine-tuning at 384 does).
ARCHITECTURE_KEYS = ("embed_dim", "depths", "mlp_ratio", "absolute_position_embedding")

# Swin Table 4's position terms, at the published models' values: they change the
# weights (the absolute embedding) or what they mean (the relative bias, its content
# term). `shifted_windows=False` is not among them: the same weights, unshifted.
ABLATION_DEFAULTS = {"SwinTransformer": {"position_embedding": "relative", "absolute_position_embedding": False}}


def swin_absolute_embedding(position_embedding, absolute_position_embedding):
    """Whether a Swin model has the absolute embedding: asked for by either argument (Swin Table 4)."""
    return bool(absolute_position_embedding) or position_embedding in ("absolute", "absolute+relative")


def normalize_architecture(fields):
    """Swin's two position arguments in the one form a built model is read back in.

    `absolute_position_embedding` becomes whether the model has the absolute
    embedding, and `position_embedding="relative"` with it `"absolute+relative"`.
    """
    position_embedding = fields["position_embedding"]
    absolute = swin_absolute_embedding(position_embedding, fields["absolute_position_embedding"])
    if absolute and position_embedding == "relative":
        position_embedding = "absolute+relative"
    return {"position_embedding": position_embedding, "absolute_position_embedding": absolute}

"""The named variants: one table, and thin builders generated from it.

Sizes are those of ViT Table 1 (Ti and S from DeiT), the hybrids of ViT Sec. 4.1
and App. D (R+Ti/16, R26+S/32 and R26+B/32 as published with the AugReg
checkpoints), and ConViT Table 1 (`D_emb = 48 N_h`; the "+" models 64 N_h).
"""

import os

from keras_vit.models.convit import ConViT
from keras_vit.models.vit import VisionTransformer
from keras_vit.weights.registry import known_checkpoint

# Width, depth, heads and MLP size of the transformer sizes.
VIT_SIZES = {
    "Ti": dict(hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "H": dict(hidden_size=1280, num_layers=32, num_heads=16, mlp_dim=5120),
}


def _convit(num_heads, head_dim):
    width = num_heads * head_dim
    return dict(hidden_size=width, num_layers=12, num_heads=num_heads, mlp_dim=4 * width)


# name -> (builder, keyword arguments). `test_variants.py` pins the parameter
# count of every entry, so an entry added here without a count fails the tests.
VARIANTS = {
    "ViT_Ti16": (VisionTransformer, dict(VIT_SIZES["Ti"], patch_size=16)),
    "ViT_S16": (VisionTransformer, dict(VIT_SIZES["S"], patch_size=16)),
    "ViT_B16": (VisionTransformer, dict(VIT_SIZES["B"], patch_size=16)),
    "ViT_B32": (VisionTransformer, dict(VIT_SIZES["B"], patch_size=32)),
    "ViT_B8": (VisionTransformer, dict(VIT_SIZES["B"], patch_size=8)),
    "ViT_L16": (VisionTransformer, dict(VIT_SIZES["L"], patch_size=16)),
    "ViT_L32": (VisionTransformer, dict(VIT_SIZES["L"], patch_size=32)),
    "ViT_H14": (VisionTransformer, dict(VIT_SIZES["H"], patch_size=14)),
    "R_ViT_Ti16": (VisionTransformer, dict(VIT_SIZES["Ti"], patch_size=8, resnet_stages=())),
    "R26_ViT_S32": (
        VisionTransformer,
        dict(VIT_SIZES["S"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    ),
    "R26_ViT_B32": (
        VisionTransformer,
        dict(VIT_SIZES["B"], patch_size=1, resnet_stages=(2, 2, 2, 2)),
    ),
    "R50_ViT_B16": (VisionTransformer, dict(VIT_SIZES["B"], patch_size=1, resnet_stages=(3, 4, 9))),
    "R50_ViT_L32": (
        VisionTransformer,
        dict(VIT_SIZES["L"], patch_size=1, resnet_stages=(3, 4, 6, 3)),
    ),
    "ConViT_Ti": (ConViT, _convit(4, 48)),
    "ConViT_S": (ConViT, _convit(9, 48)),
    "ConViT_B": (ConViT, _convit(16, 48)),
    "ConViT_Ti_plus": (ConViT, _convit(4, 64)),
    "ConViT_S_plus": (ConViT, _convit(9, 64)),
    "ConViT_B_plus": (ConViT, _convit(16, 64)),
}

# A few-thousand-parameter model of each family, for tests and quick trials.
TESTING_VARIANTS = {
    "vit": (VisionTransformer, dict(image_size=32, patch_size=8, hidden_size=32, num_layers=2,
                                    num_heads=2, mlp_dim=64, num_classes=10)),
    "hybrid": (VisionTransformer, dict(image_size=64, patch_size=1, hidden_size=32, num_layers=2,
                                       num_heads=2, mlp_dim=64, num_classes=10,
                                       resnet_stages=(1, 1))),
    "convit": (ConViT, dict(image_size=32, patch_size=8, hidden_size=32, num_layers=3,
                            num_heads=4, mlp_dim=64, num_gpsa_layers=2, num_classes=10)),
}


def build_variant(name, weights=None, **kwargs):
    """Builds the named variant; keyword arguments override the table.

    Args:
        name: str. A key of `VARIANTS`, e.g. `"ViT_B16"`.
        weights: str or None. A checkpoint file, or the name of a known
            checkpoint of this variant (e.g. `"imagenet21k+imagenet2012"`, see
            `keras_vit.weights.KNOWN_CHECKPOINTS`), whose training settings
            (classes, resolution, pre-logits) become the defaults.
        **kwargs: Any argument of `VisionTransformer` or `ConViT`.

    Returns:
        A `keras.Model`.
    """
    if name not in VARIANTS:
        raise ValueError(
            f"Unknown variant. Expected one of {sorted(VARIANTS)}. Received: name={name!r}"
        )
    builder, config = VARIANTS[name]
    if weights is not None and not os.path.exists(weights):
        known = known_checkpoint(name, weights)
        if known is not None:
            kwargs = {**known.config, **kwargs}
    return builder(**{"name": name.lower(), **config, **kwargs}, weights=weights)


def _make_builder(name):
    builder, config = VARIANTS[name]
    sizes = ", ".join(f"{key}={value}" for key, value in config.items())

    def build(weights=None, **kwargs):
        return build_variant(name, weights=weights, **kwargs)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (
        f"Builds {name} ({sizes}).\n\n"
        f"Args:\n    weights: A checkpoint file or a known checkpoint name of {name}.\n"
        f"    **kwargs: Any argument of `{builder.__name__}`, e.g. `image_size`,\n"
        f"        `num_classes`, `include_top`, `dtype`; they override the table.\n\n"
        "Returns:\n    A `keras.Model`.\n"
    )
    return build


ViT_Ti16 = _make_builder("ViT_Ti16")
ViT_S16 = _make_builder("ViT_S16")
ViT_B16 = _make_builder("ViT_B16")
ViT_B32 = _make_builder("ViT_B32")
ViT_B8 = _make_builder("ViT_B8")
ViT_L16 = _make_builder("ViT_L16")
ViT_L32 = _make_builder("ViT_L32")
ViT_H14 = _make_builder("ViT_H14")
R_ViT_Ti16 = _make_builder("R_ViT_Ti16")
R26_ViT_S32 = _make_builder("R26_ViT_S32")
R26_ViT_B32 = _make_builder("R26_ViT_B32")
R50_ViT_B16 = _make_builder("R50_ViT_B16")
R50_ViT_L32 = _make_builder("R50_ViT_L32")
ConViT_Ti = _make_builder("ConViT_Ti")
ConViT_S = _make_builder("ConViT_S")
ConViT_B = _make_builder("ConViT_B")
ConViT_Ti_plus = _make_builder("ConViT_Ti_plus")
ConViT_S_plus = _make_builder("ConViT_S_plus")
ConViT_B_plus = _make_builder("ConViT_B_plus")

"""The named variants' architectures, as plain data, and how to compare two.

Sizes are those of ViT Table 1 (Ti and S from DeiT), the hybrids of ViT Sec. 4.1
and App. D (R+Ti/16, R26+S/32 and R26+B/32 as published with the AugReg
checkpoints), DeiT Table 1 (the ViT sizes Ti, S, B with ImageNet mean/std
inputs, DeiT's initialization and, distilled, the distillation token). A family
in its folder (`keras_vit.models.<family>`: ConViT, Swin, Axial-ViT, DINOv2)
keeps its sizes there, and registering it adds them to `ARCHITECTURES`.

The table lives here, apart from the builders (`keras_vit.models.variants`
turns it into `VARIANTS`), so that the weight loader can check a known
checkpoint against a model before downloading it without importing the models
package, which imports the loader.
"""

from keras_vit.layers.validation import to_pair

# Width, depth, heads and MLP size of the transformer sizes.
VIT_SIZES = {
    "Ti": dict(hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768),
    "S": dict(hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536),
    "B": dict(hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072),
    "L": dict(hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    "H": dict(hidden_size=1280, num_layers=32, num_heads=16, mlp_dim=5120),
}


def _deit(size, distillation=False, image_size=224):
    # DeiT Table 1: ViT-Ti/S/B at patch 16, trained on ImageNet mean/std inputs
    # with DeiT's initialization; the distilled models add the token (Sec. 5).
    return dict(VIT_SIZES[size], patch_size=16, image_size=image_size, preprocessing="imagenet",
                initialization="deit", distillation=distillation)


# name -> (builder name, keyword arguments). `test_variants.py` pins the
# parameter count of every entry, so an entry added here without a count fails.
ARCHITECTURES = {
    "ViT_Ti16": ("VisionTransformer", dict(VIT_SIZES["Ti"], patch_size=16)),
    "ViT_S16": ("VisionTransformer", dict(VIT_SIZES["S"], patch_size=16)),
    "ViT_B16": ("VisionTransformer", dict(VIT_SIZES["B"], patch_size=16)),
    "ViT_B32": ("VisionTransformer", dict(VIT_SIZES["B"], patch_size=32)),
    "ViT_B8": ("VisionTransformer", dict(VIT_SIZES["B"], patch_size=8)),
    "ViT_L16": ("VisionTransformer", dict(VIT_SIZES["L"], patch_size=16)),
    "ViT_L32": ("VisionTransformer", dict(VIT_SIZES["L"], patch_size=32)),
    "ViT_H14": ("VisionTransformer", dict(VIT_SIZES["H"], patch_size=14)),
    "R_ViT_Ti16": ("VisionTransformer", dict(VIT_SIZES["Ti"], patch_size=8, resnet_stages=())),
    "R26_ViT_S32": ("VisionTransformer", dict(VIT_SIZES["S"], patch_size=1, resnet_stages=(2, 2, 2, 2))),
    "R26_ViT_B32": ("VisionTransformer", dict(VIT_SIZES["B"], patch_size=1, resnet_stages=(2, 2, 2, 2))),
    "R50_ViT_B16": ("VisionTransformer", dict(VIT_SIZES["B"], patch_size=1, resnet_stages=(3, 4, 9))),
    "R50_ViT_L32": ("VisionTransformer", dict(VIT_SIZES["L"], patch_size=1, resnet_stages=(3, 4, 6, 3))),
    "DeiT_Ti16": ("VisionTransformer", _deit("Ti")),
    "DeiT_S16": ("VisionTransformer", _deit("S")),
    "DeiT_B16": ("VisionTransformer", _deit("B")),
    "DeiT_B16_384": ("VisionTransformer", _deit("B", image_size=384)),
    "DeiT_Ti16_distilled": ("VisionTransformer", _deit("Ti", distillation=True)),
    "DeiT_S16_distilled": ("VisionTransformer", _deit("S", distillation=True)),
    "DeiT_B16_distilled": ("VisionTransformer", _deit("B", distillation=True)),
    "DeiT_B16_384_distilled": ("VisionTransformer", _deit("B", distillation=True, image_size=384)),
}

# The arguments that fix a checkpoint's weight shapes and what they compute.
# Image size and classes are not among them: the loader resamples the position
# embeddings and replaces the head. A registered family appends its own
# (`FamilySpec.architecture_keys`: Swin's `embed_dim`, `depths`, ...), absent from
# the other builders' calls; a field is compared only where both sides have it
# (`num_heads` is a tuple, one per stage, in Swin's), and `builder` always differs
# across families. DeiT's `distillation` adds a token and a head, so a distilled
# checkpoint does not fit a plain model (nor the other way round). The ablation
# switches follow (see `ABLATION_DEFAULTS`); `position_embedding` is each
# builder's own (ViT's Table 8 row in a ViT call, Swin's Table 4 row in a Swin call).
ARCHITECTURE_KEYS = [
    "builder", "hidden_size", "num_layers", "num_heads", "mlp_dim", "patch_size",
    "resnet_stages", "num_channels", "distillation",
    "position_embedding", "position_embedding_at",
]

# The papers' ablation switches (issue #29) that change a model's weights or
# what they mean, per builder, at the value of the published models (the
# builders' defaults, and the only value a known checkpoint fits): here ViT's
# position embeddings (App. D.3, Table 8); a registered family adds its
# builders' (`FamilySpec.ablation_defaults`: ConViT's frozen gates, Swin's
# position terms). The switches that change neither are not compared, so a
# checkpoint loads into their ablations (Swin's unshifted windows, ConViT's
# frozen attention).
ABLATION_DEFAULTS = {
    "VisionTransformer": {"position_embedding": "learned_1d", "position_embedding_at": "stem"},
}


# Builder name -> `fields -> dict`: a registered family's arguments brought to the one
# form a built model is read back in (`FamilySpec.normalize_architecture`).
NORMALIZERS = {}


def architecture(builder, arguments):
    """The architecture fields of a builder call, in comparable form.

    Args:
        builder: str. `"VisionTransformer"` or a registered family's builder
            name, e.g. `"SwinTransformer"`.
        arguments: dict. Builder arguments; other keys are ignored. A missing
            `resnet_stages` means a pure ViT, a missing ablation switch its
            default (`ABLATION_DEFAULTS`).

    Returns:
        Dict keyed by `ARCHITECTURE_KEYS` (those given, and `builder`,
        `resnet_stages`, `distillation` and the builder's ablation switches
        always; a missing `distillation` means none), in the one form a built
        model is read back in (a registered family's `NORMALIZERS` entry:
        Swin's two position arguments, however they were asked for).
    """
    fields = {key: arguments[key] for key in ARCHITECTURE_KEYS if key in arguments}
    fields["builder"] = builder
    fields["distillation"] = bool(arguments.get("distillation", False))
    fields["resnet_stages"] = arguments.get("resnet_stages")
    if fields["resnet_stages"] is not None:
        fields["resnet_stages"] = tuple(fields["resnet_stages"])
    if "patch_size" in fields:
        fields["patch_size"] = to_pair(fields["patch_size"], "patch_size")
    for key in ("num_heads", "depths"):
        if isinstance(fields.get(key), list):
            fields[key] = tuple(fields[key])
    for key, default in ABLATION_DEFAULTS.get(builder, {}).items():
        fields[key] = arguments.get(key, default)
    if builder in NORMALIZERS:
        fields.update(NORMALIZERS[builder](fields))
    return fields


def differing_keys(expected, actual):
    """The `ARCHITECTURE_KEYS` that both `expected` and `actual` have, with different values."""
    return [key for key in ARCHITECTURE_KEYS if key in expected and key in actual and expected[key] != actual[key]]


def mismatches(expected, actual):
    """`"key=expected vs key=actual"` for every field of `expected` that `actual` differs in."""
    return [f"{key}={expected[key]!r} vs {key}={actual[key]!r}" for key in differing_keys(expected, actual)]

"""Every named builder exists and has exactly the reference parameter count."""

import keras
import pytest

import keras_vit
from keras_vit.models.variants import VARIANTS

# At 224 px and 1000 classes (Swin_B384 and Swin_L384 at 384 px, 12 x 12
# windows). ViT, hybrid, ConViT-Ti/S/B and Swin counts are timm 1.0.31's for the
# same configurations (Swin: `swin_{tiny,small,base,large}_patch4_window7_224`,
# `swin_{base,large}_patch4_window12_384`; its index buffers are not
# parameters). timm has no ConViT "+" models; their counts are those of the
# same layers at D = 64 N_h (ConViT Table 1), checked by hand count and against
# Table 1 in `test_convit_counts_follow_table_1`. DeiT counts are timm 1.0.31's
# `deit_{tiny,small,base}[_distilled]_patch16_{224,384}`; the plain ones equal
# ViT_Ti16/S16/B16 (at 384 px, 24 x 24 - 14 x 14 more position embeddings).
EXPECTED_PARAMETERS = {
    "ViT_Ti16": 5_717_416,
    "ViT_S16": 22_050_664,
    "ViT_B16": 86_567_656,
    "ViT_B32": 88_224_232,
    "ViT_B8": 86_576_872,
    "ViT_L16": 304_326_632,
    "ViT_L32": 306_535_400,
    "ViT_H14": 632_045_800,
    # Axial-ViT (no published model to count): ViT-B minus the class token and its position
    # slot, plus a second ViT-B block per layer (12 x 7,087,872).
    "AxialViT_B16": 171_620_584,
    "AxialViT_B32": 173_277_160,
    "R_ViT_Ti16": 6_337_704,
    "R26_ViT_S32": 36_431_912,
    "R26_ViT_B32": 101_383_976,
    "R50_ViT_B16": 98_659_112,
    "R50_ViT_L32": 328_994_856,
    "DeiT_Ti16": 5_717_416,
    "DeiT_S16": 22_050_664,
    "DeiT_B16": 86_567_656,
    "DeiT_B16_384": 86_859_496,
    "DeiT_Ti16_distilled": 5_910_800,
    "DeiT_S16_distilled": 22_436_432,
    "DeiT_B16_distilled": 87_338_192,
    "DeiT_B16_384_distilled": 87_630_032,
    "ConViT_Ti": 5_710_512,
    "ConViT_S": 27_777_322,
    "ConViT_B": 86_540_040,
    "ConViT_Ti_plus": 9_972_912,
    "ConViT_S_plus": 48_979_882,
    "ConViT_B_plus": 153_134_856,
    "Swin_T": 28_288_354,
    "Swin_S": 49_606_258,
    "Swin_B": 87_768_224,
    "Swin_L": 196_532_476,
    "Swin_B384": 87_903_584,
    "Swin_L384": 196_735_516,
    # DINOv2 at 518 px without a head: timm 1.0.31's `vit_{small,base,large,giant}_patch14[_reg4]_dinov2`
    # (with registers, no class slot in the position embeddings: `no_embed_class`).
    "DINOv2_S14": 22_056_192,
    "DINOv2_B14": 86_579_712,
    "DINOv2_L14": 304_367_616,
    "DINOv2_G14": 1_136_479_232,
    "DINOv2_S14_reg4": 22_057_344,
    "DINOv2_B14_reg4": 86_582_016,
    "DINOv2_L14_reg4": 304_370_688,
    "DINOv2_G14_reg4": 1_136_483_840,
}


def test_every_variant_has_a_pinned_count_and_a_top_level_builder():
    assert set(VARIANTS) == set(EXPECTED_PARAMETERS)
    for name in VARIANTS:
        assert callable(getattr(keras_vit, name)), name


@pytest.mark.parametrize("name", sorted(EXPECTED_PARAMETERS))
def test_parameter_count(name):
    # Built in a StatelessScope, Keras creates the variables with their shapes and defers
    # their initialization (here: forever), so ViT-H/14's 632M parameters are counted without
    # being allocated. The builders run exactly as outside the scope.
    with keras.StatelessScope(initialize_variables=False):
        model = getattr(keras_vit, name)()
        assert model.count_params() == EXPECTED_PARAMETERS[name]
        # DINOv2's checkpoints have no head: its builders return the class token's features.
        width = VARIANTS[name][1].get("hidden_size")
        assert model.output_shape == ((None, width) if name.startswith("DINOv2") else (None, 1000))
    del model
    keras.backend.clear_session()


def test_parameter_count_without_allocation_is_the_allocated_count():
    # The scope changes when the weights are initialized, not which weights exist: one
    # model of each family, built both ways, has the same variables with the same shapes.
    for name in ("ViT_Ti16", "R_ViT_Ti16", "DeiT_Ti16_distilled", "ConViT_Ti", "Swin_T"):
        built = getattr(keras_vit, name)()
        with keras.StatelessScope(initialize_variables=False):
            deferred = getattr(keras_vit, name)()
            shapes = [(v.path, tuple(v.shape)) for v in deferred.weights]
        assert shapes == [(v.path, tuple(v.shape)) for v in built.weights], name
        assert deferred.count_params() == built.count_params() == EXPECTED_PARAMETERS[name]
        keras.backend.clear_session()


def _convit_count(num_heads, head_dim, patches=196, depth=12, gpsa=10, classes=1000):
    """ConViT parameters by hand: patch conv, pos/class embeddings, blocks, norm, head."""
    d = num_heads * head_dim
    norms_and_mlp = 2 * 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d)
    gpsa_attention = d * 2 * d + d * d + (d * d + d) + (3 * num_heads + num_heads) + num_heads
    sa_attention = d * 3 * d + (d * d + d)
    return (
        (16 * 16 * 3 * d + d) + patches * d + d
        + gpsa * (gpsa_attention + norms_and_mlp)
        + (depth - gpsa) * (sa_attention + norms_and_mlp)
        + 2 * d + (d * classes + classes)
    )


@pytest.mark.parametrize(
    "name,num_heads,head_dim,table_millions",
    [
        ("ConViT_Ti", 4, 48, 6),
        ("ConViT_S", 9, 48, 27),
        ("ConViT_B", 16, 48, 86),
        ("ConViT_Ti_plus", 4, 64, 10),
        ("ConViT_S_plus", 9, 64, 48),
        ("ConViT_B_plus", 16, 64, 152),
    ],
)
def test_convit_counts_follow_table_1(name, num_heads, head_dim, table_millions):
    # The hand count reproduces timm's ConViT-Ti/S/B, and gives the "+" sizes.
    assert _convit_count(num_heads, head_dim) == EXPECTED_PARAMETERS[name]
    # ConViT Table 1 "Size" leaves out the 1000-class head (D x 1000 + 1000).
    head = num_heads * head_dim * 1000 + 1000
    assert round((EXPECTED_PARAMETERS[name] - head) / 1e6) == table_millions


def test_deit_counts_are_the_vit_counts_plus_the_distillation_parts():
    for size, width in (("Ti16", 192), ("S16", 384), ("B16", 768)):
        plain = EXPECTED_PARAMETERS[f"ViT_{size}"]
        assert EXPECTED_PARAMETERS[f"DeiT_{size}"] == plain
        # The token, its position slot and a second 1000-class head.
        assert EXPECTED_PARAMETERS[f"DeiT_{size}_distilled"] == plain + 2 * width + width * 1000 + 1000
    assert EXPECTED_PARAMETERS["DeiT_B16_384"] == EXPECTED_PARAMETERS["ViT_B16"] + (24 * 24 - 14 * 14) * 768


def test_unknown_variant_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Unknown variant. Expected one of \[.*'ViT_B16'.*\]. Received: variant='ViT_Q16'"):
        keras_vit.build_variant("ViT_Q16")

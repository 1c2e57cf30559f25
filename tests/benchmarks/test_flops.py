"""Analytic MAC counts against the GMACs timm publishes for the same models (224 px)."""

import pytest

import keras_vit
from benchmarks.flops import forward_macs, inference_flops, train_flops

# timm model cards ("GMACs"), rounded to 0.1 there.
PUBLISHED_GMACS = {
    "ViT_Ti16": 1.3,
    "ViT_S16": 4.6,
    "ViT_B16": 17.6,
    "ViT_B32": 4.4,
    "ViT_L16": 61.6,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_GMACS))
def test_forward_macs_match_published_counts(name):
    model = keras_vit.build_variant(name)
    macs = forward_macs(model)
    # Published values are rounded to 0.1 GMACs: within half a unit, plus float slack.
    assert abs(macs / 1e9 - PUBLISHED_GMACS[name]) <= 0.051
    assert train_flops(model) == 6 * macs and inference_flops(model) == 2 * macs


def test_convit_costs_its_vit_plus_the_positional_scores():
    # ConViT-B and a ViT-B with 16 heads differ by GPSA's v_pos . r_ij products on
    # 196 x 196 pairs in 10 blocks, and by the class token missing from those blocks.
    convit = forward_macs(keras_vit.ConViT_B())
    vit = forward_macs(keras_vit.ViT_B16(num_heads=16))
    d, m, n = 768, 3072, 196
    per_token = 4 * d * d + 2 * d * m
    class_token_saving = 10 * (per_token + 2 * ((n + 1) ** 2 - n * n) * d)
    positional = 10 * n * n * 3 * 16
    assert convit == vit - class_token_saving + positional


def test_hybrid_counts_the_resnet():
    hybrid = forward_macs(keras_vit.R50_ViT_B16())
    # The R50 stages (3, 4, 9) add about 4 GMACs to the ViT-B on 14 x 14 tokens.
    assert 3.5e9 < hybrid - forward_macs(keras_vit.ViT_B16()) < 4.5e9

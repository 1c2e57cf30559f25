"""Axial-ViT (ViT App. D.5) as the inspection tools see it: blocks, architecture, variants, backbone, features, attention."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import analysis, inspection
from keras_vit.architectures import ARCHITECTURES, architecture, mismatches
from keras_vit.models.axial import AxialTransformerBlock
from keras_vit.models.axial import SPEC, AxialViT
from tests.testing import ATOL, set_random_weights, to_numpy

AXIAL_VARIANTS = {name: config for name, (_, config) in SPEC.architectures.items()}

# image 16 x 24, patch 4: a non-square 4 x 6 grid, so rows and columns differ; 2 ViT blocks (4 axial).
TINY = dict(image_size=(16, 24), patch_size=4, hidden_size=16, num_layers=2, num_heads=2, mlp_dim=16,
            num_classes=3)
ROWS, COLS = 4, 6


def build(**overrides):
    model = AxialViT(**{**TINY, **overrides})
    # The head is zero-initialized: random weights make the comparisons real.
    set_random_weights(model, scale=0.3)
    return model


def images(batch=2, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (batch, 16, 24, 3)).astype("float32")


def run_by_hand(model, x, until):
    """Every layer output from the first after the input up to layer `until`, calling the layers one by one."""
    outputs = {}
    for layer in model.layers[1:]:
        x = layer(x)
        outputs[layer.name] = to_numpy(x)
        if layer.name == until:
            return outputs
    raise AssertionError(f"no layer {until!r}")


def test_blocks_are_the_row_and_column_blocks_in_graph_order():
    model = build()
    found = inspection.blocks(model)
    assert [(block.name, block.axis) for block in found] == [
        ("encoderblock_0_row", "row"), ("encoderblock_0_column", "column"),
        ("encoderblock_1_row", "row"), ("encoderblock_1_column", "column"),
    ]
    assert all(isinstance(block, AxialTransformerBlock) for block in found)
    assert inspection.final_norm(model).name == "encoder_norm"
    # No class token: no block sees a prefix token.
    assert inspection.prefix_token_counts(model) == [0, 0, 0, 0]
    assert inspection.registered_family(model) is SPEC and inspection.registered_family(keras_vit.VisionTransformer(
        image_size=16, patch_size=4, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=16, num_classes=3)) is None


@pytest.mark.parametrize("position_embedding", ["learned_1d", "learned_2d", "none"])
def test_model_architecture_reads_back_the_builder_arguments(position_embedding):
    model = build(position_embedding=position_embedding)
    actual = inspection.model_architecture(model)
    expected = architecture("AxialViT", {**TINY, "position_embedding": position_embedding, "num_channels": 3})
    assert actual == expected
    assert actual["builder"] == "AxialViT" and actual["num_layers"] == 2
    assert (actual["num_heads"], actual["mlp_dim"], actual["hidden_size"]) == (2, 16, 16)
    assert actual["patch_size"] == (4, 4) and actual["position_embedding"] == position_embedding


def test_model_architecture_of_a_keras_file_and_a_renamed_model(tmp_path):
    model = build(num_layers=1, position_embedding="learned_2d", name="renamed")
    path = str(tmp_path / "axial.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert inspection.model_architecture(restored) == inspection.model_architecture(model)
    assert inspection.model_architecture(model)["num_layers"] == 1


def test_named_variants_are_in_the_table_and_build_variant():
    for name in ("AxialViT_B16", "AxialViT_B32"):
        assert ARCHITECTURES[name] == ("AxialViT", AXIAL_VARIANTS[name])
        assert keras_vit.VARIANTS[name] == (AxialViT, AXIAL_VARIANTS[name])
    model = keras_vit.build_variant("AxialViT_B32", image_size=64, num_layers=1, include_top=False)
    assert model.name == "axialvit_b32"
    # Everything but the depth we overrode reads back as the table has it.
    table = architecture(*ARCHITECTURES["AxialViT_B32"])
    assert mismatches(table, inspection.model_architecture(model)) == ["num_layers=12 vs num_layers=1"]


@pytest.mark.parametrize("weights", ["imagenet21k", "ViT_B16/imagenet21k+imagenet2012", "checkpoint.npz"])
def test_build_variant_refuses_weights_as_the_builder_does(weights):
    with pytest.raises(ValueError, match=r"Axial-ViT has no published checkpoints .* Received: weights="):
        keras_vit.build_variant("AxialViT_B16", weights=weights)


def test_a_vit_checkpoint_does_not_fit_an_axial_model():
    model = build(num_layers=1)
    # Refused before any download, as no known checkpoint is an Axial-ViT's.
    with pytest.raises(ValueError, match=r"no published checkpoints.*Received: checkpoint='ViT_B16/imagenet21k'"):
        keras_vit.load_weights(model, "ViT_B16/imagenet21k")


def test_backbone_is_the_layers_up_to_the_final_norm():
    model = build()
    x = images()
    backbone = keras_vit.backbone(model)
    assert backbone.output_shape == (None, ROWS * COLS, 16)
    by_hand = run_by_hand(model, x, "encoder_norm")["encoder_norm"]
    features = to_numpy(backbone(x))
    np.testing.assert_allclose(features, by_hand, atol=ATOL)
    assert np.abs(features).max() > 1e-2
    np.testing.assert_allclose(to_numpy(keras_vit.head(model)(features)), to_numpy(model(x)), atol=ATOL)


def test_features_are_the_block_outputs_on_the_patch_grid():
    model = build()
    x = images()
    by_hand = run_by_hand(model, x, "encoder_norm")
    maps = keras_vit.features(model, blocks=[0, -1])
    assert {key: tuple(value.shape) for key, value in maps.output.items()} == {
        "block_0": (None, ROWS, COLS, 16), "block_3": (None, ROWS, COLS, 16)}
    out = {key: to_numpy(value) for key, value in maps(x).items()}
    np.testing.assert_allclose(out["block_0"], by_hand["encoderblock_0_row"], atol=ATOL)
    np.testing.assert_allclose(out["block_3"], by_hand["encoderblock_1_column"], atol=ATOL)
    # The last block's tokens through the final norm are the backbone's features.
    tokens = keras_vit.features(model, blocks=1, output="tokens", norm=True)
    np.testing.assert_allclose(to_numpy(tokens(x)["block_3"]), by_hand["encoder_norm"], atol=ATOL)
    pyramid = keras_vit.simple_feature_pyramid(model, out_channels=8, strides=(2, 4, 8))
    assert {key: tuple(value.shape) for key, value in pyramid.output.items()} == {
        "p1": (None, 8, 12, 8), "p2": (None, 4, 6, 8), "p3": (None, 2, 3, 8)}


def test_attention_maps_attend_within_each_row_and_column():
    model = build()
    maps = analysis.attention_maps(model, images())
    assert [probs.shape for probs in maps] == [(2, ROWS, 2, COLS, COLS), (2, COLS, 2, ROWS, ROWS)] * 2
    for probs in maps:
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    distances = analysis.mean_attention_distance(maps, analysis.grid_size(model), patch_pixels=4)
    assert distances.shape == (4, 2)
    np.testing.assert_allclose(distances, 4 * analysis.nonlocality(maps, (ROWS, COLS)))


def test_nonlocality_of_axial_maps_is_the_distance_along_each_line():
    # Uniform attention over a line of L tokens: the mean |i - j| is (L^2 - 1) / (3 L).
    row = np.full((1, ROWS, 2, COLS, COLS), 1 / COLS)
    column = np.full((1, COLS, 2, ROWS, ROWS), 1 / ROWS)
    local = np.broadcast_to(np.eye(COLS), (1, ROWS, 2, COLS, COLS))
    table = analysis.nonlocality([row, column, local], (ROWS, COLS))
    np.testing.assert_allclose(table, [[35 / 18] * 2, [15 / 12] * 2, [0.0] * 2])
    with pytest.raises(ValueError, match=r"Expected a row or column block's attention on the \(4, 6\) patch grid"):
        analysis.nonlocality([np.full((1, 5, 2, COLS, COLS), 1 / COLS)], (ROWS, COLS))


def test_rollout_refuses_axial_attention():
    model = build(num_layers=1)
    with pytest.raises(ValueError, match=r"Attention rollout .* an Axial-ViT, whose blocks attend within one "
                                         r"row or one column .* Received: model='axial_vit'"):
        analysis.rollout_heatmap(model, images())
    maps = analysis.attention_maps(model, images())
    with pytest.raises(ValueError, match=r"a 5-D map .* Received: a map of shape \(2, 4, 2, 6, 6\)"):
        analysis.attention_rollout(maps, (ROWS, COLS), class_token=False)

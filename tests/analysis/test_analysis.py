"""Analysis tools against direct numpy computations on tiny models."""

import keras
import numpy as np
import pytest

from keras_vit import analysis
from keras_vit.models.convit import GPSABlock, gpsa_gating, plot_gpsa_gating
from keras_vit.models.variants import TESTING_VARIANTS
from tests.testing import np_layer_norm, np_softmax, set_random_weights, to_numpy


def build(family, **overrides):
    builder, config = TESTING_VARIANTS[family]
    model = builder(**{**config, **overrides})
    set_random_weights(model, scale=0.3)
    return model


def images(model, batch=2):
    return np.random.default_rng(0).uniform(0, 255, (batch, *model.input_shape[1:])).astype("float32")


def test_first_block_attention_matches_numpy():
    model = build("vit")
    x = images(model)
    maps = analysis.attention_maps(model, x)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 17, 17)
    tokens = to_numpy(keras.Model(model.input, model.get_layer("embedding_dropout").output)(x)).astype("float64")
    block = model.get_layer("encoderblock_0")
    z = np_layer_norm(tokens, to_numpy(block.norm1.gamma), to_numpy(block.norm1.beta), 1e-6)
    qkv = z @ to_numpy(block.attention.qkv.kernel) + to_numpy(block.attention.qkv.bias)
    for h in range(2):
        q = qkv[..., h * 16 : (h + 1) * 16]
        k = qkv[..., 32 + h * 16 : 32 + (h + 1) * 16]
        np.testing.assert_allclose(maps[0][:, h], np_softmax(q @ k.transpose(0, 2, 1) / 4.0), atol=1e-5)


def np_rollout(maps, n_patches, class_token):
    """Rollout by explicit loops over layers and batch."""
    out = []
    for b in range(maps[0].shape[0]):
        r = None
        for probs in maps:
            a = probs[b].mean(0)
            if class_token and a.shape[0] == n_patches:
                big = np.eye(n_patches + 1)
                big[1:, 1:] = a
                a = big
            a = 0.5 * a + 0.5 * np.eye(a.shape[0])
            a = a / a.sum(1, keepdims=True)
            r = a if r is None else a @ r
        row = r[0, 1:] if class_token else r.mean(0)
        out.append(row / row.sum())
    return np.stack(out)


@pytest.mark.parametrize("family", ["vit", "convit"])
def test_rollout_matches_loops(family):
    model = build(family)
    maps = analysis.attention_maps(model, images(model))
    grid = analysis.grid_size(model)
    rollout = analysis.attention_rollout(maps, grid, class_token=True)
    np.testing.assert_allclose(rollout.reshape(2, -1), np_rollout(maps, 16, True), atol=1e-6)
    np.testing.assert_allclose(rollout.sum((1, 2)), 1.0, atol=1e-6)


def test_rollout_of_uniform_attention_is_uniform_and_gap_models_work():
    maps = [np.full((1, 2, 7, 7), 1 / 7)] * 3  # 1 class token + a 2x3 grid
    np.testing.assert_allclose(analysis.attention_rollout(maps, (2, 3)), np.full((1, 2, 3), 1 / 6), atol=1e-9)
    gap = build("vit", pooling="gap")
    heat = analysis.rollout_heatmap(gap, images(gap))
    assert heat.shape == (2, 32, 32) and heat.max() == pytest.approx(1.0)


def test_rollout_heatmap_of_a_non_square_image():
    model = build("vit", image_size=(24, 40))
    heat = analysis.rollout_heatmap(model, images(model))
    assert heat.shape == (2, 24, 40)
    assert np.isfinite(heat).all() and heat.min() >= 0


def test_nonlocality_matches_loops_and_uniform_attention_gives_mean_pair_distance():
    grid = (3, 4)
    rng = np.random.default_rng(0)
    probs = rng.random((2, 3, 13, 13))
    probs /= probs.sum(-1, keepdims=True)
    expected = np.zeros(3)
    for h in range(3):
        total = 0.0
        for b in range(2):
            for i in range(12):
                a = probs[b, h, 1 + i, 1:] / probs[b, h, 1 + i, 1:].sum()
                for j in range(12):
                    dy, dx = i // 4 - j // 4, i % 4 - j % 4
                    total += a[j] * np.hypot(dx, dy)
        expected[h] = total / (2 * 12)
    np.testing.assert_allclose(analysis.nonlocality([probs], grid)[0], expected, atol=1e-9)
    uniform = np.full((1, 2, 12, 12), 1 / 12)
    mean_pair = analysis.patch_distances(grid).mean()
    np.testing.assert_allclose(analysis.mean_attention_distance([uniform], grid, 16), 16 * mean_pair)


def test_gpsa_at_convolutional_init_has_small_attention_distance():
    # A fresh ConViT (no random weights): GPSA at its convolutional init.
    builder, config = TESTING_VARIANTS["convit"]
    model = builder(**{**config, "image_size": 64, "locality_strength": 10.0})  # an 8x8 grid
    maps = analysis.attention_maps(model, images(model))
    distance = analysis.mean_attention_distance(maps, analysis.grid_size(model), patch_pixels=8)
    mean_pair = 8 * analysis.patch_distances((8, 8)).mean()
    # 4 heads of a 2x2 kernel: sigma(1) = 73% of each head's mass on 4 neighbouring
    # patches (0.85 patches away on average), the rest spread by content: ~1.6 patches.
    assert distance[:2].max() < 0.5 * mean_pair
    # The ordinary attention block after them starts near uniform: near the mean pair distance.
    assert distance[2:].min() > 0.8 * mean_pair


def test_position_embedding_similarity_matches_loops():
    model = build("vit", image_size=(16, 24))
    sim = analysis.position_embedding_similarity(model)
    grid = to_numpy(model.get_layer("patch_encoder").position_embedding)
    assert sim.shape == (2, 3, 2, 3)
    for a in np.ndindex(2, 3):
        for b in np.ndindex(2, 3):
            u, v = grid[a], grid[b]
            assert sim[a + b] == pytest.approx(u @ v / np.linalg.norm(u) / np.linalg.norm(v), abs=1e-6)


def test_patch_embedding_components_recover_a_low_rank_filter_bank():
    model = build("vit")
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(2, 8 * 8 * 3))
    kernel = (rng.normal(size=(32, 2)) @ basis).T  # 32 filters in a 2-D subspace
    model.get_layer("patch_encoder").projection.kernel.assign(kernel.astype("float32"))
    components, explained = analysis.patch_embedding_components(model, num_components=4)
    assert components.shape == (4, 8, 8, 3)
    assert explained[:2].sum() == pytest.approx(1.0, abs=1e-6)
    flat = components.reshape(4, -1)
    np.testing.assert_allclose(flat @ flat.T, np.eye(4), atol=1e-6)
    # The top two components span the basis.
    projection = flat[:2].T @ flat[:2]
    np.testing.assert_allclose(basis @ projection, basis, atol=1e-6)


def test_gpsa_gating_is_the_sigmoid_of_lambda():
    model = build("convit")
    lambdas = [to_numpy(layer.attention.gating) for layer in model.layers if isinstance(layer, GPSABlock)]
    np.testing.assert_allclose(gpsa_gating(model), 1 / (1 + np.exp(-np.stack(lambdas))), atol=1e-7)
    with pytest.raises(ValueError, match="has no GPSA layers"):
        gpsa_gating(build("vit"))


def test_the_shared_gates_and_grid_are_asked_of_the_blocks_and_the_family():
    # keras_vit.analysis names no family: ConViT's blocks give their gates, Swin's spec its grids.
    from keras_vit.models.swin import window_grids
    from tests.models.tiny import tiny_model

    convit = build("convit")
    np.testing.assert_array_equal(analysis.attention_gates(convit), gpsa_gating(convit))
    vit = build("vit")
    with pytest.raises(ValueError, match=r"no block with attention gates\. Received: model='vision_transformer'"):
        analysis.attention_gates(vit)
    # ViT: the patch grid, a patch's pixels from the image side (32 px over a 4 x 4 grid).
    assert analysis.attention_grid(vit) == ((4, 4), 8.0)
    swin = tiny_model("swin")
    grids, pixels = analysis.attention_grid(swin)
    assert grids == window_grids(swin) and pixels == 4.0


def test_plots_return_figures(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from keras_vit.analysis import plots

    vit, convit = build("vit"), build("convit")
    x = images(vit)
    maps = analysis.attention_maps(vit, x)
    figures = [
        plots.plot_attention_rollout(x, analysis.rollout_heatmap(vit, x)),
        plots.plot_attention_distance(analysis.mean_attention_distance(maps, (4, 4), 8)),
        plots.plot_position_embedding_similarity(analysis.position_embedding_similarity(vit)),
        plots.plot_embedding_filters(analysis.patch_embedding_components(vit, 7)[0]),
        plot_gpsa_gating(gpsa_gating(convit)),
    ]
    for index, figure in enumerate(figures):
        assert isinstance(figure, matplotlib.figure.Figure) and figure.axes
        figure.savefig(tmp_path / f"{index}.png")
        assert (tmp_path / f"{index}.png").stat().st_size > 1000


def test_analysis_runs_on_distilled_models_with_two_prefix_tokens():
    import keras_vit
    from keras_vit import analysis

    images = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    for model in (
        keras_vit.VisionTransformer(image_size=32, patch_size=8, hidden_size=16, num_layers=2, num_heads=2,
                                    mlp_dim=32, num_classes=3, distillation=True),
        keras_vit.ConViT(image_size=32, patch_size=8, hidden_size=16, num_layers=2, num_heads=4, mlp_dim=32,
                         num_gpsa_layers=1, num_classes=3, distillation=True),
    ):
        maps = analysis.attention_maps(model, images)
        assert len(maps) == 2 and maps[-1].shape[-1] == 16 + 2  # class and distillation tokens
        heat = analysis.attention_rollout(maps, analysis.grid_size(model))
        assert heat.shape == (2, 4, 4)
        np.testing.assert_allclose(heat.sum(axis=(1, 2)), 1.0, rtol=1e-5)
        distance = analysis.mean_attention_distance(maps, analysis.grid_size(model), patch_pixels=8)
        assert np.isfinite(distance).all()


@pytest.mark.parametrize("tool", [analysis.attention_maps, analysis.rollout_heatmap])
def test_a_model_without_blocks_is_named_not_a_bare_max_error(tool):
    # Was Python's `max() arg is an empty sequence` from inside attention_maps.
    inputs = keras.Input((8, 8, 3))
    plain = keras.Model(inputs, keras.layers.Dense(2)(inputs), name="plain")
    with pytest.raises(ValueError, match=r"(no transformer blocks|no PatchEncoder).*Received: model='plain'"):
        tool(plain, np.zeros((1, 8, 8, 3), "float32"))

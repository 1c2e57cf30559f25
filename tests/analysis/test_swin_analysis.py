"""Swin window attention in the analysis tools, against dense numpy attention on a tiny model."""

import keras
import numpy as np
import pytest

from keras_vit import analysis
from keras_vit.models import swin as swin_family
from keras_vit.models.swin import SwinTransformer
from tests.testing import np_layer_norm, np_softmax, set_random_weights, to_numpy

# 40 x 52 px, 4 px patches, 4 x 4 windows: stage 0 is 10 x 13 (padded to
# 12 x 16, 12 windows), stage 1 is 5 x 7 (padded to 8 x 8, 4 windows); the
# second block of each stage is shifted by 2. One head, then two.
CONFIG = dict(image_size=(40, 52), embed_dim=16, depths=(2, 2), num_heads=(1, 2), window_size=4,
              num_classes=3, preprocessing=None)
PATCH_PIXELS = 4


@pytest.fixture(scope="module")
def swin():
    model = SwinTransformer(**CONFIG)
    set_random_weights(model, seed=1, scale=0.5)
    x = np.random.default_rng(0).uniform(-1, 1, (2, 40, 52, 3)).astype("float32")
    return model, x, analysis.attention_maps(model, x)


def np_dense_attention(x, block):
    """Eq. 4 over the whole padded map: each query against every key of its window.

    Written from the paper, position by position, without the layers' window
    partition: on the map rolled by `-shift`, two positions attend to each
    other when they fall in the same window; the bias is indexed by their
    offset within it, and positions of different regions of the rolled map
    (Sec. 3.2, Fig. 4) get the reference's -100.
    """
    (h, w), (hp, wp), (mh, mw), (sh, sw) = block.resolution, block.padded_size, block.window, block.shift
    attention = block.attention
    heads = attention.num_heads
    batch, _, _, channels = x.shape
    d = channels // heads
    z = np.zeros((batch, hp, wp, channels))
    z[:, :h, :w] = np_layer_norm(x, to_numpy(block.norm1.gamma), to_numpy(block.norm1.beta), 1e-5)
    qkv = z.reshape(batch, hp * wp, channels) @ to_numpy(attention.qkv.kernel) + to_numpy(attention.qkv.bias)
    rows, cols = np.divmod(np.arange(hp * wp), wp)
    a, b = (rows - sh) % hp, (cols - sw) % wp  # coordinates on the rolled map

    def region(coord, size, window, shift):
        if shift == 0:
            return np.zeros_like(coord)
        return (coord >= size - window).astype(int) + (coord >= size - shift)

    same_window = ((a[:, None] // mh) == (a[None] // mh)) & ((b[:, None] // mw) == (b[None] // mw))
    labels = region(a, hp, mh, sh) * 3 + region(b, wp, mw, sw)
    mask = np.where(labels[:, None] != labels[None], -100.0, 0.0)
    dy = (a[:, None] % mh) - (a[None] % mh) + mh - 1
    dx = (b[:, None] % mw) - (b[None] % mw) + mw - 1
    table = to_numpy(attention.relative_position_bias_table)
    out = np.zeros((batch, heads, hp * wp, hp * wp))
    for head in range(heads):
        q = qkv[..., head * d : (head + 1) * d]
        k = qkv[..., channels + head * d : channels + (head + 1) * d]
        logits = q @ k.transpose(0, 2, 1) / np.sqrt(d) + table[dy * (2 * mw - 1) + dx, head] + mask
        out[:, head] = np_softmax(np.where(same_window, logits, -np.inf))
    return out


def blocks_of(model):
    return [layer for layer in model.layers if "_block_" in layer.name]


def test_window_maps_shapes_and_grids(swin):
    model, _, maps = swin
    assert [m.shape for m in maps] == [
        (2, 12, 1, 16, 16), (2, 12, 1, 16, 16), (2, 4, 2, 16, 16), (2, 4, 2, 16, 16),
    ]
    for probs in maps:
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    grids = swin_family.window_grids(model)
    assert [g.stride for g in grids] == [1, 1, 2, 2]
    assert [g.shift for g in grids] == [(0, 0), (2, 2), (0, 0), (2, 2)]
    assert grids[0] == swin_family.WindowGrid((10, 13), (12, 16), (4, 4), (0, 0), 1)
    with pytest.raises(ValueError, match="window_grids"):
        analysis.grid_size(model)


def test_window_attention_on_the_grid_matches_dense_numpy(swin):
    model, x, maps = swin
    grids = swin_family.window_grids(model)
    for probs, grid, block in zip(maps, grids, blocks_of(model)):
        block_input = to_numpy(keras.Model(model.input, block.input)(x)).astype("float64")
        expected = np_dense_attention(block_input, block)
        dense = swin_family.window_attention_to_grid(probs, grid)
        assert dense.shape == expected.shape
        np.testing.assert_allclose(dense, expected, atol=1e-5, err_msg=block.name)
    with pytest.raises(ValueError, match=r"windows=12 and N=16"):
        swin_family.window_attention_to_grid(maps[2], grids[0])


def test_mean_attention_distance_matches_numpy_in_pixels(swin):
    model, _, maps = swin
    grids = swin_family.window_grids(model)
    distance = analysis.mean_attention_distance(maps, grids, PATCH_PIXELS)
    assert distance.shape == (4, 2)
    # Stage 0 has one head: the second column is NaN there (skipped by plots).
    assert np.isnan(distance[:2, 1]).all() and np.isfinite(distance[:, 0]).all()
    for index, (probs, grid) in enumerate(zip(maps, grids)):
        dense = swin_family.window_attention_to_grid(probs, grid).astype("float64")
        (h, w), (hp, wp) = grid.resolution, grid.padded_size
        rows, cols = np.divmod(np.arange(hp * wp), wp)
        pixels = np.stack([rows, cols], -1) * grid.stride * PATCH_PIXELS
        pair = np.linalg.norm(pixels[:, None] - pixels[None], axis=-1)
        image_queries = (rows < h) & (cols < w)
        expected = (dense * pair).sum(-1)[..., image_queries].mean(-1).mean(0)
        heads = probs.shape[2]
        np.testing.assert_allclose(distance[index, :heads], expected, rtol=1e-6)
    np.testing.assert_allclose(analysis.nonlocality(maps, grids) * PATCH_PIXELS, distance, equal_nan=True)
    with pytest.raises(ValueError, match="one WindowGrid per attention map"):
        analysis.mean_attention_distance(maps[:2], grids, PATCH_PIXELS)


def test_swin_analysis_works_on_a_stage_outputs_model(swin):
    model, x, maps = swin
    backbone = SwinTransformer(**{**CONFIG, "include_top": False}, return_stages=True)
    backbone.set_weights(model.get_weights()[: len(backbone.weights)])
    for ours, theirs in zip(analysis.attention_maps(backbone, x), maps):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)

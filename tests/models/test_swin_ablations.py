"""Swin Table 4's switches: windows without shifting and the five position terms."""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import AbsolutePositionEmbedding
from keras_vit.models.swin import SWIN_POSITION_EMBEDDINGS, SwinTransformer, SwinTransformerBlock, WindowAttention
from tests.testing import (
    ATOL,
    check_layer,
    np_softmax,
    parameter_gradients,
    set_random_weights,
    to_numpy,
)

# Stage 0 at 32 px: an 8 x 8 map of 4 x 4 windows (its second block shifted by
# 2 by default); stage 1: a 4 x 4 map, one window, no shift.
TINY = dict(
    image_size=32, embed_dim=16, depths=(2, 2), num_heads=(1, 2), window_size=4,
    num_classes=5, preprocessing=None,
)
# Per block: a (2 * 4 - 1)^2 bias table per head; q and k projections of C x C plus bias.
TABLES = 49 * (1 + 1 + 2 + 2)
QUERY_KEY = 2 * (2 * (16 * 16 + 16) + 2 * (32 * 32 + 32))
ABSOLUTE = 8 * 8 * 16


def build(**overrides):
    return SwinTransformer(**{**TINY, **overrides})


def images(batch=2, seed=0, size=32):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, size, size, 3)).astype("float32")


def blocks_of(model):
    return [layer for layer in model.layers if isinstance(layer, SwinTransformerBlock)]


# ---- numpy reference of Eq. 4 and its ablated forms -------------------------------


def np_bias(table, window):
    """`B` of Eq. 4, `(heads, N, N)`, gathered by loops over the window's offsets."""
    coords = [(i, j) for i in range(window[0]) for j in range(window[1])]
    bias = np.zeros((table.shape[1], len(coords), len(coords)))
    for a, (ya, xa) in enumerate(coords):
        for b, (yb, xb) in enumerate(coords):
            bias[:, a, b] = table[(ya - yb + window[0] - 1) * (2 * window[1] - 1) + xa - xb + window[1] - 1]
    return bias


def np_ablated_window_attention(x, weights, window, heads, mask, use_bias, use_content):
    """softmax([q k^T / sqrt(d)] [+ B] [+ mask]) v per window, heads concatenated, projected."""
    count, n, c = x.shape
    d = c // heads
    if use_content:
        qkv = (x @ weights["qkv_kernel"] + weights["qkv_bias"]).reshape(count, n, 3, heads, d)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    else:
        v = (x @ weights["value_kernel"] + weights["value_bias"]).reshape(count, n, heads, d).transpose(0, 2, 1, 3)
        logits = np.zeros((count, heads, n, n))
    if use_bias:
        logits = logits + np_bias(weights["table"], window)[None]
    if mask is not None:
        logits = logits + np.tile(mask, (count // mask.shape[0], 1, 1))[:, None]
    probs = np_softmax(logits)
    out = (probs @ v).transpose(0, 2, 1, 3).reshape(count, n, c)
    return out @ weights["out_kernel"] + weights["out_bias"], probs


def attention_weights(layer):
    parts = {"out_kernel": layer.out.kernel, "out_bias": layer.out.bias}
    if layer.use_content_term:
        parts.update(qkv_kernel=layer.qkv.kernel, qkv_bias=layer.qkv.bias)
    else:
        parts.update(value_kernel=layer.value.kernel, value_bias=layer.value.bias)
    if layer.use_relative_position_bias:
        parts["table"] = layer.relative_position_bias_table
    return {name: to_numpy(value).astype("float64") for name, value in parts.items()}


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("use_bias, use_content", [(True, False), (False, True)])
def test_ablated_window_attention_matches_numpy(masked, use_bias, use_content):
    # A 2 x 2 window, 2 heads, 3 windows per image; the mask cuts each window in two.
    window, heads, per_image = (2, 2), 2, 3
    x = np.random.default_rng(1).normal(size=(2 * per_image, 4, 8)).astype("float32")
    mask = None
    if masked:
        mask = np.zeros((per_image, 4, 4), "float32")
        mask[1:, :2, 2:] = mask[1:, 2:, :2] = -100.0
    terms = dict(use_relative_position_bias=use_bias, use_content_term=use_content)
    check_layer(WindowAttention, dict(num_heads=heads, window_size=window, **terms), x, {"attention_mask": mask})
    layer = WindowAttention(heads, window, **terms)
    layer(x)
    set_random_weights(layer, seed=2)
    names = {w.path.split("/", 1)[1] for w in layer.weights}
    expected_names = {"out/kernel", "out/bias"} | (
        {"qkv/kernel", "qkv/bias"} if use_content else {"value/kernel", "value/bias"}
    ) | ({"relative_position_bias_table"} if use_bias else set())
    assert names == expected_names
    expected, probs = np_ablated_window_attention(
        x.astype("float64"), attention_weights(layer), window, heads, mask, use_bias, use_content
    )
    output, scores = layer(x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(scores), probs, atol=ATOL)
    if not use_content:
        # softmax(B + mask): the same weights for every image, whatever its tokens.
        scores = to_numpy(scores).reshape(2, per_image, heads, 4, 4)
        np.testing.assert_array_equal(scores[0], scores[1])


def test_window_attention_without_content_in_a_symbolic_model():
    # The batch is unknown while the functional graph is traced: the broadcast
    # over it must not need its size.
    inputs = keras.Input((4, 8))
    model = keras.Model(inputs, WindowAttention(2, 2, use_content_term=False)(inputs))
    x = np.random.default_rng(0).normal(size=(3, 4, 8)).astype("float32")
    assert to_numpy(model(x)).shape == (3, 4, 8)


@pytest.mark.parametrize("terms", [dict(use_relative_position_bias=False), dict(use_content_term=False)])
def test_block_round_trips_the_terms(terms):
    x = np.random.default_rng(0).normal(size=(2, 8, 8, 8)).astype("float32")
    check_layer(SwinTransformerBlock, dict(num_heads=2, window_size=4, shift_size=2, **terms), x)
    block = SwinTransformerBlock(2, 4, 2, **terms)
    block(x)
    for name, value in terms.items():
        assert getattr(block.attention, name) is value and block.get_config()[name] is value


# ---- the model's switches ----------------------------------------------------------


def test_defaults_are_todays_swin():
    plain = build()
    explicit = build(shifted_windows=True, position_embedding="relative")
    set_random_weights(plain, scale=0.2)
    explicit.set_weights(plain.get_weights())
    assert [w.path for w in explicit.weights] == [w.path for w in plain.weights]
    x = images()
    np.testing.assert_array_equal(to_numpy(explicit(x)), to_numpy(plain(x)))
    assert [b.shift_size for b in blocks_of(plain)] == [(0, 0), (2, 2), (0, 0), (2, 2)]


def test_without_shifting_no_block_shifts_or_masks():
    model = build(shifted_windows=False)
    assert all(b.shift_size == (0, 0) and b.shift == (0, 0) for b in blocks_of(model))
    assert all(b.attention_mask is None for b in blocks_of(model))
    assert model.count_params() == build().count_params()


@pytest.mark.parametrize("shifted_windows", [False, True])
def test_without_shifting_windows_stay_apart_within_a_stage(shifted_windows):
    # One stage on an 8 x 8 map of 4 x 4 windows: change the pixels of the
    # top-left window (16 x 16 px) and only that window's tokens may change,
    # unless a shifted block lets information cross the window borders.
    model = build(depths=(2,), num_heads=(2,), include_top=False, pooling=None, shifted_windows=shifted_windows)
    set_random_weights(model, scale=0.2)
    x = images(batch=1)
    changed = x.copy()
    changed[:, :16, :16] += 0.5
    delta = np.abs(to_numpy(model(changed)) - to_numpy(model(x))).max(axis=-1)[0]
    outside = np.ones((8, 8), bool)
    outside[:4, :4] = False
    assert delta[:4, :4].min() > 1e-4
    if shifted_windows:
        assert delta[outside].max() > 1e-4
    else:
        assert delta[outside].max() == 0.0


# Table 4's position rows: (absolute embedding, relative bias, content term, parameters
# beyond Swin's), the parameters following from the definitions.
POSITION_ROWS = {
    "none": (False, False, True, -TABLES),
    "absolute": (True, False, True, ABSOLUTE - TABLES),
    "absolute+relative": (True, True, True, ABSOLUTE),
    "relative_without_content": (False, True, False, -QUERY_KEY),
    "relative": (False, True, True, 0),
}


def test_every_position_embedding_has_a_row():
    assert tuple(POSITION_ROWS) == SWIN_POSITION_EMBEDDINGS


@pytest.mark.parametrize(
    "position_embedding, absolute, bias, content, extra_parameters",
    [(name, *row) for name, row in POSITION_ROWS.items()],
)
def test_position_embedding_selects_the_terms(position_embedding, absolute, bias, content, extra_parameters):
    model = build(position_embedding=position_embedding)
    assert model.count_params() - build().count_params() == extra_parameters
    has_absolute = any(isinstance(layer, AbsolutePositionEmbedding) for layer in model.layers)
    assert has_absolute is absolute
    for block in blocks_of(model):
        assert block.use_relative_position_bias is bias and block.attention.use_relative_position_bias is bias
        assert block.use_content_term is content and block.attention.use_content_term is content


def test_absolute_plus_relative_is_the_reference_ape():
    # The same model, layers and weight names as `absolute_position_embedding=True`
    # (Microsoft's `ape`), so its checkpoints and the loader's resampling apply.
    ape = build(absolute_position_embedding=True)
    both = build(position_embedding="absolute+relative")
    assert [w.path for w in both.weights] == [w.path for w in ape.weights]
    set_random_weights(ape, scale=0.2)
    both.set_weights(ape.get_weights())
    x = images()
    np.testing.assert_array_equal(to_numpy(both(x)), to_numpy(ape(x)))
    redundant = build(position_embedding="absolute", absolute_position_embedding=True)
    assert redundant.count_params() == build(position_embedding="absolute").count_params()


def test_absolute_embedding_is_added_after_the_patch_embedding_then_dropped_out():
    model = build(position_embedding="absolute", dropout_rate=0.1)
    names = [layer.name for layer in model.layers]
    assert names.index("patch_embed") + 1 == names.index("absolute_position_embedding")
    assert names.index("absolute_position_embedding") + 1 == names.index("embedding_dropout")
    table = to_numpy(model.get_layer("absolute_position_embedding").position_embedding)
    assert table.shape == (8, 8, 16) and np.abs(table).max() <= 0.04 and 0.01 < table.std() < 0.03


def test_without_content_every_weight_gets_a_gradient():
    # No query or key projection is left without a use (and without a gradient);
    # the shifted blocks' masks broadcast over the batch.
    model = build(position_embedding="relative_without_content")
    set_random_weights(model, scale=0.2)
    weights = np.random.default_rng(3).normal(size=(2, 5)).astype("float32")
    gradients = parameter_gradients(model, images(), weights)
    assert not any("qkv" in path for path in gradients)
    assert all(np.abs(g).max() > 0 for g in gradients.values())


@pytest.mark.parametrize(
    "overrides",
    [
        dict(shifted_windows=False, position_embedding="relative_without_content"),
        dict(position_embedding="none"),
        dict(position_embedding="absolute", dropout_rate=0.1),
        dict(position_embedding="absolute+relative", shifted_windows=False),
    ],
)
def test_keras_file_round_trip(tmp_path, overrides):
    model = build(**overrides)
    set_random_weights(model, scale=0.2)
    x = images()
    expected = to_numpy(model(x))
    path = str(tmp_path / "swin_ablation.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    assert [w.path for w in restored.weights] == [w.path for w in model.weights]
    for original, loaded in zip(blocks_of(model), blocks_of(restored)):
        for key in ("shift_size", "use_relative_position_bias", "use_content_term"):
            assert getattr(loaded, key) == getattr(original, key)


def test_swin_variants_take_the_switches():
    # The variants pass their keyword arguments to `SwinTransformer`, which
    # checks them before building a layer: a wrong value is refused at once.
    with pytest.raises(ValueError, match=r"Received: shifted_windows='no'"):
        keras_vit.Swin_T(shifted_windows="no")
    with pytest.raises(ValueError, match=r"Received: position_embedding='ape'"):
        keras_vit.Swin_B(position_embedding="ape")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(shifted_windows="no"), r"`shifted_windows` must be True or False. Received: shifted_windows='no'"),
        (dict(shifted_windows=None), r"`shifted_windows` must be True or False"),
        (
            dict(position_embedding="abs"),
            (
                r"`position_embedding` must be one of \('none', 'absolute', 'absolute\+relative', "
                r"'relative_without_content', 'relative'\). Received: position_embedding='abs'"
            ),
        ),
        (dict(position_embedding=None), r"`position_embedding` must be one of .* Received: position_embedding=None"),
        (
            dict(position_embedding="none", absolute_position_embedding=True),
            r"`absolute_position_embedding=True` adds a position embedding.*position_embedding='none'",
        ),
        (dict(absolute_position_embedding="yes"), r"`absolute_position_embedding` must be True or False"),
    ],
)
def test_invalid_switches_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        build(**overrides)


def test_invalid_layer_terms_are_named():
    with pytest.raises(ValueError, match=r"at least one of its logit terms.*use_relative_position_bias=False"):
        WindowAttention(2, 4, use_relative_position_bias=False, use_content_term=False)
    with pytest.raises(ValueError, match=r"at least one of its logit terms"):
        SwinTransformerBlock(2, 4, use_relative_position_bias=False, use_content_term=False)
    with pytest.raises(ValueError, match=r"`use_content_term` must be True or False. Received: use_content_term=1"):
        SwinTransformerBlock(2, 4, use_content_term=1)
    with pytest.raises(ValueError, match=r"`use_relative_position_bias` must be True or False"):
        WindowAttention(2, 4, use_relative_position_bias="False")

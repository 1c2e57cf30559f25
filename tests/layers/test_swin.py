"""Swin layers against loop-level numpy references and timm 1.0.31's own modules."""

import math

import numpy as np
import pytest

import keras

from keras_vit.models.swin import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock, WindowAttention
from keras_vit.models.swin.window_attention import MASK_VALUE, shifted_window_mask, window_positions
from tests.testing import ATOL, check_layer, np_gelu, np_layer_norm, np_softmax, set_random_weights, to_numpy

# ---- numpy references, written from the paper and the reference code's loops ----


def np_relative_index(win_h, win_w):
    """Bias-table row of each (query, key) pair of a window, by loops."""
    coords = [(i, j) for i in range(win_h) for j in range(win_w)]
    index = np.zeros((len(coords), len(coords)), "int64")
    for a, (ya, xa) in enumerate(coords):
        for b, (yb, xb) in enumerate(coords):
            index[a, b] = (ya - yb + win_h - 1) * (2 * win_w - 1) + (xa - xb + win_w - 1)
    return index


def np_window_attention(x, w_qkv, b_qkv, w_out, b_out, table, window, num_heads, mask=None):
    """Swin Eq. 4 per window: softmax(q k^T / sqrt(d) + B [+ mask]) v, heads concatenated."""
    count, n, c = x.shape
    d = c // num_heads
    qkv = (x @ w_qkv + (0 if b_qkv is None else b_qkv)).reshape(count, n, 3, num_heads, d)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    bias = table[np_relative_index(*window)].transpose(2, 0, 1)  # heads, n, n
    logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias[None]
    if mask is not None:
        logits = logits + np.tile(mask, (count // mask.shape[0], 1, 1))[:, None]
    probs = np_softmax(logits)
    out = (probs @ v).transpose(0, 2, 1, 3).reshape(count, n, c)
    return out @ w_out + b_out, probs


def np_partition(x, win):
    b, h, w, c = x.shape
    windows = []
    for n in range(b):
        for i in range(0, h, win[0]):
            for j in range(0, w, win[1]):
                windows.append(x[n, i : i + win[0], j : j + win[1]].reshape(-1, c))
    return np.stack(windows)


def np_reverse(windows, win, b, h, w):
    x = np.zeros((b, h, w, windows.shape[-1]), windows.dtype)
    index = 0
    for n in range(b):
        for i in range(0, h, win[0]):
            for j in range(0, w, win[1]):
                x[n, i : i + win[0], j : j + win[1]] = windows[index].reshape(win[0], win[1], -1)
                index += 1
    return x


def np_shift_mask(hp, wp, win, shift):
    """The reference's img_mask construction: 3 x 3 slices numbered, then compared."""
    img = np.zeros((1, hp, wp, 1))
    count = 0
    for hs in (slice(0, -win[0]), slice(-win[0], -shift[0]), slice(-shift[0], None)):
        for ws in (slice(0, -win[1]), slice(-win[1], -shift[1]), slice(-shift[1], None)):
            img[:, hs, ws, :] = count
            count += 1
    windows = np_partition(img, win)[..., 0]
    diff = windows[:, None, :] - windows[:, :, None]
    return np.where(diff != 0, -100.0, 0.0)


def block_weights(block):
    a, m = block.attention, block.mlp
    names = dict(
        g1=block.norm1.gamma, b1=block.norm1.beta, w_qkv=a.qkv.kernel, b_qkv=a.qkv.bias,
        w_out=a.out.kernel, b_out=a.out.bias, table=a.relative_position_bias_table,
        g2=block.norm2.gamma, b2=block.norm2.beta, w1=m.fc1.kernel, c1=m.fc1.bias,
        w2=m.fc2.kernel, c2=m.fc2.bias,
    )
    return {k: to_numpy(v).astype("float64") for k, v in names.items()}


def np_swin_block(x, p, window, shift, num_heads, eps=1e-5):
    """Pad, shift, attend in windows, shift back on the padded size, crop; then the MLP."""
    b, h, w, c = x.shape
    # timm's _calc_window_shift: shrink the window to the map, no shift there.
    win = tuple(r if r <= m else m for r, m in zip((h, w), window))
    sft = tuple(0 if r <= m else s for r, m, s in zip((h, w), win, shift))
    hp, wp = -(-h // win[0]) * win[0], -(-w // win[1]) * win[1]
    y = np.zeros((b, hp, wp, c))
    y[:, :h, :w] = np_layer_norm(x, p["g1"], p["b1"], eps)
    y = np.roll(y, (-sft[0], -sft[1]), axis=(1, 2))
    mask = np_shift_mask(hp, wp, win, sft) if any(sft) else None
    out, _ = np_window_attention(
        np_partition(y, win), p["w_qkv"], p["b_qkv"], p["w_out"], p["b_out"], p["table"],
        win, num_heads, mask,
    )
    y = np.roll(np_reverse(out, win, b, hp, wp), sft, axis=(1, 2))[:, :h, :w]
    x = x + y
    hidden = np_gelu(np_layer_norm(x, p["g2"], p["b2"], eps) @ p["w1"] + p["c1"])
    return x + hidden @ p["w2"] + p["c2"]


def np_patch_merging(x, gamma, beta, kernel, eps=1e-5):
    b, h, w, c = x.shape
    x = np.pad(x, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))
    merged = np.concatenate(
        [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], axis=-1
    )
    return np_layer_norm(merged, gamma, beta, eps) @ kernel


# ---- layer contracts and numpy numerics -------------------------------------------


def test_patch_embedding_pads_and_matches_numpy():
    images = np.random.uniform(size=(2, 10, 13, 3)).astype("float32")
    out = check_layer(SwinPatchEmbedding, {"embed_dim": 8, "patch_size": 4}, images)
    assert out.shape == (2, 3, 4, 8)
    layer = SwinPatchEmbedding(8)
    layer(images)
    set_random_weights(layer)
    kernel, bias = to_numpy(layer.proj.kernel), to_numpy(layer.proj.bias)
    padded = np.pad(images.astype("float64"), ((0, 0), (0, 2), (0, 3), (0, 0)))
    expected = np.zeros((2, 3, 4, 8))
    for i in range(3):
        for j in range(4):
            patch = padded[:, 4 * i : 4 * i + 4, 4 * j : 4 * j + 4]
            expected[:, i, j] = np.einsum("bhwc,hwco->bo", patch, kernel) + bias
    expected = np_layer_norm(expected, to_numpy(layer.norm.gamma), to_numpy(layer.norm.beta), 1e-5)
    np.testing.assert_allclose(to_numpy(layer(images)), expected, atol=ATOL)
    assert check_layer(SwinPatchEmbedding, {"embed_dim": 8, "use_norm": False}, images).shape == (2, 3, 4, 8)


@pytest.mark.parametrize("masked", [False, True])
def test_window_attention_matches_numpy(masked):
    window, heads, windows_per_image = (2, 3), 2, 4
    x = np.random.normal(size=(2 * windows_per_image, 6, 8)).astype("float32")
    mask = None
    if masked:
        mask = np.where(np.random.uniform(size=(windows_per_image, 6, 6)) < 0.3, -100.0, 0.0)
        mask = mask.astype("float32")
    kwargs = {"num_heads": heads, "window_size": window, "attention_dropout_rate": 0.1, "dropout_rate": 0.1}
    check_layer(WindowAttention, kwargs, x, {"attention_mask": mask})
    layer = WindowAttention(heads, window)
    layer(x)
    set_random_weights(layer)
    assert tuple(layer.relative_position_bias_table.shape) == (3 * 5, heads)
    w = [to_numpy(v).astype("float64") for v in (layer.qkv.kernel, layer.qkv.bias, layer.out.kernel,
                                                  layer.out.bias, layer.relative_position_bias_table)]
    expected, probs = np_window_attention(x.astype("float64"), *w, window, heads, mask)
    output, scores = layer(x, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(scores), probs, atol=ATOL)
    np.testing.assert_allclose(to_numpy(layer(x, attention_mask=mask)), expected, atol=ATOL)


@pytest.mark.parametrize(
    "size, window, shift",
    [
        ((9, 13), 4, 2),  # padded to 12 x 16, shifted
        ((8, 12), 4, 2),  # multiple of the window, shifted
        ((9, 13), 4, 0),  # padded, not shifted
        ((3, 10), 4, 2),  # rows shrink the window to 3 without shift; columns pad and shift
    ],
)
def test_swin_block_matches_numpy(size, window, shift):
    x = np.random.normal(size=(2, *size, 8)).astype("float32")
    kwargs = {"num_heads": 2, "window_size": window, "shift_size": shift, "mlp_ratio": 1.5,
              "dropout_rate": 0.1, "drop_path_rate": 0.1}
    assert check_layer(SwinTransformerBlock, kwargs, x).shape == x.shape
    block = SwinTransformerBlock(2, window, shift, mlp_ratio=1.5)
    block(x)
    set_random_weights(block, scale=0.3)
    expected = np_swin_block(x.astype("float64"), block_weights(block), (window, window), (shift, shift), 2)
    np.testing.assert_allclose(to_numpy(block(x)), expected, atol=ATOL)
    output, scores = block(x, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    assert scores.shape[1] == 2 and scores.shape[0] % 2 == 0


def test_shifted_window_mask_leaves_negligible_weights_not_zeros():
    # MASK_VALUE = -100: after the float32 softmax a masked pair weighs about
    # exp(-100) ~ 3.7e-44 times the row's largest weight (a subnormal, or 0 where the
    # backend flushes subnormals), and the output is that of attention over each
    # token's own region alone.
    padded, window, shift, heads = (8, 8), (4, 4), (2, 2), 2
    mask = shifted_window_mask(padded, window, shift)
    assert set(np.unique(mask)) == {MASK_VALUE, 0.0}
    windows = mask.shape[0]
    x = np.random.default_rng(0).normal(size=(2 * windows, 16, 8)).astype("float32")
    layer = WindowAttention(heads, window)
    layer(x)
    set_random_weights(layer)
    output, scores = layer(x, attention_mask=mask, return_attention_scores=True)
    scores = to_numpy(scores)
    masked = np.broadcast_to(np.tile(mask, (2, 1, 1))[:, None] != 0, scores.shape)
    assert scores.dtype == np.float32 and masked.any()
    assert scores[masked].max() < np.finfo(np.float32).tiny
    w = [to_numpy(v).astype("float64") for v in (layer.qkv.kernel, layer.qkv.bias, layer.out.kernel,
                                                  layer.out.bias, layer.relative_position_bias_table)]
    own_region_only = np.where(mask != 0, -np.inf, 0.0)
    expected, _ = np_window_attention(x.astype("float64"), *w, window, heads, own_region_only)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)


def test_swin_block_dropout_acts_in_training_only():
    x = np.random.normal(size=(2, 8, 8, 8)).astype("float32")
    block = SwinTransformerBlock(2, 4, 2, dropout_rate=0.2, drop_path_rate=0.2)
    inference = to_numpy(block(x))
    np.testing.assert_array_equal(to_numpy(block(x)), inference)
    assert np.abs(to_numpy(block(x, training=True)) - inference).max() > 1e-3


@pytest.mark.parametrize("size", [(5, 7), (4, 6)])
def test_patch_merging_matches_numpy(size):
    x = np.random.normal(size=(2, *size, 6)).astype("float32")
    out = check_layer(PatchMerging, {}, x)
    assert out.shape == (2, (size[0] + 1) // 2, (size[1] + 1) // 2, 12)
    assert check_layer(PatchMerging, {"output_dim": 5}, x).shape[-1] == 5
    layer = PatchMerging()
    layer(x)
    set_random_weights(layer)
    w = [to_numpy(v).astype("float64") for v in (layer.norm.gamma, layer.norm.beta, layer.reduction.kernel)]
    np.testing.assert_allclose(to_numpy(layer(x)), np_patch_merging(x.astype("float64"), *w), atol=ATOL)


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (WindowAttention, {"num_heads": 0, "window_size": 4}, "Received: num_heads=0"),
        (WindowAttention, {"num_heads": 2, "window_size": (4, 0)}, r"Received: window_size=\(4, 0\)"),
        (WindowAttention, {"num_heads": 2, "window_size": 4, "dropout_rate": 1.0}, "Received: dropout_rate=1.0"),
        (SwinTransformerBlock, {"num_heads": 2, "window_size": 4, "shift_size": 4}, "Received: shift_size=4"),
        (SwinTransformerBlock, {"num_heads": 2, "shift_size": -1}, "Received: shift_size=-1"),
        (SwinTransformerBlock, {"num_heads": 2, "mlp_ratio": 0}, "Received: mlp_ratio=0"),
        (SwinTransformerBlock, {"num_heads": 2, "drop_path_rate": -0.1}, "Received: drop_path_rate=-0.1"),
        (PatchMerging, {"output_dim": 0}, "Received: output_dim=0"),
        (SwinPatchEmbedding, {"embed_dim": 8, "patch_size": "4"}, "Received: patch_size='4'"),
    ],
)
def test_arguments_are_validated(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


def test_shapes_are_validated_at_build():
    with pytest.raises(ValueError, match="static height and width"):
        SwinTransformerBlock(2, 4).build((None, None, 8, 8))
    with pytest.raises(ValueError, match="expects 16 tokens per window"):
        WindowAttention(2, 4).build((None, 9, 8))
    with pytest.raises(ValueError, match="divisible by `num_heads`"):
        WindowAttention(3, 4).build((None, 16, 8))


# ---- timm 1.0.31 as the reference ---------------------------------------------------


def _timm_modules():
    from runs.reference import timm, torch

    swin = timm.models.swin_transformer
    return torch, swin.SwinTransformerBlock, swin.PatchMerging


def _load_timm_block(block, state):
    """Copies a timm `SwinTransformerBlock` state dict into ours (the converter's key map)."""
    a, m = block.attention, block.mlp
    targets = {
        "norm1.weight": block.norm1.gamma, "norm1.bias": block.norm1.beta,
        "attn.relative_position_bias_table": a.relative_position_bias_table,
        "attn.qkv.weight": a.qkv.kernel, "attn.qkv.bias": a.qkv.bias,
        "attn.proj.weight": a.out.kernel, "attn.proj.bias": a.out.bias,
        "norm2.weight": block.norm2.gamma, "norm2.bias": block.norm2.beta,
        "mlp.fc1.weight": m.fc1.kernel, "mlp.fc1.bias": m.fc1.bias,
        "mlp.fc2.weight": m.fc2.kernel, "mlp.fc2.bias": m.fc2.bias,
    }
    assert set(state) == set(targets), set(state) ^ set(targets)
    for key, variable in targets.items():
        value = state[key].detach().numpy()
        variable.assign(value.T if key.endswith(".weight") and value.ndim == 2 else value)


def _randomize_torch(module, torch, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=generator) * 0.6 - 0.3)


@pytest.mark.parametrize(
    "size, shift",
    [
        ((8, 12), 2),  # multiples of the window, shifted
        ((8, 12), 0),  # multiples of the window
        ((9, 13), 0),  # padded to 12 x 16
        ((3, 8), 2),  # rows shrink the window to 3 without shift, columns shifted
        ((3, 3), 2),  # the whole map is one window, no shift
    ],
)
def test_swin_block_matches_timm(size, shift):
    torch, TimmBlock, _ = _timm_modules()
    dim, heads, window = 8, 2, 4
    reference = TimmBlock(dim, size, num_heads=heads, window_size=window, shift_size=shift, mlp_ratio=1.5)
    _randomize_torch(reference, torch, seed=1)
    reference.eval()
    x = np.random.normal(size=(2, *size, dim)).astype("float32")
    block = SwinTransformerBlock(heads, window, shift, mlp_ratio=1.5)
    block(x)
    _load_timm_block(block, reference.state_dict())
    assert block.window == reference.window_size and block.shift == reference.shift_size
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    assert np.abs(to_numpy(block(x)) - expected).max() <= 1e-5


@pytest.mark.parametrize("size", [(8, 12), (5, 7)])
def test_patch_merging_matches_timm(size):
    torch, _, TimmMerging = _timm_modules()
    reference = TimmMerging(6)
    _randomize_torch(reference, torch, seed=2)
    x = np.random.normal(size=(2, *size, 6)).astype("float32")
    layer = PatchMerging()
    layer(x)
    state = reference.state_dict()
    # timm key -> ours: norm.weight -> norm.gamma, norm.bias -> norm.beta,
    # reduction.weight (2C, 4C) -> reduction.kernel (4C, 2C), transposed.
    layer.norm.gamma.assign(state["norm.weight"].numpy())
    layer.norm.beta.assign(state["norm.bias"].numpy())
    layer.reduction.kernel.assign(state["reduction.weight"].numpy().T)
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    assert np.abs(to_numpy(layer(x)) - expected).max() <= 1e-5


def test_layers_compose_in_a_functional_model_and_save(tmp_path):
    inputs = keras.Input((18, 18, 3))
    x = SwinPatchEmbedding(8)(inputs)  # 5 x 5
    x = SwinTransformerBlock(2, 4, 0)(x)
    x = SwinTransformerBlock(2, 4, 2)(x)
    x = PatchMerging()(x)  # 3 x 3
    model = keras.Model(inputs, x)
    images = np.random.uniform(size=(2, 18, 18, 3)).astype("float32")
    output = to_numpy(model(images))
    assert output.shape == (2, 3, 3, 16)
    path = str(tmp_path / "swin.keras")
    model.save(path)
    np.testing.assert_array_equal(to_numpy(keras.saving.load_model(path)(images)), output)
    # One training step: gradients flow through the roll, pads, crops and the bias gather.
    model.compile("sgd", "mse")
    before = to_numpy(model.layers[2].attention.relative_position_bias_table)
    model.fit(images, np.zeros_like(output), batch_size=2, epochs=1, verbose=0)
    assert np.abs(to_numpy(model.layers[2].attention.relative_position_bias_table) - before).max() > 0


def test_swin_block_runs_in_mixed_bfloat16():
    keras.config.set_dtype_policy("mixed_bfloat16")
    x = np.random.normal(size=(2, 9, 13, 8)).astype("float32")
    block = SwinTransformerBlock(2, 4, 2)
    output, scores = block(x, return_attention_scores=True)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    merged = PatchMerging()(output)
    assert tuple(merged.shape) == (2, 5, 7, 16)


@pytest.mark.parametrize("padded,window,shift", [((8, 12), (4, 4), (0, 0)), ((12, 16), (4, 4), (2, 2)),
                                                 ((6, 9), (3, 3), (1, 2))])
def test_window_positions_follow_the_tokens_through_shift_and_partition(padded, window, shift):
    # Label every map position with its flat index, shift and partition it as the
    # block does: each window token carries the position it came from.
    labels = np.arange(padded[0] * padded[1]).reshape(1, *padded, 1)
    rolled = np.roll(labels, (-shift[0], -shift[1]), axis=(1, 2))
    expected = np_partition(rolled, window)[..., 0]
    np.testing.assert_array_equal(window_positions(padded, window, shift), expected)

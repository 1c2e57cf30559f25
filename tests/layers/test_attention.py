"""Self-attention (ViT App. A) and GPSA (ConViT Eq. 5-7) against numpy."""

import math

import numpy as np
import pytest

from keras_vit.layers import MultiHeadSelfAttention
from keras_vit.models.convit import GPSA
from keras_vit.models.convit.gpsa import local_init_kernel, relative_offsets
from tests.testing import ATOL, check_layer, np_softmax, set_random_weights, to_numpy


def np_self_attention(x, w_qkv, b_qkv, w_out, b_out, num_heads):
    """ViT Eq. 5-8 head by head: [q, k, v] = z U_qkv, A = softmax(q k^T / sqrt(D_h))."""
    width = x.shape[-1]
    head_dim = width // num_heads
    heads, probs = [], []
    for h in range(num_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        q = x @ w_qkv[:, :width][:, cols] + b_qkv[:width][cols]
        k = x @ w_qkv[:, width : 2 * width][:, cols] + b_qkv[width : 2 * width][cols]
        v = x @ w_qkv[:, 2 * width :][:, cols] + b_qkv[2 * width :][cols]
        a = np_softmax(q @ k.transpose(0, 2, 1) / math.sqrt(head_dim))
        heads.append(a @ v)
        probs.append(a)
    return np.concatenate(heads, -1) @ w_out + b_out, np.stack(probs, 1)


def np_gpsa(x, w_qk, w_v, w_out, b_out, w_pos, b_pos, gating, grid, num_heads):
    """ConViT Eq. 6-7 head by head, with r_ij built by explicit loops."""
    rows, cols = grid
    n = rows * cols
    r = np.zeros((n, n, 3))
    for i in range(n):
        for j in range(n):
            dx = j % cols - i % cols
            dy = j // cols - i // cols
            r[i, j] = (dx, dy, dx * dx + dy * dy)
    width = x.shape[-1]
    head_dim = width // num_heads
    heads, probs = [], []
    for h in range(num_heads):
        c = slice(h * head_dim, (h + 1) * head_dim)
        q = x @ w_qk[:, :width][:, c]
        k = x @ w_qk[:, width:][:, c]
        content = np_softmax(q @ k.transpose(0, 2, 1) / math.sqrt(head_dim))
        position = np_softmax(r @ w_pos[:, h] + b_pos[h])
        gate = 1.0 / (1.0 + np.exp(-gating[h]))
        a = (1 - gate) * content + gate * position
        a = a / a.sum(-1, keepdims=True)
        heads.append(a @ (x @ w_v[:, c]))
        probs.append(a)
    return np.concatenate(heads, -1) @ w_out + b_out, np.stack(probs, 1)


def test_self_attention_matches_numpy_and_explicit_path_agrees():
    x = np.random.normal(size=(2, 5, 12)).astype("float32")
    check_layer(MultiHeadSelfAttention, {"num_heads": 3}, x)
    layer = MultiHeadSelfAttention(num_heads=3)
    layer(x)
    set_random_weights(layer)
    weights = [to_numpy(w) for w in (layer.qkv.kernel, layer.qkv.bias, layer.out.kernel, layer.out.bias)]
    expected, expected_probs = np_self_attention(x.astype("float64"), *weights, num_heads=3)

    fused = to_numpy(layer(x))
    explicit, probs = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(fused, expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(explicit), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(probs), expected_probs, atol=ATOL)


def test_self_attention_without_bias_has_no_bias_weight():
    layer = MultiHeadSelfAttention(num_heads=2, qkv_bias=False)
    layer(np.zeros((1, 3, 4), "float32"))
    assert layer.qkv.bias is None
    assert layer.count_params() == 4 * 12 + 4 * 4 + 4


def test_fused_qkv_is_initialized_like_three_separate_projections():
    # Xavier on each D x D block: limit sqrt(6 / 2D), not sqrt(6 / 4D) of the fused kernel.
    layer = MultiHeadSelfAttention(num_heads=4)
    layer(np.zeros((1, 2, 256), "float32"))
    kernel = to_numpy(layer.qkv.kernel)
    limit = math.sqrt(6.0 / 512)
    assert kernel.max() <= limit and kernel.max() > 0.95 * limit
    assert kernel.std() == pytest.approx(limit / math.sqrt(3), rel=0.02)


def test_attention_rejects_width_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"divisible by `num_heads`. Received: width=10, num_heads=3"):
        MultiHeadSelfAttention(num_heads=3)(np.zeros((1, 4, 10), "float32"))


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_attention_rejects_bad_head_count(bad):
    with pytest.raises(ValueError, match=f"`num_heads` must be a positive integer. Received: num_heads={bad}"):
        MultiHeadSelfAttention(num_heads=bad)


def test_attention_rejects_bad_dropout():
    with pytest.raises(ValueError, match=r"in \[0, 1\). Received: attention_dropout_rate=1.5"):
        MultiHeadSelfAttention(num_heads=2, attention_dropout_rate=1.5)


def test_relative_offsets_of_non_square_grid():
    r = relative_offsets((2, 3))
    # Token 1 is (row 0, col 1); token 5 is (row 1, col 2): dx = 1, dy = 1.
    np.testing.assert_array_equal(r[1, 5], [1, 1, 2])
    np.testing.assert_array_equal(r[5, 1], [-1, -1, 2])
    np.testing.assert_array_equal(np.diagonal(r, axis1=0, axis2=1), 0)


@pytest.mark.parametrize("grid,num_heads,local", [((3, 3), 4, True), ((2, 4), 9, True), ((3, 2), 6, False)])
def test_gpsa_matches_numpy(grid, num_heads, local):
    width = 6 * num_heads
    x = np.random.normal(size=(2, grid[0] * grid[1], width)).astype("float32")
    kwargs = {"num_heads": num_heads, "grid_size": grid, "use_local_init": local}
    check_layer(GPSA, kwargs, x)
    layer = GPSA(**kwargs)
    layer(x)
    set_random_weights(layer, scale=0.3)
    weights = [
        to_numpy(w)
        for w in (
            layer.qk.kernel, layer.v.kernel, layer.out.kernel, layer.out.bias,
            layer.pos_proj.kernel, layer.pos_proj.bias, layer.gating,
        )
    ]
    expected, expected_probs = np_gpsa(x.astype("float64"), *weights, grid=grid, num_heads=num_heads)
    output, probs = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(probs), expected_probs, atol=ATOL)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=ATOL)


def test_gpsa_local_init_attends_like_a_convolution():
    # ConViT Sec. 3: with a large locality strength, head h of a 3x3 "kernel"
    # puts most of its attention on the patch at its offset Delta_h.
    grid, num_heads, width = (6, 7), 9, 36
    layer = GPSA(num_heads=num_heads, grid_size=grid, locality_strength=10.0)
    x = np.random.normal(size=(2, 42, width)).astype("float32")
    _, probs = layer(x, return_attention_scores=True)
    probs = to_numpy(probs)
    np.testing.assert_array_equal(to_numpy(layer.v.kernel), np.eye(width))
    np.testing.assert_array_equal(to_numpy(layer.gating), np.ones(num_heads))
    rows, cols = grid
    for h in range(num_heads):
        dx, dy = h // 3 - 1, h % 3 - 1
        for qy in range(1, rows - 1):
            for qx in range(1, cols - 1):
                i, j = qy * cols + qx, (qy + dy) * cols + (qx + dx)
                assert probs[:, h, i].argmax(-1).tolist() == [j, j]
                # sigma(1) = 0.73 of the mass is positional, almost all of it on j.
                assert (probs[:, h, i, j] > 0.7).all()


def test_local_init_kernel_peaks_at_head_offsets():
    kernel = local_init_kernel(16, 2.0)
    offsets = relative_offsets((9, 9))[40]  # from the centre of a 9x9 grid
    centre = 1.5
    for h in range(16):
        best = np.argmax(offsets @ kernel[:, h])
        # A 4x4 kernel's centres sit between patches; the peak is the rounded centre.
        dx, dy = offsets[best, 0], offsets[best, 1]
        assert abs(dx - (h // 4 - centre)) == 0.5 and abs(dy - (h % 4 - centre)) == 0.5


def test_gpsa_needs_square_head_count_for_local_init():
    with pytest.raises(ValueError, match=r"perfect-square number of heads.*Received: num_heads=6"):
        GPSA(num_heads=6, grid_size=3)
    GPSA(num_heads=6, grid_size=3, use_local_init=False)


def test_gpsa_rejects_tokens_of_another_grid():
    with pytest.raises(ValueError, match=r"\(3, 3\) grid \(9 tokens\) but the input has 10 tokens"):
        GPSA(num_heads=4, grid_size=3)(np.zeros((1, 10, 8), "float32"))

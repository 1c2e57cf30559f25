"""TransformerBlock (ViT Eq. 2-3), MLPBlock and StochasticDepth against numpy."""

import math

import numpy as np
import pytest

import keras
from keras import ops

from keras_vit.layers import MLPBlock, StochasticDepth, TransformerBlock
from keras_vit.models.swin import SwinTransformerBlock
from keras_vit.layers.mlp import gelu
from keras_vit.models.convit import GPSABlock
from tests.layers.test_attention import np_gpsa, np_self_attention
from tests.testing import (
    ATOL,
    check_layer,
    np_gelu,
    np_layer_norm,
    parameter_gradients,
    set_random_weights,
    to_numpy,
)


def np_mlp(x, w1, b1, w2, b2):
    return np_gelu(x @ w1 + b1) @ w2 + b2


def test_gelu_matches_exact_erf_form_and_its_derivative():
    # Values across the range and into both tails, where the erf form loses no
    # more than float32's absolute precision (as PyTorch's nn.GELU).
    x = np.concatenate([np.linspace(-12.0, 12.0, 4001), [-40.0, -5.5, 0.0, 5.5, 40.0]]).astype("float32")
    np.testing.assert_allclose(to_numpy(gelu(ops.convert_to_tensor(x))), np_gelu(x.astype("float64")),
                               rtol=1e-6, atol=2e-6)
    # d/dx [x Phi(x)] = Phi(x) + x phi(x), through the backend's autodiff.
    x64 = x.astype("float64")
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x64 / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * x64**2) / math.sqrt(2.0 * math.pi)
    expected = cdf + x64 * pdf
    np.testing.assert_allclose(_grad(gelu, x), expected, rtol=1e-5, atol=2e-6)


def _grad(fn, x):
    """Elementwise derivative of `fn` at `x` with the active backend's autodiff."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(fn(x))
        return tape.gradient(y, x).numpy()
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(lambda v: fn(v).sum())(x))
    raise ValueError(f"No gradient helper for this backend. Received: backend={backend}")


def test_mlp_block_matches_numpy():
    x = np.random.normal(size=(2, 3, 8)).astype("float32")
    check_layer(MLPBlock, {"mlp_dim": 16, "dropout_rate": 0.1}, x)
    layer = MLPBlock(16)
    layer(x)
    set_random_weights(layer)
    w = [to_numpy(v) for v in (layer.fc1.kernel, layer.fc1.bias, layer.fc2.kernel, layer.fc2.bias)]
    np.testing.assert_allclose(to_numpy(layer(x)), np_mlp(x.astype("float64"), *w), atol=ATOL)


def np_block(block, x, attention):
    """z' = z + MSA(LN(z)); z'' = z' + MLP(LN(z')) with the block's weights."""
    def ln(norm, z):
        return np_layer_norm(z, to_numpy(norm.gamma), to_numpy(norm.beta), 1e-6)

    y = x + attention(ln(block.norm1, x))
    mlp = block.mlp
    weights = [to_numpy(v) for v in (mlp.fc1.kernel, mlp.fc1.bias, mlp.fc2.kernel, mlp.fc2.bias)]
    return y + np_mlp(ln(block.norm2, y), *weights)


def test_transformer_block_matches_numpy():
    x = np.random.normal(size=(2, 5, 12)).astype("float32")
    kwargs = {"num_heads": 3, "mlp_dim": 20, "dropout_rate": 0.1, "drop_path_rate": 0.2}
    check_layer(TransformerBlock, kwargs, x)
    block = TransformerBlock(**kwargs)
    block(x)
    set_random_weights(block, scale=0.3)
    attn = block.attention
    w = [to_numpy(v) for v in (attn.qkv.kernel, attn.qkv.bias, attn.out.kernel, attn.out.bias)]
    expected = np_block(block, x.astype("float64"), lambda z: np_self_attention(z, *w, num_heads=3)[0])
    np.testing.assert_allclose(to_numpy(block(x)), expected, atol=ATOL)
    output, scores = block(x, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    assert tuple(scores.shape) == (2, 3, 5, 5)
    # Dropout and stochastic depth act in training only.
    assert np.abs(to_numpy(block(x, training=True)) - expected).max() > 1e-3
    # Rematerialization recomputes in the backward pass; the forward is the same.
    # (It refuses dropout, whose masks the recomputation would draw anew.)
    deterministic = {**kwargs, "dropout_rate": 0.0}
    remat = TransformerBlock(**deterministic, remat=True)
    remat(x)
    remat.set_weights(block.get_weights())
    np.testing.assert_allclose(to_numpy(remat(x)), expected, atol=ATOL)
    assert check_layer(TransformerBlock, {**deterministic, "remat": True}, x).shape == x.shape


def test_gpsa_block_matches_numpy():
    x = np.random.normal(size=(2, 6, 16)).astype("float32")
    kwargs = {"num_heads": 4, "mlp_dim": 8, "grid_size": (2, 3), "qkv_bias": False}
    check_layer(GPSABlock, kwargs, x)
    block = GPSABlock(**kwargs)
    block(x)
    set_random_weights(block, scale=0.3)
    a = block.attention
    w = [to_numpy(v) for v in (a.qk.kernel, a.v.kernel, a.out.kernel, a.out.bias,
                              a.pos_proj.kernel, a.pos_proj.bias, a.gating)]
    expected = np_block(
        block, x.astype("float64"), lambda z: np_gpsa(z, *w, grid=(2, 3), num_heads=4)[0]
    )
    np.testing.assert_allclose(to_numpy(block(x)), expected, atol=ATOL)


def test_gpsa_block_needs_grid_size():
    with pytest.raises(ValueError, match="`grid_size`.*Received: grid_size=None"):
        GPSABlock(num_heads=4, mlp_dim=8, grid_size=None)


def test_gpsa_block_rejects_non_square_heads_at_construction():
    with pytest.raises(ValueError, match="perfect-square number of heads.*num_heads=3"):
        GPSABlock(num_heads=3, mlp_dim=8, grid_size=(2, 2))


def test_stochastic_depth_drops_whole_examples_and_rescales():
    x = np.ones((4000, 3, 2), "float32")
    check_layer(StochasticDepth, {"rate": 0.25, "seed": 1}, x)
    layer = StochasticDepth(0.25, seed=1)
    np.testing.assert_array_equal(to_numpy(layer(x)), x)
    out = to_numpy(layer(x, training=True))
    per_example = out.reshape(4000, -1)
    # Every example is either dropped (0) or kept and scaled by 1 / (1 - rate).
    np.testing.assert_allclose(np.unique(per_example), [0.0, 1 / 0.75], rtol=1e-6)
    assert (per_example.min(1) == per_example.max(1)).all()
    assert per_example[:, 0].mean() == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_stochastic_depth_rejects_bad_rate(rate):
    with pytest.raises(ValueError, match=rf"`rate` must be a float in \[0, 1\). Received: rate={rate}"):
        StochasticDepth(rate)


# ---- remat with stochastic depth (`call_with_remat`), shared by both blocks -------------

REMAT_BLOCKS = {
    "vit": (TransformerBlock, dict(num_heads=3, mlp_dim=20), (8, 5, 12)),
    "gpsa": (GPSABlock, dict(num_heads=4, mlp_dim=8, grid_size=(2, 3)), (8, 6, 16)),
    "swin": (SwinTransformerBlock, dict(num_heads=2, window_size=4, shift_size=2), (8, 6, 10, 8)),
}


@pytest.mark.parametrize("block", sorted(REMAT_BLOCKS))
def test_remat_with_stochastic_depth_matches_the_plain_block_in_training(block):
    cls, kwargs, shape = REMAT_BLOCKS[block]
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    weights = np.random.default_rng(1).normal(size=shape).astype("float32")
    results = []
    for remat in (False, True):
        # The same seed: the same initial weights and stochastic-depth seed.
        keras.utils.set_random_seed(5)
        layer = cls(**kwargs, drop_path_rate=0.5, remat=remat, name="block")
        layer(x)
        set_random_weights(layer, scale=0.3)
        outputs = to_numpy(layer(x, training=True))
        results.append((outputs, parameter_gradients(layer, x, weights, training=True)))
    (plain, plain_grads), (remat, remat_grads) = results
    # Some examples lose a branch (rate 0.5 over 8 examples and 2 branches): the masks are in play.
    inference = to_numpy(layer(x))
    assert (np.abs(remat - inference).reshape(len(x), -1).max(1) > 1e-3).any()
    np.testing.assert_allclose(remat, plain, atol=1e-6)
    assert plain_grads.keys() == remat_grads.keys()
    for path, gradient in plain_grads.items():
        np.testing.assert_allclose(remat_grads[path], gradient, rtol=1e-5, atol=1e-5, err_msg=path)


@pytest.mark.parametrize("block", ["vit", "swin"])
@pytest.mark.parametrize("rate", ["dropout_rate", "attention_dropout_rate"])
def test_remat_refuses_dropout_naming_it(block, rate):
    cls, kwargs, _ = REMAT_BLOCKS[block]
    with pytest.raises(ValueError, match=rf"^`remat=True` supports stochastic depth but not dropout.*"
                                         rf"Received: remat=True, {rate}=0.1$"):
        cls(**kwargs, remat=True, drop_path_rate=0.1, **{rate: 0.1})
    cls(**kwargs, remat=True, drop_path_rate=0.1)  # stochastic depth alone is fine


@pytest.mark.parametrize("block", ["vit", "swin"])
def test_remat_must_be_a_bool(block):
    cls, kwargs, _ = REMAT_BLOCKS[block]
    with pytest.raises(ValueError, match=r"`remat` must be True or False. Received: remat='yes'"):
        cls(**kwargs, remat="yes")

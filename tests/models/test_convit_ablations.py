"""ConViT's ablations (Table 3, Fig. 8 and 12) as builder switches."""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import TransformerBlock
from keras_vit.models.convit import GPSA, ConViT, GPSABlock
from keras_vit.models.convit.gpsa import local_init_kernel
from keras_vit.models.variants import TESTING_VARIANTS
from tests.testing import ATOL, check_layer, np_softmax, to_numpy

# image 32, patch 8 (a 4x4 grid), width 32, 4 heads, 3 blocks of which 2 GPSA.
TINY = TESTING_VARIANTS["convit"][1]
GPSA_BLOCKS = ("encoderblock_0", "encoderblock_1")

# Table 3's rows as builder arguments; (a) is the default.
ROWS = {
    "b": {"train_gating": False},
    "c": {"locality_strength": 0.0},
    "d": {"train_gating": False, "locality_strength": 0.0},
    "e": {"num_gpsa_layers": 0},
    "f": {"train_gpsa_attention": False, "locality_strength": 0.0},
    "g": {"train_gpsa_attention": False},
}


def build(**overrides):
    return ConViT(**{**TINY, **overrides})


def images(batch=4, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (batch, 32, 32, 3)).astype("float32")


def weights_by_path(model):
    return {v.path: to_numpy(v).copy() for v in model.weights}


def train_one_step(model):
    """One SGD step; the zero-initialized head is randomized first so that
    every layer below it gets a gradient."""
    head = model.get_layer("head")
    rng = np.random.default_rng(1)
    head.kernel.assign(rng.normal(0, 0.5, head.kernel.shape).astype("float32"))
    before = weights_by_path(model)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.train_on_batch(images(), np.arange(4) % 10)
    after = weights_by_path(model)
    return {path for path in before if not np.array_equal(before[path], after[path])}


def gpsa_attention_paths(model):
    return {f"{block}/attention/{rest}" for block in GPSA_BLOCKS
            for rest in ("gating", "qk/kernel", "v/kernel", "out/kernel", "out/bias", "pos_proj/kernel",
                         "pos_proj/bias")}


def test_defaults_keep_todays_model():
    default = build()
    explicit = build(train_gating=True, train_gpsa_attention=True)
    assert default.get_config() == explicit.get_config()
    assert [type(layer) for layer in default.layers if layer.name.startswith("encoderblock_")] == [
        GPSABlock, GPSABlock, TransformerBlock
    ]
    assert default.non_trainable_weights == []
    for layer in default.layers:
        if isinstance(layer, GPSABlock):
            assert (layer.train_gating, layer.train_gpsa_attention) == (True, True)
    for name in GPSA_BLOCKS:
        np.testing.assert_array_equal(to_numpy(default.get_layer(name).attention.gating), np.ones(4))


@pytest.mark.parametrize("row", sorted(ROWS))
def test_every_row_of_table_3_builds(row):
    model = build(**ROWS[row])
    assert np.isfinite(to_numpy(model(images(2)))).all()
    gpsa = [layer for layer in model.layers if isinstance(layer, GPSABlock)]
    assert len(gpsa) == (0 if row == "e" else 2)
    for block in gpsa:
        assert block.use_local_init == (row not in ("c", "d", "f"))
        assert block.attention.gating.trainable == (row not in ("b", "d", "f", "g"))
        assert block.attention.qk.kernel.trainable == (row not in ("f", "g"))


def test_frozen_gating_attends_half_to_content_half_to_position():
    # Table 3 (b), footnote 3: lambda_h = 0, so sigma = 1/2 and the mixture of
    # Eq. 7 already sums to one.
    grid, num_heads, width = (2, 3), 4, 16
    x = np.random.default_rng(0).normal(size=(2, 6, width)).astype("float32")
    check_layer(GPSA, {"num_heads": num_heads, "grid_size": grid, "train_gating": False}, x)
    layer = GPSA(num_heads=num_heads, grid_size=grid, train_gating=False)
    layer(x)
    assert layer.non_trainable_weights == [layer.gating]
    np.testing.assert_array_equal(to_numpy(layer.gating), np.zeros(num_heads))
    rng = np.random.default_rng(1)
    for variable in layer.trainable_weights:
        variable.assign(rng.uniform(-0.3, 0.3, variable.shape).astype("float32"))
    w_qk, w_pos, b_pos = (to_numpy(w) for w in (layer.qk.kernel, layer.pos_proj.kernel, layer.pos_proj.bias))

    head_dim = width // num_heads
    cells = [(row, col) for row in range(grid[0]) for col in range(grid[1])]
    r = np.array([[(cj - ci, rj - ri, (cj - ci) ** 2 + (rj - ri) ** 2) for rj, cj in cells] for ri, ci in cells])
    expected = []
    for h in range(num_heads):
        q = x @ w_qk[:, h * head_dim:(h + 1) * head_dim]
        k = x @ w_qk[:, width + h * head_dim:width + (h + 1) * head_dim]
        content = np_softmax(q @ k.transpose(0, 2, 1) / math.sqrt(head_dim))
        position = np_softmax(r @ w_pos[:, h] + b_pos[h])
        expected.append(0.5 * content + 0.5 * position)
    _, probs = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(probs), np.stack(expected, 1), atol=ATOL)


@pytest.mark.parametrize("row", ["b", "f", "g"])
def test_frozen_weights_do_not_change_in_a_training_step(row):
    model = build(**ROWS[row])
    changed = train_one_step(model)
    gating = {f"{b}/attention/gating" for b in GPSA_BLOCKS}
    frozen = gpsa_attention_paths(model) if "train_gpsa_attention" in ROWS[row] else gating
    assert {v.path for v in model.non_trainable_weights} == frozen
    assert not changed & frozen
    # Everything else trains: the GPSA blocks' norms and MLPs, the SA block, the
    # stem. Not v_pos's bias: it shifts all of a head's positional logits alike,
    # which the softmax cancels, so its gradient is zero but for rounding.
    shift_invariant = {f"{b}/attention/pos_proj/bias" for b in GPSA_BLOCKS}
    assert changed | shift_invariant == {v.path for v in model.weights} - frozen | shift_invariant
    for name in GPSA_BLOCKS:
        attention = model.get_layer(name).attention
        # (b) at lambda = 0; (f) and (g) keep the initial lambda = 1.
        np.testing.assert_array_equal(to_numpy(attention.gating), np.full(4, float(row != "b")))
        if row == "g":
            # Frozen at the convolutional initialization: W_val = I, v_pos of Eq. 5.
            np.testing.assert_array_equal(to_numpy(attention.v.kernel), np.eye(32))
            np.testing.assert_array_equal(to_numpy(attention.pos_proj.kernel), local_init_kernel(4, 1.0))


def test_zero_locality_strength_removes_the_convolutional_initialization():
    # Table 3 (c): W_val and v_pos start random, like the reference's use_local_init=False.
    convolutional, random = build(), build(**ROWS["c"])
    for name in GPSA_BLOCKS:
        conv, rand = convolutional.get_layer(name).attention, random.get_layer(name).attention
        np.testing.assert_array_equal(to_numpy(conv.v.kernel), np.eye(32))
        np.testing.assert_array_equal(to_numpy(conv.pos_proj.kernel), local_init_kernel(4, 1.0))
        assert not rand.use_local_init
        assert np.abs(to_numpy(rand.v.kernel) - np.eye(32)).max() > 0.5
        assert np.abs(to_numpy(rand.pos_proj.kernel)).max() < 0.1  # truncated normal, std 0.02


def test_no_gpsa_is_a_deit_of_the_same_size():
    # Table 3 (e): the reference's local_up_to_layer=0. The class token joins before
    # the first block without a position embedding, and q/k/v have no bias.
    model = build(**ROWS["e"])
    names = [layer.name for layer in model.layers]
    assert names.index("class_token") == names.index("embedding_dropout") + 1 == names.index("encoderblock_0") - 1
    assert not any(isinstance(model.get_layer(f"encoderblock_{i}"), GPSABlock) for i in range(3))
    assert not model.get_layer("class_token").use_position_embedding
    sizes = {k: v for k, v in TINY.items() if k != "num_gpsa_layers"}
    deit = keras_vit.VisionTransformer(**sizes, initialization="deit", preprocessing="imagenet")
    width, depth = TINY["hidden_size"], TINY["num_layers"]
    # A DeiT's q/k/v biases and its class token's position embedding.
    assert deit.count_params() - model.count_params() == depth * 3 * width + width


@pytest.mark.parametrize("num_gpsa_layers", [0, 1, 2])
def test_number_of_gpsa_blocks(num_gpsa_layers):
    # Fig. 8 (left) and 12 (left).
    model = build(num_gpsa_layers=num_gpsa_layers, train_gating=False)
    blocks = [model.get_layer(f"encoderblock_{i}") for i in range(3)]
    # The switches reach every GPSA block; the others are plain blocks, which have none.
    assert [type(b) for b in blocks] == [GPSABlock if i < num_gpsa_layers else TransformerBlock for i in range(3)]
    assert [b.train_gating for b in blocks[:num_gpsa_layers]] == [False] * num_gpsa_layers
    names = [layer.name for layer in model.layers]
    assert names.index("class_token") == names.index(f"encoderblock_{num_gpsa_layers}") - 1


def test_switches_survive_a_keras_file_round_trip(tmp_path):
    model = build(train_gating=False, train_gpsa_attention=False)
    x = images(2)
    expected = to_numpy(model(x))
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    for name in GPSA_BLOCKS:
        block = restored.get_layer(name)
        assert type(block) is GPSABlock
        assert (block.train_gating, block.train_gpsa_attention) == (False, False)
    frozen = gpsa_attention_paths(model)
    assert {v.path for v in restored.non_trainable_weights} == frozen
    assert not train_one_step(restored) & frozen


def test_block_switches_config_round_trip():
    x = np.random.default_rng(0).normal(size=(2, 6, 16)).astype("float32")
    kwargs = {"num_heads": 4, "mlp_dim": 8, "grid_size": (2, 3), "qkv_bias": False,
              "train_gating": False, "train_gpsa_attention": False}
    check_layer(GPSABlock, kwargs, x)
    block = GPSABlock(**kwargs)
    block(x)
    assert (block.get_config()["train_gating"], block.get_config()["train_gpsa_attention"]) == (False, False)
    assert all("/attention/" in v.path for v in block.non_trainable_weights)
    # gating, qk and v kernels (no bias), out and pos_proj kernels and biases.
    assert len(block.non_trainable_weights) == 7
    assert not any("/attention/" in v.path for v in block.trainable_weights)


def test_variant_builders_take_the_switches():
    model = keras_vit.ConViT_Ti(
        image_size=32, num_layers=2, num_gpsa_layers=1, num_classes=10, train_gpsa_attention=False
    )
    block = model.get_layer("encoderblock_0")
    assert type(block) is GPSABlock and not block.train_gpsa_attention
    assert {v.path.split("/")[1] for v in model.non_trainable_weights} == {"attention"}


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"train_gating": "no"}, r"`train_gating` must be True or False. Received: train_gating='no'"),
        ({"train_gating": 0}, r"`train_gating` must be True or False. Received: train_gating=0"),
        (
            {"train_gpsa_attention": None},
            r"`train_gpsa_attention` must be True or False. Received: train_gpsa_attention=None",
        ),
    ],
)
def test_bad_switches_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        build(**overrides)


def test_layers_reject_bad_switches():
    with pytest.raises(ValueError, match=r"`train_gating` must be True or False. Received: train_gating='False'"):
        GPSA(num_heads=4, grid_size=2, train_gating="False")
    with pytest.raises(
        ValueError, match=r"`train_gpsa_attention` must be True or False. Received: train_gpsa_attention=1"
    ):
        GPSABlock(4, 8, grid_size=2, train_gpsa_attention=1)
    with pytest.raises(ValueError, match=r"`train_gating` must be True or False. Received: train_gating=None"):
        GPSABlock(4, 8, grid_size=2, train_gating=None)
    # A plain block has no GPSA to freeze: the switches are not its arguments.
    with pytest.raises(ValueError, match=r"Unrecognized keyword arguments .*'train_gating': False"):
        TransformerBlock(4, 8, train_gating=False)


def test_a_checkpoint_with_learned_gates_is_refused_by_frozen_zero_gates(tmp_path):
    trained = build()  # gates at 1, as a trained ConViT's are not 0
    trained.save(str(tmp_path / "convit.keras"))
    frozen = build(train_gating=False)
    before = [to_numpy(w) for w in frozen.weights]
    with pytest.raises(ValueError, match=r"gates are frozen at 0 \(`train_gating=False`.*Build the model with "
                                         r"train_gating=True.*Received: checkpoint="):
        keras_vit.load_weights(frozen, str(tmp_path / "convit.keras"))
    for a, b in zip(before, frozen.weights):
        np.testing.assert_array_equal(a, to_numpy(b))  # nothing assigned
    # A checkpoint of a model with frozen zero gates loads into another such model.
    frozen.save(str(tmp_path / "frozen.keras"))
    other = build(train_gating=False)
    report = keras_vit.load_weights(other, str(tmp_path / "frozen.keras"))
    assert not report.missing
    for a, b in zip(frozen.weights, other.weights):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))

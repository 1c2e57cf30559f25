"""Axial-ViT (ViT App. D.5): axial attention against numpy, the axial blocks, the builders."""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.architectures import VIT_SIZES
from keras_vit.layers import TransformerBlock
from keras_vit.models.axial import AxialSelfAttention, AxialTransformerBlock
from keras_vit.models.axial import SPEC, AxialViT
from tests.testing import ATOL, check_layer, np_softmax, set_random_weights, to_numpy

AXIAL_VARIANTS = {name: config for name, (_, config) in SPEC.architectures.items()}

# image 32 x 48, patch 8: a non-square 4 x 6 grid; width 32, 2 heads, 2 ViT blocks (4 axial).
TINY = dict(image_size=(32, 48), patch_size=8, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64,
            num_classes=10)
AXES = ("row", "column")


def build(**overrides):
    return AxialViT(**{**TINY, **overrides})


def randomized(model, seed=0):
    # The head is zero-initialized: random weights make round trips real checks.
    set_random_weights(model, seed=seed, scale=0.1)
    return model


def images(model, batch=2, seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (batch, *model.input_shape[1:])).astype("float32")


def grid(shape=(2, 3, 5, 8), seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def lines(x, axis):
    """The sequences an axial attention attends apart: `(batch, rows, cols, D)` -> `[(batch, length, D)]`."""
    if axis == "row":
        return [x[:, i] for i in range(x.shape[1])]
    return [x[:, :, j] for j in range(x.shape[2])]


def np_attention(x, w_qkv, b_qkv, w_out, b_out, num_heads):
    """Global self-attention over a `(batch, length, D)` sequence, head by head (ViT Eq. 5-8)."""
    width = x.shape[-1]
    head_dim = width // num_heads
    heads, probs = [], []
    for h in range(num_heads):
        c = slice(h * head_dim, (h + 1) * head_dim)
        q, k, v = (x @ w_qkv[:, p * width:(p + 1) * width][:, c] + b_qkv[p * width:(p + 1) * width][c]
                   for p in range(3))
        a = np_softmax(q @ k.transpose(0, 2, 1) / math.sqrt(head_dim))
        heads.append(a @ v)
        probs.append(a)
    return np.concatenate(heads, -1) @ w_out + b_out, np.stack(probs, 1)


# ---- the layers ---------------------------------------------------------------------


@pytest.mark.parametrize("axis", AXES)
def test_axial_attention_is_attention_over_each_line_alone(axis):
    x = grid()  # 3 rows, 5 columns: a row and a column have different lengths
    check_layer(AxialSelfAttention, {"num_heads": 2, "axis": axis}, x)
    layer = AxialSelfAttention(num_heads=2, axis=axis)
    layer(x)
    set_random_weights(layer)
    w_qkv, b_qkv, w_out, b_out = (to_numpy(w).astype("float64") for w in layer.get_weights())
    fused = to_numpy(layer(x))
    explicit, probs = (to_numpy(t) for t in layer(x, return_attention_scores=True))
    expected = [np_attention(line.astype("float64"), w_qkv, b_qkv, w_out, b_out, 2) for line in lines(x, axis)]
    stack = 1 if axis == "row" else 2
    np.testing.assert_allclose(explicit, np.stack([out for out, _ in expected], stack), atol=ATOL)
    np.testing.assert_allclose(fused, explicit, atol=ATOL)
    # (batch, lines, heads, length, length): rows attend over 5 columns, columns over 3 rows.
    np.testing.assert_allclose(probs, np.stack([p for _, p in expected], 1), atol=ATOL)
    assert probs.shape == ((2, 3, 2, 5, 5) if axis == "row" else (2, 5, 2, 3, 3))


@pytest.mark.parametrize("axis", AXES)
def test_axial_block_is_a_transformer_block_on_each_line(axis):
    # LayerNorm and MLP act token by token, so the block equals ViT's block run on
    # every row (column) as a sequence: the same weights, in the same order.
    x = grid()
    check_layer(AxialTransformerBlock, {"num_heads": 2, "mlp_dim": 16, "axis": axis}, x)
    block = AxialTransformerBlock(2, 16, axis=axis)
    block(x)
    set_random_weights(block)
    reference = TransformerBlock(2, 16)
    reference(x[:, 0])
    reference.set_weights(block.get_weights())
    expected = np.stack([to_numpy(reference(line)) for line in lines(x, axis)], 1 if axis == "row" else 2)
    np.testing.assert_allclose(to_numpy(block(x)), expected, atol=ATOL)
    remat = AxialTransformerBlock(2, 16, axis=axis, remat=True)
    remat(x)
    remat.set_weights(block.get_weights())
    np.testing.assert_allclose(to_numpy(remat(x)), to_numpy(block(x)), atol=1e-6)


@pytest.mark.parametrize("axis", AXES)
def test_a_token_reaches_only_its_own_line(axis):
    x = grid()
    block = AxialTransformerBlock(2, 16, axis=axis)
    block(x)
    set_random_weights(block, scale=0.3)
    changed = x.copy()
    changed[:, 1, 2] += np.linspace(-1.0, 1.0, 8)  # not a constant, which LayerNorm would remove
    difference = np.abs(to_numpy(block(changed)) - to_numpy(block(x))).max(axis=(0, 3))
    reached = np.zeros((3, 5), bool)
    if axis == "row":
        reached[1] = True
    else:
        reached[:, 2] = True
    assert difference[reached].min() > 1e-3 and difference[~reached].max() < 1e-6, difference


@pytest.mark.parametrize(
    "layer,kwargs,message",
    [
        (AxialSelfAttention, {"num_heads": 2, "axis": "diagonal"}, r"`axis` must be one of \('row', 'column'\). Received: axis='diagonal'"),
        (AxialTransformerBlock, {"num_heads": 2, "mlp_dim": 8, "axis": 1}, r"`axis` must be one of .* Received: axis=1"),
        (AxialTransformerBlock, {"num_heads": 0, "mlp_dim": 8}, r"`num_heads` must be a positive integer. Received: num_heads=0"),
        (AxialTransformerBlock, {"num_heads": 2, "mlp_dim": 8, "drop_path_rate": 1.0}, r"Received: drop_path_rate=1.0"),
        (AxialTransformerBlock, {"num_heads": 2, "mlp_dim": 8, "remat": True, "dropout_rate": 0.1}, r"Received: remat=True, dropout_rate=0.1"),
    ],
)
def test_bad_layer_arguments_are_clear_errors(layer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        layer(**kwargs)


def test_axial_layers_take_a_grid():
    for layer in (AxialSelfAttention(2), AxialTransformerBlock(2, 8)):
        message = r"as a grid of shape \(batch, rows, cols, width\). Received: input_shape=\(2, 15, 8\)"
        with pytest.raises(ValueError, match=message):
            layer(np.zeros((2, 15, 8), "float32"))


# ---- the model ----------------------------------------------------------------------


def test_each_vit_block_becomes_a_row_and_a_column_block():
    model = build(drop_path_rate=0.3)
    blocks = [layer for layer in model.layers if isinstance(layer, AxialTransformerBlock)]
    assert [(b.name, b.axis) for b in blocks] == [
        ("encoderblock_0_row", "row"), ("encoderblock_0_column", "column"),
        ("encoderblock_1_row", "row"), ("encoderblock_1_column", "column"),
    ]
    assert all(b.input.shape == (None, 4, 6, 32) for b in blocks)
    # Stochastic depth rises linearly over the 2L axial blocks.
    np.testing.assert_allclose([b.drop_path_rate for b in blocks], [0.0, 0.1, 0.2, 0.3])
    # No class token: the average of the 24 normalized patch tokens goes to the head.
    assert model.get_layer("encoder_norm").output.shape == (None, 24, 32)
    assert model.get_layer("gap").output.shape == (None, 32)
    assert model.output_shape == (None, 10)
    assert not any(isinstance(layer, keras_vit.layers.ClassToken) for layer in model.layers)


@pytest.mark.parametrize("image_size", [(32, 48), 32])
def test_parameter_count_is_vit_with_twice_the_blocks(image_size):
    d, m, layers, classes = 32, 64, 2, 10
    rows, cols = (4, 6) if image_size != 32 else (4, 4)
    block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * m + m) + (m * d + d)  # 2 LN, qkv, out, MLP
    embedding = 8 * 8 * 3 * d + d + rows * cols * d  # patch kernel and bias, one position embedding a patch
    axial = build(image_size=image_size)
    assert axial.count_params() == embedding + 2 * layers * block + 2 * d + (d * classes + classes)
    vit = keras_vit.VisionTransformer(**{**TINY, "image_size": image_size}, pooling="gap")
    assert vit.get_layer("encoderblock_0").count_params() == block
    assert axial.count_params() == vit.count_params() + layers * block


def test_keras_file_round_trip(tmp_path):
    model = randomized(build(dropout_rate=0.1, drop_path_rate=0.1, position_embedding="learned_2d"))
    x = images(model)
    expected = to_numpy(model(x))
    assert np.abs(expected).max() > 1e-3
    path = str(tmp_path / "axial.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    assert [layer.name for layer in restored.layers] == [layer.name for layer in model.layers]
    name = "encoderblock_1_column"
    assert restored.get_layer(name).get_config() == model.get_layer(name).get_config()


def test_saved_model_export_serves_same_outputs(tmp_path):
    import tensorflow as tf

    model = randomized(build(num_layers=1))
    x = images(model)
    model.export(str(tmp_path / "saved"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))  # held: the served function refers to its variables
    served = loaded.serve(tf.constant(x))
    np.testing.assert_allclose(served.numpy(), to_numpy(model(x)), atol=1e-5)


def test_fits_one_step_and_mixed_precision_runs():
    model = build(dtype="mixed_bfloat16")
    assert model.get_layer("encoderblock_0_row").compute_dtype == "bfloat16"
    assert keras.backend.standardize_dtype(model(images(model)).dtype) == "float32"
    model = build()
    model.get_layer("head").kernel.assign(np.random.default_rng(1).normal(0, 0.5, (32, 10)).astype("float32"))
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    loss = model.train_on_batch(images(model, batch=4), np.arange(4))
    assert np.isfinite(loss)
    assert all(np.abs(to_numpy(w) - b).max() > 0 for w, b in zip(model.trainable_weights, before))


def test_dynamic_image_size_attends_each_calls_grid():
    fixed = randomized(build(image_size=32, num_layers=1))
    dynamic = build(image_size=32, num_layers=1, dynamic_image_size=True)
    dynamic.set_weights(fixed.get_weights())
    x = images(fixed)
    np.testing.assert_allclose(to_numpy(dynamic(x)), to_numpy(fixed(x)), atol=1e-5)
    assert dynamic(np.zeros((1, 48, 24, 3), "float32")).shape == (1, 10)


def test_named_variants_are_vit_b_at_patch_16_and_32():
    assert AXIAL_VARIANTS == {name: dict(VIT_SIZES["B"], patch_size=p)
                              for name, p in (("AxialViT_B16", 16), ("AxialViT_B32", 32))}
    # One ViT-B block pair at 64 px: the table's sizes reach the layers.
    model = keras_vit.AxialViT_B32(image_size=64, num_layers=1, include_top=False)
    assert model.name == "axialvit_b32" and model.output_shape == (None, 768)
    row = model.get_layer("encoderblock_0_row")
    assert (row.num_heads, row.mlp_dim, row.input.shape) == (12, 3072, (None, 2, 2, 768))
    assert model.get_layer("patches").patch_size == (32, 32)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"weights": "imagenet21k"}, r"Axial-ViT has no published checkpoints .* Received: weights='imagenet21k'"),
        ({"pooling": "token"}, r"`pooling` must be one of \('gap',\) for Axial-ViT: a class token has no row or column.* Received: pooling='token'"),
        ({"position_embedding": "relative"}, r"`position_embedding` must be one of \('learned_1d', 'learned_2d', 'none'\) .* Received: position_embedding='relative'"),
        ({"image_size": 30}, r"`image_size` must be divisible by `patch_size`. Received: image_size=\(30, 30\), patch_size=\(8, 8\)"),
        ({"hidden_size": 30, "num_heads": 4}, r"`hidden_size` must be divisible by `num_heads`. Received: hidden_size=30, num_heads=4"),
        ({"num_layers": 0}, r"`num_layers` must be a positive integer. Received: num_layers=0"),
        ({"drop_path_rate": -0.1}, r"`drop_path_rate` must be a float in \[0, 1\). Received: drop_path_rate=-0.1"),
        ({"remat": True, "attention_dropout_rate": 0.1}, r"Received: remat=True, attention_dropout_rate=0.1"),
    ],
)
def test_bad_arguments_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        build(**overrides)


def test_named_builders_refuse_weights_before_building():
    for builder in (keras_vit.AxialViT_B16, keras_vit.AxialViT_B32):
        with pytest.raises(ValueError, match="no published checkpoints"):
            builder(weights="imagenet21k+imagenet2012")
    with pytest.raises(TypeError, match="distillation"):
        build(distillation=True)


def test_load_weights_refuses_a_known_name_for_an_axial_model(tmp_path):
    model = build()
    with pytest.raises(ValueError, match=r"no published checkpoints.*Received: checkpoint='imagenet21k'"):
        keras_vit.load_weights(model, "imagenet21k")
    # Its own weights still load from a file.
    model.save(tmp_path / "axial.keras")
    keras_vit.load_weights(build(), tmp_path / "axial.keras")

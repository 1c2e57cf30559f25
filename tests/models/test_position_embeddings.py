"""The position embeddings of the ViT paper's App. D.3 (Table 8): `position_embedding=`, `position_embedding_at=`.

Parameter counts against the definitions, the 2-D layout and the relative
attention against numpy, where the embeddings are added (blocks zeroed to the
identity), `.keras` round trips, the builders, and the refusals.
"""

import math

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.layers import PatchEncoder, RelativeSelfAttention, TokenPositionEmbedding, TransformerBlock
from keras_vit.layers.position import interpolation_matrix
from keras_vit.layers.relative_attention import relative_offset_index
from keras_vit.models.convit import GPSABlock
from keras_vit.models.vit import VisionTransformer
from tests.testing import ATOL, check_layer, set_random_weights, to_numpy

# A non-square grid (4 rows, 6 columns), so that rows and columns cannot be swapped unseen.
TINY = dict(image_size=(32, 48), patch_size=8, hidden_size=16, num_layers=2, num_heads=2, mlp_dim=32,
            num_classes=5)
ROWS, COLS = 4, 6
COMBINATIONS = [
    ("none", "stem"), ("learned_1d", "stem"), ("learned_2d", "stem"), ("relative", "stem"),
    ("learned_1d", "every_layer"), ("learned_1d", "every_layer_shared"),
    ("learned_2d", "every_layer"), ("learned_2d", "every_layer_shared"),
]


def images(size=(32, 48), seed=0):
    return np.random.default_rng(seed).uniform(0, 255, (2, *size, 3)).astype("float32")


def position_parameters(position_embedding, position_embedding_at, prefix, width=16, layers=2, heads=2):
    """The position parameters of the App. D.3 definitions, for a ROWS x COLS grid and `prefix` tokens."""
    patches = ROWS * COLS
    if position_embedding == "none":
        return 0
    if position_embedding == "relative":
        # 2N - 1 offsets, one embedding for the pairs with a prefix token; D_h wide, per block.
        return layers * (2 * patches - 1 + (prefix > 0)) * (width // heads)
    grid = patches * width if position_embedding == "learned_1d" else (ROWS + COLS) * width // 2
    table = grid + prefix * width  # each prefix token has a slot of its own
    return layers * table if position_embedding_at == "every_layer" else table


@pytest.mark.parametrize("extra, prefix", [(dict(distillation=True), 2), (dict(pooling="gap"), 0)])
@pytest.mark.parametrize("position_embedding, position_embedding_at", COMBINATIONS)
def test_parameter_counts_follow_the_definitions(position_embedding, position_embedding_at, extra, prefix):
    bag = VisionTransformer(**TINY, **extra, position_embedding="none").count_params()
    model = VisionTransformer(
        **TINY, **extra, position_embedding=position_embedding, position_embedding_at=position_embedding_at
    )
    expected = bag + position_parameters(position_embedding, position_embedding_at, prefix)
    assert model.count_params() == expected
    default = VisionTransformer(**TINY, **extra).count_params()
    assert default - bag == position_parameters("learned_1d", "stem", prefix)


def test_the_default_model_keeps_its_weights():
    # Checkpoints and `.keras` files address these paths.
    model = VisionTransformer(**TINY)
    paths = [w.path for w in model.weights if "position" in w.path or "relative" in w.path]
    assert paths == ["patch_encoder/position_embedding", "class_token/position_embedding"]
    explicit = VisionTransformer(**TINY, position_embedding="learned_1d", position_embedding_at="stem")
    assert [w.path for w in explicit.weights] == [w.path for w in model.weights]


def test_2d_embeddings_concatenate_the_column_and_row_tables():
    layer = PatchEncoder(8, position_layout="learned_2d", grid_size=(2, 3))
    patches = np.random.default_rng(0).normal(size=(2, 2, 3, 5)).astype("float32")
    output = check_layer(PatchEncoder, dict(hidden_size=8, position_layout="learned_2d", grid_size=(2, 3)), patches)
    layer(patches)
    set_random_weights(layer)
    kernel, bias = to_numpy(layer.projection.kernel), to_numpy(layer.projection.bias)
    x_table, y_table = to_numpy(layer.position_embedding_x), to_numpy(layer.position_embedding_y)
    assert x_table.shape == (3, 4) and y_table.shape == (2, 4)
    expected = np.stack(
        [
            patches[:, row, col] @ kernel + bias + np.concatenate([x_table[col], y_table[row]])
            for row in range(2)
            for col in range(3)
        ],
        axis=1,
    )
    np.testing.assert_allclose(to_numpy(layer(patches)), expected, atol=ATOL)
    assert output.shape == (2, 6, 8)


def test_each_table_draws_its_own_initial_values():
    # One unseeded Keras initializer repeats its values on every call: each table needs its own.
    encoder = PatchEncoder(hidden_size=16, grid_size=(4, 4), position_layout="learned_2d")
    encoder.build((None, 4, 4, 48))
    assert not np.allclose(to_numpy(encoder.position_embedding_x), to_numpy(encoder.position_embedding_y))
    embedding = TokenPositionEmbedding(grid_size=(2, 3), num_prefix_tokens=1)
    embedding.build((None, 7, 8))
    assert not np.allclose(to_numpy(embedding.prefix_embedding)[0], to_numpy(embedding.position_embedding)[0, 0])


def test_2d_embeddings_resample_each_table_on_its_axis():
    layer = PatchEncoder(8, position_layout="learned_2d", grid_size=(2, 3), dynamic_grid=True)
    patches = np.random.default_rng(0).normal(size=(1, 4, 5, 5)).astype("float32")
    layer(patches)
    set_random_weights(layer)
    rows = interpolation_matrix(2, 4, "bicubic", True)
    cols = interpolation_matrix(3, 5, "bicubic", True)
    x_table = cols @ to_numpy(layer.position_embedding_x)
    y_table = rows @ to_numpy(layer.position_embedding_y)
    projected = patches @ to_numpy(layer.projection.kernel) + to_numpy(layer.projection.bias)
    expected = projected + np.concatenate(
        [np.broadcast_to(x_table[None], (4, 5, 4)), np.broadcast_to(y_table[:, None], (4, 5, 4))], axis=-1
    )
    np.testing.assert_allclose(to_numpy(layer(patches)), expected.reshape(1, 20, 8), atol=ATOL)


def test_token_position_embedding_adds_the_prefix_slots_then_the_grid():
    tokens = np.random.default_rng(0).normal(size=(2, 1 + 6, 8)).astype("float32")
    for layout in ("learned_1d", "learned_2d"):
        arguments = dict(grid_size=(2, 3), num_prefix_tokens=1, layout=layout)
        check_layer(TokenPositionEmbedding, arguments, tokens)
        layer = TokenPositionEmbedding(**arguments)
        layer(tokens)
        set_random_weights(layer)
        if layout == "learned_1d":
            grid = to_numpy(layer.position_embedding).reshape(6, 8)
        else:
            x_table, y_table = to_numpy(layer.position_embedding_x), to_numpy(layer.position_embedding_y)
            grid = np.stack([np.concatenate([x_table[c], y_table[r]]) for r in range(2) for c in range(3)])
        expected = tokens + np.concatenate([to_numpy(layer.prefix_embedding), grid])[None]
        np.testing.assert_allclose(to_numpy(layer(tokens)), expected, atol=ATOL)


def relative_attention_numpy(tokens, layer, num_prefix):
    """ViT App. D.3 written out pair by pair: logits q_i (k_j + r_{p_i - p_j}) / sqrt(D_h)."""
    batch, length, width = tokens.shape
    heads, head_dim, patches = layer.num_heads, width // layer.num_heads, length - num_prefix
    table = to_numpy(layer.relative_embedding)
    qkv = tokens @ to_numpy(layer.qkv.kernel) + to_numpy(layer.qkv.bias)
    qkv = qkv.reshape(batch, length, 3, heads, head_dim)
    query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    logits = np.zeros((batch, heads, length, length))
    for i in range(length):
        for j in range(length):
            if i < num_prefix or j < num_prefix:
                embedding = table[2 * patches - 1]
            else:
                embedding = table[(i - num_prefix) - (j - num_prefix) + patches - 1]
            logits[:, :, i, j] = (query[:, i] * (key[:, j] + embedding)).sum(-1) / math.sqrt(head_dim)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    attended = np.einsum("bhij,bjhd->bihd", probs, value).reshape(batch, length, width)
    return attended @ to_numpy(layer.out.kernel) + to_numpy(layer.out.bias), probs


@pytest.mark.parametrize("num_prefix", [0, 2])
def test_relative_attention_matches_numpy(num_prefix):
    tokens = np.random.default_rng(1).normal(size=(2, num_prefix + 5, 8)).astype("float32")
    check_layer(RelativeSelfAttention, dict(num_heads=2, num_patches=5), tokens)
    layer = RelativeSelfAttention(2, num_patches=5)
    layer(tokens)
    set_random_weights(layer, scale=1.0)
    assert layer.relative_embedding.shape == (2 * 5 - 1 + (num_prefix > 0), 4)
    expected, expected_probs = relative_attention_numpy(tokens, layer, num_prefix)
    output, probs = layer(tokens, return_attention_scores=True)
    np.testing.assert_allclose(to_numpy(output), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(probs), expected_probs, atol=ATOL)
    np.testing.assert_allclose(to_numpy(layer(tokens)), expected, atol=ATOL)


def test_relative_offset_index():
    np.testing.assert_array_equal(
        relative_offset_index(3, 1), [[5, 5, 5, 5], [5, 2, 1, 0], [5, 3, 2, 1], [5, 4, 3, 2]]
    )


def test_relative_attention_is_for_plain_attention():
    with pytest.raises(ValueError, match=r"not to GPSA. Received: relative_positions=4"):
        GPSABlock(2, 8, grid_size=(2, 2), relative_positions=4)
    with pytest.raises(ValueError, match=r"Received: relative_positions=0"):
        TransformerBlock(2, 8, relative_positions=0)


def zero_blocks(model):
    for block in keras_vit.inspection.blocks(model):
        block.set_weights([np.zeros_like(w) for w in block.get_weights()])


@pytest.mark.parametrize("position_embedding", ["learned_1d", "learned_2d"])
@pytest.mark.parametrize("position_embedding_at", ["every_layer", "every_layer_shared"])
def test_embeddings_are_added_at_every_block_input(position_embedding, position_embedding_at):
    model = VisionTransformer(
        **TINY, position_embedding=position_embedding, position_embedding_at=position_embedding_at
    )
    set_random_weights(model)
    zero_blocks(model)  # each block is then the identity: its branches output zeros
    x = images()
    encoded = keras.Model(model.input, model.get_layer("encoder_norm").input)(x)
    # Stem without position: [class token; patches E + b] on the preprocessed pixels.
    pixels = x / 127.5 - 1.0
    patches = pixels.reshape(2, ROWS, 8, COLS, 8, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, ROWS * COLS, -1)
    encoder = model.get_layer("patch_encoder")
    assert not encoder.use_position_embedding
    embedded = patches @ to_numpy(encoder.projection.kernel) + to_numpy(encoder.projection.bias)
    class_token = np.broadcast_to(to_numpy(model.get_layer("class_token").token), (2, 1, 16))
    expected = np.concatenate([class_token, embedded], axis=1)
    names = (
        ["position_embedding"] * 2 if position_embedding_at == "every_layer_shared"
        else ["position_embedding_0", "position_embedding_1"]
    )
    for name in names:
        layer = model.get_layer(name)
        if position_embedding == "learned_1d":
            grid = to_numpy(layer.position_embedding).reshape(ROWS * COLS, 16)
        else:
            x_table, y_table = to_numpy(layer.position_embedding_x), to_numpy(layer.position_embedding_y)
            grid = np.stack([np.concatenate([x_table[c], y_table[r]]) for r in range(ROWS) for c in range(COLS)])
        expected = expected + np.concatenate([to_numpy(layer.prefix_embedding), grid])[None]
    np.testing.assert_allclose(to_numpy(encoded), expected, atol=1e-4)


def test_the_relative_model_attends_with_relative_logits():
    model = VisionTransformer(**TINY, position_embedding="relative", distillation=True)
    attentions = [block.attention for block in keras_vit.inspection.blocks(model)]
    assert all(isinstance(a, RelativeSelfAttention) and a.num_patches == ROWS * COLS for a in attentions)
    assert not model.get_layer("patch_encoder").use_position_embedding
    assert not model.get_layer("class_token").use_position_embedding
    assert not model.get_layer("distillation_token").use_position_embedding


@pytest.mark.parametrize(
    "arguments",
    [
        dict(position_embedding="none"),
        dict(position_embedding="relative", distillation=True, initialization="deit"),
        dict(position_embedding="learned_2d", position_embedding_at="every_layer"),
        dict(position_embedding="learned_1d", position_embedding_at="every_layer_shared", pooling="gap"),
    ],
)
def test_keras_round_trip(arguments, tmp_path):
    model = VisionTransformer(**TINY, **arguments)
    set_random_weights(model)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = images()
    np.testing.assert_array_equal(to_numpy(loaded(x)), to_numpy(model(x)))
    assert loaded.count_params() == model.count_params()


def test_the_builders_take_the_arguments():
    vit = keras_vit.ViT_Ti16(image_size=32, num_layers=1, position_embedding="relative")
    assert isinstance(keras_vit.inspection.blocks(vit)[0].attention, RelativeSelfAttention)
    deit = keras_vit.DeiT_Ti16_distilled(
        image_size=32, num_layers=1, position_embedding="learned_2d", position_embedding_at="every_layer"
    )
    assert deit.get_layer("position_embedding_0").num_prefix_tokens == 2
    # The hybrid's grid is the ResNet's feature map: the root alone divides 32 by 4, 8 x 8 cells.
    hybrid = VisionTransformer(image_size=32, patch_size=1, hidden_size=32, num_layers=1, num_heads=2,
                               mlp_dim=64, num_classes=10, resnet_stages=(), position_embedding="relative")
    assert keras_vit.inspection.blocks(hybrid)[0].attention.num_patches == 64


def test_dynamic_image_size_resamples_2d_and_refuses_the_fixed_grids():
    dynamic = VisionTransformer(**TINY, position_embedding="learned_2d", dynamic_image_size=True)
    fixed = VisionTransformer(**TINY, position_embedding="learned_2d")
    set_random_weights(dynamic)
    fixed.set_weights(dynamic.get_weights())
    np.testing.assert_array_equal(to_numpy(dynamic(images())), to_numpy(fixed(images())))
    assert dynamic(images((48, 48))).shape == (2, 5)
    bag = VisionTransformer(**TINY, position_embedding="none", dynamic_image_size=True)
    assert bag(images((48, 48))).shape == (2, 5)
    for arguments in (dict(position_embedding="relative"), dict(position_embedding_at="every_layer")):
        with pytest.raises(ValueError, match=r"dynamic_image_size=True.*Received: position_embedding="):
            VisionTransformer(**TINY, **arguments, dynamic_image_size=True)


def test_other_image_sizes_build_their_own_grid():
    model = VisionTransformer(**{**TINY, "image_size": 40}, position_embedding="relative")
    assert keras_vit.inspection.blocks(model)[0].attention.relative_embedding.shape == (2 * 25 - 1 + 1, 8)
    padded = VisionTransformer(**{**TINY, "image_size": 36}, dynamic_padding=True, position_embedding="learned_2d")
    assert padded.get_layer("patch_encoder").position_embedding_x.shape == (5, 8)


def test_checkpoints_load_only_into_the_default(monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("downloaded")

    monkeypatch.setattr(keras_vit.weights.loading, "fetch", no_download)
    with pytest.raises(ValueError, match=r"`weights` needs position_embedding='learned_1d'.*"
                                         r"position_embedding='none', position_embedding_at='stem'"):
        keras_vit.ViT_Ti16(weights="ViT_Ti16/augreg", position_embedding="none")
    with pytest.raises(ValueError, match=r"position_embedding_at='every_layer_shared'"):
        keras_vit.ViT_Ti16(weights="ViT_Ti16/augreg", position_embedding_at="every_layer_shared")


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(position_embedding="sinusoidal"),
         r"`position_embedding` must be one of \('learned_1d', 'learned_2d', 'relative', 'none'\). "
         r"Received: position_embedding='sinusoidal'"),
        (dict(position_embedding_at="input"),
         r"`position_embedding_at` must be one of \('stem', 'every_layer', 'every_layer_shared'\). "
         r"Received: position_embedding_at='input'"),
        (dict(position_embedding="relative", position_embedding_at="every_layer"),
         r"Received: position_embedding_at='every_layer', position_embedding='relative'"),
        (dict(position_embedding="none", position_embedding_at="every_layer_shared"),
         r"Received: position_embedding_at='every_layer_shared', position_embedding='none'"),
        (dict(position_embedding="learned_2d", hidden_size=15, num_heads=3),
         r"`hidden_size` must be even. Received: position_embedding='learned_2d', hidden_size=15"),
    ],
)
def test_bad_values_name_the_argument(arguments, message):
    with pytest.raises(ValueError, match=message):
        VisionTransformer(**{**TINY, **arguments})

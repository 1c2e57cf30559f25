"""The Swin Transformer model: timm 1.0.31 numerics, variants' knobs, round trips, errors."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import inspection
from keras_vit.layers import AbsolutePositionEmbedding
from keras_vit.models.swin import SwinTransformer, SwinTransformerBlock
from keras_vit.models.swin.checkpoints import timm_key_map
from tests.models.tiny import tiny_model
from tests.testing import check_layer, set_random_weights, to_numpy

# Stage 0 at 32 px: an 8 x 8 map, two 4 x 4 windows a side, its second block
# shifted by 2; stage 1: one 4 x 4 window, no shift (the window shrinks to the map).
TINY = dict(
    image_size=32, embed_dim=16, depths=(2, 2), num_heads=(1, 2), window_size=4,
    num_classes=5, preprocessing=None,
)


def build(**overrides):
    return SwinTransformer(**{**TINY, **overrides})


def images_for(model, batch=2, seed=0):
    shape = model.input_shape[1:]
    return np.random.default_rng(seed).uniform(-1, 1, (batch, *shape)).astype("float32")


def randomized(model, seed=0):
    set_random_weights(model, seed=seed, scale=0.2)
    return model


def timm_copy(model, image_size, depths, num_heads, embed_dim=16, window_size=4, num_classes=5):
    """timm 1.0.31's SwinTransformer with `model`'s weights, through `timm_key_map`."""
    from runs.reference import timm, torch

    reference = timm.models.swin_transformer.SwinTransformer(
        img_size=image_size, patch_size=4, in_chans=3, num_classes=num_classes,
        embed_dim=embed_dim, depths=depths, num_heads=num_heads, window_size=window_size,
    ).eval()
    state = reference.state_dict()
    ours = {v.path: to_numpy(v) for v in model.weights}
    table = timm_key_map(depths, include_top=num_classes > 0)
    assert set(table) == set(ours)
    parameters = {name for name, _ in reference.named_parameters()}
    assert {key for key, _ in table.values()} == parameters
    for path, (key, transform) in table.items():
        value = ours[path]
        if transform == "transpose":
            value = value.T
        elif transform == "conv":
            value = value.transpose(3, 2, 0, 1)
        assert tuple(state[key].shape) == value.shape, key
        state[key] = torch.from_numpy(np.ascontiguousarray(value))
    reference.load_state_dict(state)
    return reference


def timm_logits(reference, images):
    from runs.reference import torch

    with torch.no_grad():
        return reference(torch.from_numpy(images.transpose(0, 3, 1, 2))).numpy()


@pytest.mark.parametrize("image_size", [(32, 32), (32, 64)])
def test_matches_timm_at_multiples_of_the_window(image_size):
    model = randomized(build(image_size=image_size))
    reference = timm_copy(model, image_size, TINY["depths"], TINY["num_heads"])
    x = images_for(model)
    ours = to_numpy(model(x))
    theirs = timm_logits(reference, x)
    assert np.abs(theirs).max() > 0.1
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)


def test_matches_timm_with_padding_and_no_shift():
    # 40 x 52 px: 10 x 13 and 5 x 7 maps, padded to whole 4 x 4 windows. One
    # (unshifted) block per stage: the padding alone agrees with timm.
    depths, heads = (1, 1), (1, 2)
    model = randomized(build(image_size=(40, 52), depths=depths, num_heads=heads))
    reference = timm_copy(model, (40, 52), depths, heads)
    x = images_for(model)
    np.testing.assert_allclose(to_numpy(model(x)), timm_logits(reference, x), atol=1e-4, rtol=0)


def test_shifted_windows_on_a_map_not_a_multiple_of_the_window_run():
    # Here the blocks pad before the shift (Microsoft's order) and timm shifts
    # before padding, so the two differ by design (see keras_vit.models.swin.layers);
    # this checks only shapes and finiteness, there is no independent reference.
    model = randomized(build(image_size=(40, 52)))
    output = to_numpy(model(images_for(model)))
    assert output.shape == (2, 5) and np.isfinite(output).all()
    features = build(image_size=(40, 52), include_top=False, pooling=None)
    assert features.output_shape == (None, 5, 7, 32)


@pytest.mark.parametrize("remat", [False, True])
def test_keras_file_round_trip(tmp_path, remat):
    dropout = 0.0 if remat else 0.1
    model = randomized(
        build(dropout_rate=dropout, drop_path_rate=0.2, absolute_position_embedding=True, remat=remat)
    )
    x = images_for(model)
    expected = to_numpy(model(x))
    path = str(tmp_path / "swin.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    assert [type(layer) for layer in restored.layers] == [type(layer) for layer in model.layers]
    assert [layer.name for layer in restored.layers] == [layer.name for layer in model.layers]


def test_saved_model_export_serves_same_outputs(tmp_path):
    import tensorflow as tf

    model = randomized(build(image_size=(32, 40)))
    x = images_for(model)
    expected = to_numpy(model(x))
    model.export(str(tmp_path / "saved"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))  # kept: it owns the variables
    served = loaded.serve(tf.constant(x))
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)


def test_features_without_top():
    assert build(include_top=False).output_shape == (None, 32)
    assert build(include_top=False, pooling=None).output_shape == (None, 4, 4, 32)
    assert build(num_classes=7, classifier_activation="softmax").output_shape == (None, 7)


# Four stages on 64 x 128 px: 16 x 32 to 2 x 4 maps, all multiples of the
# (shrunk) windows, where timm and these blocks agree.
FOUR_STAGES = dict(image_size=(64, 128), embed_dim=8, depths=(2, 2, 2, 2), num_heads=(1, 2, 2, 4))


def output_shapes(model):
    # `model.output_shape` flattens a dict of outputs to a list; the dict keeps the keys.
    return {key: tuple(value.shape) for key, value in model.output.items()}


def test_stage_outputs_match_timm_intermediates():
    model = randomized(build(**FOUR_STAGES, include_top=False, return_stages=True))
    assert output_shapes(model) == {
        "stage_0": (None, 16, 32, 8), "stage_1": (None, 8, 16, 16),
        "stage_2": (None, 4, 8, 32), "stage_3": (None, 2, 4, 64),
    }
    reference = timm_copy(
        model, FOUR_STAGES["image_size"], FOUR_STAGES["depths"], FOUR_STAGES["num_heads"],
        embed_dim=8, num_classes=0,
    )
    x = images_for(model)
    from runs.reference import torch

    with torch.no_grad():
        theirs = reference.forward_intermediates(
            torch.from_numpy(x.transpose(0, 3, 1, 2)), norm=True, intermediates_only=True
        )
    ours = model(x)
    assert sorted(ours) == ["stage_0", "stage_1", "stage_2", "stage_3"]
    for index, expected in enumerate(theirs):
        expected = expected.numpy().transpose(0, 2, 3, 1)
        assert np.abs(expected).max() > 0.1
        np.testing.assert_allclose(to_numpy(ours[f"stage_{index}"]), expected, atol=1e-4, rtol=0)
    # The pooled features share the weights: timm's pre-logits of the same model.
    pooled = build(**FOUR_STAGES, include_top=False)
    pooled.set_weights(model.get_weights())
    with torch.no_grad():
        features = reference.forward_head(
            reference.forward_features(torch.from_numpy(x.transpose(0, 3, 1, 2))), pre_logits=True
        ).numpy()
    np.testing.assert_allclose(to_numpy(pooled(x)), features, atol=1e-4, rtol=0)


def test_stage_outputs_at_a_size_with_odd_stages_round_trip(tmp_path):
    # 200 x 264 px with Swin's 7 x 7 windows: 50 x 66, 25 x 33, 13 x 17 and 7 x 9
    # maps; the merging pads the odd ones, the blocks pad to whole windows.
    model = randomized(
        build(image_size=(200, 264), embed_dim=8, depths=(1, 2, 1, 2), num_heads=(1, 1, 2, 2),
              window_size=7, include_top=False, return_stages=True)
    )
    shapes = {"stage_0": (50, 66, 8), "stage_1": (25, 33, 16), "stage_2": (13, 17, 32), "stage_3": (7, 9, 64)}
    assert output_shapes(model) == {key: (None, *shape) for key, shape in shapes.items()}
    x = images_for(model, batch=1)
    expected = {key: to_numpy(value) for key, value in model(x).items()}
    assert all(np.isfinite(value).all() for value in expected.values())
    path = str(tmp_path / "swin_stages.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    outputs = restored(x)
    assert sorted(outputs) == sorted(shapes)
    for key, value in expected.items():
        np.testing.assert_array_equal(to_numpy(outputs[key]), value)
    # Every weight of the backbone is a checkpoint weight (no detection norms).
    assert {v.path for v in model.weights} == set(timm_key_map((1, 2, 1, 2), include_top=False))


def test_head_is_trunc_normal_with_zero_bias():
    head = build(num_classes=1000, embed_dim=32).get_layer("head")
    kernel, bias = to_numpy(head.kernel), to_numpy(head.bias)
    assert np.abs(kernel).max() <= 2 * 0.02 + 1e-7 and 0.015 < kernel.std() < 0.025
    assert not bias.any()


def test_stochastic_depth_rises_linearly_over_all_blocks_and_odd_blocks_shift():
    model = build(depths=(2, 3), drop_path_rate=0.4)
    blocks = [layer for layer in model.layers if "_block_" in layer.name]
    assert [b.name for b in blocks] == [
        "stage_0_block_0", "stage_0_block_1", "stage_1_block_0", "stage_1_block_1", "stage_1_block_2",
    ]
    np.testing.assert_allclose([b.drop_path_rate for b in blocks], [0.0, 0.1, 0.2, 0.3, 0.4])
    assert [b.shift_size for b in blocks] == [(0, 0), (2, 2), (0, 0), (2, 2), (0, 0)]


def test_absolute_position_embedding_adds_one_map_of_the_first_stage():
    plain, with_ape = build(), build(absolute_position_embedding=True)
    assert with_ape.count_params() - plain.count_params() == 8 * 8 * 16
    path = "absolute_position_embedding/position_embedding"
    assert path in timm_key_map(TINY["depths"], absolute_position_embedding=True)
    assert {v.path for v in with_ape.weights} == set(
        timm_key_map(TINY["depths"], absolute_position_embedding=True)
    )


def test_absolute_position_embedding_round_trips_its_config_and_adds_the_map():
    x = np.random.default_rng(0).normal(size=(2, 6, 10, 8)).astype("float32")
    output = check_layer(AbsolutePositionEmbedding, {}, x)
    layer = AbsolutePositionEmbedding()
    np.testing.assert_allclose(to_numpy(layer(x)), x + to_numpy(layer.position_embedding)[None], atol=1e-6)
    assert output.shape == x.shape


def test_remat_block_round_trips_its_config_and_matches_the_plain_block():
    x = np.random.default_rng(0).normal(size=(2, 6, 10, 8)).astype("float32")
    kwargs = dict(num_heads=2, window_size=4, shift_size=2)
    remat_output = check_layer(SwinTransformerBlock, {**kwargs, "remat": True}, x)
    plain = SwinTransformerBlock(**kwargs)
    plain(x)
    remat = SwinTransformerBlock(**kwargs, remat=True)
    remat(x)
    remat.set_weights(plain.get_weights())
    np.testing.assert_allclose(to_numpy(remat(x)), to_numpy(plain(x)), atol=1e-6)
    assert remat_output.shape == x.shape
    assert remat.get_config()["remat"] is True
    with pytest.raises(ValueError, match=r"`remat=True` supports stochastic depth but not dropout"):
        SwinTransformerBlock(**kwargs, remat=True, attention_dropout_rate=0.1)
    with pytest.raises(ValueError, match=r"`remat` must be True or False"):
        SwinTransformerBlock(**kwargs, remat=1)


def test_key_map_without_top_covers_the_features_model():
    model = build(include_top=False)
    assert {v.path for v in model.weights} == set(timm_key_map(TINY["depths"], include_top=False))


@pytest.mark.parametrize("drop_path_rate", [0.0, 0.5])
def test_remat_gives_the_same_outputs_and_training_step(drop_path_rate):
    # With the same seeds, the remat blocks draw the same stochastic-depth masks.
    x, y = images_for(build()), np.array([1, 3])
    results = []
    for remat in (False, True):
        keras.utils.set_random_seed(0)
        model = randomized(build(remat=remat, drop_path_rate=drop_path_rate))
        blocks = [layer for layer in model.layers if "_block_" in layer.name]
        assert all(type(layer) is SwinTransformerBlock and layer.remat == remat for layer in blocks)
        outputs = to_numpy(model(x))
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        loss = model.train_on_batch(x, y)
        results.append((outputs, loss, [to_numpy(w) for w in model.trainable_weights]))
    (plain_out, plain_loss, plain_weights), (remat_out, remat_loss, remat_weights) = results
    np.testing.assert_allclose(remat_out, plain_out, atol=1e-6)
    assert np.isfinite(remat_loss)
    np.testing.assert_allclose(remat_loss, plain_loss, rtol=1e-5)
    for a, b in zip(remat_weights, plain_weights):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_swin_variants_build_through_the_table():
    # The variants take the builder's arguments, the backbone outputs included.
    model = keras_vit.Swin_T(image_size=(200, 264), include_top=False, return_stages=True)
    assert model.name == "swin_t"
    assert output_shapes(model) == {
        "stage_0": (None, 50, 66, 96), "stage_1": (None, 25, 33, 192),
        "stage_2": (None, 13, 17, 384), "stage_3": (None, 7, 9, 768),
    }
    assert keras_vit.SwinTransformer is SwinTransformer
    with pytest.raises(TypeError, match="hidden_size"):
        keras_vit.Swin_T(hidden_size=3)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(depths=(2, 2, 2)), r"`depths` and `num_heads` must have one entry per stage"),
        (dict(depths=()), r"`depths` must be a non-empty tuple of positive integers.*depths=\(\)"),
        (dict(num_heads=(1, 0)), r"`num_heads` must be a non-empty tuple"),
        (dict(num_heads=(3, 2)), r"stage 0, embed_dim \* 2\*\*0 = 16, must be divisible"),
        (dict(embed_dim=0), r"embed_dim"),
        (dict(window_size=0), r"window_size"),
        (dict(mlp_ratio=0), r"`mlp_ratio` must be a positive number"),
        (dict(qkv_bias="yes"), r"qkv_bias"),
        (dict(absolute_position_embedding=1), r"absolute_position_embedding"),
        (dict(drop_path_rate=1.5), r"drop_path_rate"),
        (dict(pooling="token"), r"`pooling` must be one of \('avg', None\)"),
        (dict(pooling=None), r"`pooling=None`.*needs `include_top=False`"),
        (dict(preprocessing="caffe"), r"preprocessing"),
        (dict(num_classes=0), r"num_classes"),
        (dict(image_size=(32,)), r"image_size"),
        (dict(remat=True, dropout_rate=0.1), r"`remat=True` supports stochastic depth but not dropout"),
        (dict(return_stages=1, include_top=False), r"return_stages"),
        (dict(return_stages=True), r"`return_stages=True`.*needs `include_top=False`"),
    ],
)
def test_invalid_arguments_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        build(**overrides)


def test_a_question_for_one_patch_grid_says_the_model_attends_within_windows():
    # The shared inspection asks the registered family, never names it (issue #60).
    with pytest.raises(ValueError, match=r"no PatchEncoder.* It is a Swin Transformer, whose blocks attend within "
                                         r"windows.* Received: model='swin_transformer'"):
        inspection.patch_encoder(tiny_model("swin"))

"""DeiT: the distillation token and its head, DeiT's initialization, the DeiT builders.

The family-wide checks (fit, `.keras` and SavedModel round trips, mixed
precision, non-square grayscale input) run on the distilled testing variant
`"deit"` in `test_models.py`; the parameter counts are pinned in
`test_variants.py`.
"""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models.common import IMAGENET_MEAN, IMAGENET_STD
from keras_vit.models.variants import TESTING_VARIANTS
from tests.testing import set_random_weights, to_numpy


def build(family="deit", **overrides):
    builder, config = TESTING_VARIANTS[family]
    return builder(**{**config, **overrides})


def distilled_convit(**overrides):
    return build("convit", distillation=True, **overrides)


def images(model, batch=2, seed=0):
    shape = model.input_shape[1:]
    return np.random.default_rng(seed).uniform(0, 255, (batch, *shape)).astype("float32")


def randomized(model, seed=0):
    set_random_weights(model, seed=seed, scale=0.1)
    return model


# ---- the distilled model ------------------------------------------------------------


def test_vit_distillation_token_follows_the_class_token_with_its_own_position_slot():
    model = build()
    names = [layer.name for layer in model.layers]
    assert names.index("distillation_token") == names.index("class_token") + 1
    # 16 patches, the class and the distillation token.
    assert model.get_layer("encoderblock_0").output.shape[1] == 18
    token = model.get_layer("distillation_token")
    assert token.use_position_embedding and token.position_embedding.shape == (32,)
    assert model.get_layer("patch_encoder").position_embedding.shape == (4, 4, 32)


def test_convit_inserts_both_tokens_after_the_last_gpsa_block():
    model = distilled_convit()
    names = [layer.name for layer in model.layers]
    assert names.index("class_token") == names.index("encoderblock_1") + 1
    assert names.index("distillation_token") == names.index("class_token") + 1
    assert model.get_layer("encoderblock_1").output.shape[1] == 16
    assert model.get_layer("encoderblock_2").output.shape[1] == 18
    assert not model.get_layer("distillation_token").use_position_embedding


@pytest.mark.parametrize("builder", [build, distilled_convit])
def test_output_is_the_average_of_the_two_heads(builder):
    model = randomized(builder())
    heads = keras_vit.distillation_heads(model)
    assert heads.output_shape == [(None, 10), (None, 10)]
    x = images(model)
    logits, distillation_logits = (to_numpy(t) for t in heads(x))
    assert np.abs(logits - distillation_logits).max() > 1e-3  # two different heads
    np.testing.assert_allclose(to_numpy(model(x)), (logits + distillation_logits) / 2, atol=1e-6)


def test_heads_read_the_class_and_the_distillation_token():
    model = randomized(build())
    tokens = keras.Model(model.inputs[0], model.get_layer("encoder_norm").output)
    x = images(model)
    encoded = to_numpy(tokens(x))
    logits, distillation_logits = (to_numpy(t) for t in keras_vit.distillation_heads(model)(x))
    head, head_dist = model.get_layer("head"), model.get_layer("head_dist")
    for features, layer, expected in ((encoded[:, 0], head, logits), (encoded[:, 1], head_dist, distillation_logits)):
        kernel, bias = (to_numpy(w) for w in layer.weights)
        np.testing.assert_allclose(features @ kernel + bias, expected, atol=1e-5)


def test_heads_share_the_weights_of_the_model():
    model = build()
    heads = keras_vit.distillation_heads(model)
    assert {id(w) for w in heads.weights} == {id(w) for w in model.weights}
    x = images(model, batch=4)
    before = to_numpy(model(x))
    heads.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=[keras.losses.SparseCategoricalCrossentropy(from_logits=True)] * 2)
    heads.train_on_batch(x, [np.arange(4), np.arange(4)[::-1].copy()])
    assert np.abs(to_numpy(model(x)) - before).max() > 1e-4


def test_classifier_activation_applies_to_the_average():
    model = randomized(build(classifier_activation="softmax"))
    x = images(model)
    logits, distillation_logits = (to_numpy(t) for t in keras_vit.distillation_heads(model)(x))
    average = (logits + distillation_logits) / 2
    expected = np.exp(average) / np.exp(average).sum(-1, keepdims=True)
    np.testing.assert_allclose(to_numpy(model(x)), expected, atol=1e-6)


def test_features_without_top_are_the_average_of_the_two_tokens():
    model = randomized(build(include_top=False))
    assert model.output_shape == (None, 32)
    tokens = keras.Model(model.inputs[0], model.get_layer("encoder_norm").output)
    x = images(model)
    encoded = to_numpy(tokens(x))
    np.testing.assert_allclose(to_numpy(model(x)), (encoded[:, 0] + encoded[:, 1]) / 2, atol=1e-6)


def test_heads_give_float32_logits_under_mixed_precision():
    model = randomized(build(dtype="mixed_bfloat16"))
    heads = keras_vit.distillation_heads(model)
    x = images(model)
    for output in (*heads(x), model(x)):
        assert keras.backend.standardize_dtype(output.dtype) == "float32"
    assert model.get_layer("encoderblock_0").compute_dtype == "bfloat16"


def test_heads_of_a_restored_keras_file(tmp_path):
    model = randomized(build())
    path = str(tmp_path / "deit.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    x = images(model)
    for ours, theirs in zip(keras_vit.distillation_heads(restored)(x), keras_vit.distillation_heads(model)(x)):
        np.testing.assert_array_equal(to_numpy(ours), to_numpy(theirs))


@pytest.mark.parametrize("overrides", [{"distillation": False}, {"include_top": False}])
def test_heads_of_a_model_without_them_is_a_clear_error(overrides):
    model = build(**overrides)
    message = (r"`model` has no distillation head: expected layers 'head' and 'head_dist'.*"
               r"Received: model='vision_transformer', missing \[.*'head_dist'\]")
    with pytest.raises(ValueError, match=message):
        keras_vit.distillation_heads(model)
    with pytest.raises(ValueError, match=r"`model` must be a `keras.Model`. Received: model='deit'"):
        keras_vit.distillation_heads("deit")


def test_distillation_adds_a_token_a_position_slot_and_a_head():
    d, classes = 32, 10
    assert build().count_params() - build(distillation=False).count_params() == d + d + (d * classes + classes)
    convit = distilled_convit().count_params() - build("convit").count_params()
    assert convit == d + (d * classes + classes)  # ConViT's tokens carry no position embedding


# ---- initialization ---------------------------------------------------------------


def _weight(model, path):
    return next(to_numpy(w) for w in model.weights if w.path == path)


def _truncated_normal_002(values):
    # Truncated at two standard deviations: about 0.88 of the normal's 0.02.
    return np.abs(values).max() <= 0.04 and 0.015 < values.std() < 0.02


def test_deit_initialization():
    model = build(hidden_size=192, num_heads=3, mlp_dim=384, num_classes=100)
    for path in ("class_token/token", "class_token/position_embedding", "distillation_token/token",
                 "distillation_token/position_embedding", "patch_encoder/position_embedding",
                 "encoderblock_0/attention/qkv/kernel", "encoderblock_1/mlp/fc2/kernel",
                 "head/kernel", "head_dist/kernel"):
        assert _truncated_normal_002(_weight(model, path)), path
    for path in ("encoderblock_0/attention/qkv/bias", "encoderblock_0/mlp/fc1/bias", "head/bias", "head_dist/bias"):
        assert not _weight(model, path).any(), path
    # The patch convolution keeps PyTorch's default, uniform in +-1/sqrt(fan_in).
    kernel = _weight(model, "patch_encoder/projection/kernel")
    assert np.abs(kernel).max() <= 1 / np.sqrt(kernel.shape[0])


def test_vit_initialization_stays_the_default():
    model = build("vit", hidden_size=192, num_heads=3, mlp_dim=384)
    assert not _weight(model, "class_token/token").any() and not _weight(model, "head/kernel").any()
    mlp_bias = _weight(model, "encoderblock_0/mlp/fc1/bias")
    assert mlp_bias.any() and np.abs(mlp_bias).max() < 1e-4  # normal(1e-6), ViT App. B.1.1
    vit_init = build("vit", initialization="vit")
    for a, b in zip(build("vit").weights, vit_init.weights):
        assert a.path == b.path and a.shape == b.shape


def test_convit_takes_either_initialization():
    deit = distilled_convit()
    assert _truncated_normal_002(_weight(deit, "head/kernel")) and _truncated_normal_002(_weight(deit, "head_dist/kernel"))
    vit = distilled_convit(initialization="vit")
    assert not _weight(vit, "class_token/token").any() and not _weight(vit, "head/kernel").any()


# ---- the named builders -----------------------------------------------------------


@pytest.mark.parametrize(
    "name,distilled,size",
    [("DeiT_Ti16", False, 224), ("DeiT_Ti16_distilled", True, 224), ("DeiT_B16_384_distilled", True, 384)],
)
def test_deit_builders_have_deit_preprocessing_and_initialization(name, distilled, size):
    builder, config = keras_vit.VARIANTS[name]
    assert config["image_size"] == size and config["patch_size"] == 16
    # Built small: the table's sizes are pinned in test_variants.py.
    model = getattr(keras_vit, name)(image_size=32, num_classes=5)
    assert model.name == name.lower()
    assert ("head_dist" in [layer.name for layer in model.layers]) is distilled
    x = np.full((1, 32, 32, 3), 255.0 * np.array(IMAGENET_MEAN), "float32")
    normalized = to_numpy(model.get_layer("preprocessing")(x))
    np.testing.assert_allclose(normalized, 0.0, atol=1e-5)  # the mean maps to 0
    x = x + 255.0 * np.array(IMAGENET_STD, "float32")
    np.testing.assert_allclose(to_numpy(model.get_layer("preprocessing")(x)), 1.0, atol=1e-5)
    assert _weight(model, "head/kernel").any()  # DeiT's head is not zero-initialized

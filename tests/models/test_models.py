"""Model families end to end: fit, .keras and SavedModel round trips, mixed precision, knobs, errors."""

import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit.models.convit import GPSABlock
from keras_vit.models.variants import TESTING_VARIANTS
from tests.models.tiny import tiny_images as images_for
from tests.testing import set_random_weights, to_numpy

FAMILIES = sorted(TESTING_VARIANTS)


def build(family, **overrides):
    builder, config = TESTING_VARIANTS[family]
    return builder(**{**config, **overrides})


def randomized(model, seed=0):
    # The head is zero-initialized, so an untouched model outputs zeros and any
    # round trip would trivially "match"; random weights make it a real check.
    set_random_weights(model, seed=seed, scale=0.1)
    return model


# The ViT case as a user's plain `compile` and `fit` run: the optimizer built by Keras in the
# traced step (tests/conftest.py builds it at `compile` for the others; each such fit left its
# traced graphs registered in the worker).
@pytest.mark.parametrize("family", [pytest.param(family, marks=pytest.mark.optimizer_built_by_keras)
                                    if family == "vit" else family for family in FAMILIES])
def test_compiles_and_fits(family):
    model = build(family)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    x = images_for(model, batch=8)
    y = np.arange(8) % 10
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    after = [to_numpy(w) for w in model.trainable_weights]
    assert any(np.abs(a - b).max() > 0 for a, b in zip(after, before))
    assert model.predict(x, verbose=0).shape == (8, 10)


@pytest.mark.parametrize("family", FAMILIES)
def test_keras_file_round_trip(family, tmp_path):
    model = randomized(build(family, dropout_rate=0.1, drop_path_rate=0.1))
    x = images_for(model)
    expected = to_numpy(model(x))
    assert np.abs(expected).max() > 1e-3
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), expected)
    assert [layer.name for layer in restored.layers] == [layer.name for layer in model.layers]


@pytest.mark.parametrize("family", FAMILIES)
def test_saved_model_export_serves_same_outputs(family, tmp_path):
    import tensorflow as tf

    model = randomized(build(family))
    x = images_for(model)
    expected = to_numpy(model(x))
    model.export(str(tmp_path / "saved"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    served = loaded.serve(tf.constant(x))
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_mixed_bfloat16_builds_runs_and_saves(family, tmp_path):
    model = randomized(build(family, dtype="mixed_bfloat16"))
    assert all(w.dtype == "float32" for w in model.weights)
    block = next(layer for layer in model.layers if "encoderblock_" in layer.name)
    assert block.compute_dtype == "bfloat16"
    x = images_for(model)
    output = model(x)
    assert keras.backend.standardize_dtype(output.dtype) == "float32"
    reference = randomized(build(family))
    # bfloat16 keeps ~3 significant digits: the logits agree to a few percent.
    np.testing.assert_allclose(to_numpy(output), to_numpy(reference(x)), rtol=0.1, atol=0.05)
    path = str(tmp_path / "mixed.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(x)), to_numpy(output))
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert np.isfinite(model.fit(x, np.array([1, 2]), verbose=0).history["loss"][0])


@pytest.mark.parametrize("family", FAMILIES)
def test_non_square_grayscale_input(family):
    size = (64, 96) if family == "hybrid" else (24, 40)
    model = randomized(build(family, image_size=size, num_channels=1))
    assert model.input_shape == (None, *size, 1)
    assert model(images_for(model)).shape == (2, 10)


@pytest.mark.parametrize("family", FAMILIES)
def test_features_without_top_and_gap_pooling(family):
    hidden = TESTING_VARIANTS[family][1]["hidden_size"]
    assert build(family, include_top=False).output_shape == (None, hidden)
    # The distillation token is read as a token: without it for "gap".
    gap = build(family, pooling="gap", **({"distillation": False} if family == "deit" else {}))
    assert "class_token" not in [layer.name for layer in gap.layers]
    assert gap.count_params() < build(family).count_params()
    assert gap(images_for(gap)).shape == (2, 10)


def test_representation_size_adds_tanh_pre_logits():
    model = randomized(build("vit", representation_size=16))
    pre_logits = model.get_layer("pre_logits")
    assert pre_logits.units == 16 and pre_logits.activation is keras.activations.tanh
    # The head now reads 16 features instead of 32.
    assert model.count_params() == build("vit").count_params() + (32 * 16 + 16) - (32 - 16) * 10


def test_head_is_zero_initialized():
    model = build("vit")
    assert not to_numpy(model.get_layer("head").kernel).any()


@pytest.mark.parametrize("mode", ["inception", "imagenet"])
def test_preprocessing_maps_pixels_to_training_range(mode):
    with_pre = randomized(build("vit", preprocessing=mode))
    without = build("vit", preprocessing=None)
    without.set_weights(with_pre.get_weights())
    x = images_for(with_pre)
    if mode == "inception":
        normalized = x / 127.5 - 1.0
    else:
        normalized = (x / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(
        to_numpy(with_pre(x)), to_numpy(without(normalized.astype("float32"))), atol=1e-4
    )


def test_convit_inserts_class_token_after_last_gpsa_block():
    model = build("convit")
    names = [layer.name for layer in model.layers]
    blocks = [layer for layer in model.layers if layer.name.startswith("encoderblock_")]
    assert [isinstance(b, GPSABlock) for b in blocks] == [True, True, False]
    assert names.index("class_token") == names.index("encoderblock_1") + 1
    assert model.get_layer("encoderblock_1").output.shape[1] == 16
    assert model.get_layer("encoderblock_2").output.shape[1] == 17
    assert model.get_layer("patch_encoder").position_embedding.shape == (4, 4, 32)
    assert not model.get_layer("class_token").use_position_embedding


def test_drop_path_rate_rises_linearly_over_blocks():
    model = build("vit", num_layers=5, drop_path_rate=0.2)
    rates = [model.get_layer(f"encoderblock_{i}").drop_path_rate for i in range(5)]
    np.testing.assert_allclose(rates, [0.0, 0.05, 0.1, 0.15, 0.2])


def test_vit_b16_is_the_face_of_the_package():
    model = keras_vit.ViT_B16(image_size=384, num_classes=10)
    assert model.name == "vit_b16"
    assert model.get_layer("patch_encoder").position_embedding.shape == (24, 24, 768)
    assert model.output_shape == (None, 10)


# ---- bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    "family,overrides,message",
    [
        ("vit", {"image_size": 30}, r"`image_size` must be divisible by `patch_size`. Received: image_size=\(30, 30\), patch_size=\(8, 8\)"),
        ("hybrid", {"patch_size": 3}, r"`image_size` must be divisible by `patch_size` \(the ResNet backbone turns it into a \(8, 8\) feature map\)"),
        ("vit", {"hidden_size": 30, "num_heads": 4}, r"`hidden_size` must be divisible by `num_heads`. Received: hidden_size=30, num_heads=4"),
        ("vit", {"pooling": "max"}, r"`pooling` must be one of \('token', 'gap'\). Received: pooling='max'"),
        ("convit", {"pooling": "mean"}, r"`pooling` must be one of .* Received: pooling='mean'"),
        ("convit", {"num_heads": 2}, r"perfect-square number of heads.*Received: num_heads=2"),
        ("convit", {"num_gpsa_layers": 4}, r"`num_gpsa_layers` must be an integer in \[0, num_layers=3\]. Received: num_gpsa_layers=4"),
        ("convit", {"num_gpsa_layers": 3}, r"use num_gpsa_layers < num_layers or pooling='gap'"),
        ("vit", {"preprocessing": "tf"}, r"`preprocessing` must be one of \('inception', 'imagenet', None\). Received: preprocessing='tf'"),
        ("vit", {"num_classes": 0}, r"`num_classes` must be a positive integer. Received: num_classes=0"),
        ("vit", {"dropout_rate": 1.0}, r"`dropout_rate` must be a float in \[0, 1\). Received: dropout_rate=1.0"),
        ("vit", {"initialization": "jax"}, r"`initialization` must be one of \('vit', 'deit'\). Received: initialization='jax'"),
        ("convit", {"initialization": None}, r"`initialization` must be one of .* Received: initialization=None"),
        ("vit", {"distillation": "yes"}, r"`distillation` must be .*Received: distillation='yes'"),
        ("deit", {"pooling": "gap"}, r"needs pooling='token'. Received: pooling='gap'"),
        ("convit", {"distillation": True, "pooling": "gap"}, r"needs pooling='token'. Received: pooling='gap'"),
        ("deit", {"representation_size": 16}, r"takes no pre-logits layer: use representation_size=None. Received: representation_size=16"),
    ],
)
def test_bad_arguments_are_clear_errors(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        build(family, **overrides)


def test_convit_non_square_heads_are_fine_without_local_init():
    model = build("convit", num_heads=2, locality_strength=0.0)
    assert model(images_for(model)).shape == (2, 10)


@pytest.mark.parametrize("family", FAMILIES)
def test_wrong_image_shape_at_call_time(family):
    model = build(family)
    shape = model.input_shape[1:]
    wrong = np.zeros((1, shape[0] * 2, shape[1], 3), "float32")
    with pytest.raises(ValueError, match=r"expected shape=\(None, \d+, \d+, 3\), found shape=\(1, \d+, \d+, 3\)"):
        model(wrong)


def test_backend_is_the_one_asked_for():
    assert keras.backend.backend() == os.environ.get("KERAS_BACKEND", "tensorflow")


@pytest.mark.parametrize("family", ["vit", "convit"])
def test_remat_changes_memory_not_results(family):
    plain = randomized(build(family))
    remat = build(family, remat=True)
    remat.set_weights(plain.get_weights())
    blocks = [layer for layer in remat.layers if layer.name.startswith("encoderblock_")]
    assert blocks and all(block.remat for block in blocks)
    x = images_for(plain, batch=4)
    y = np.arange(4) % 10
    np.testing.assert_allclose(to_numpy(remat(x)), to_numpy(plain(x)), atol=1e-6)
    for model in (plain, remat):
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.train_on_batch(x, y)
    for a, b in zip(remat.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)

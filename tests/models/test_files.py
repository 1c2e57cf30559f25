"""Every family's files as this version writes them: `.keras`, Keras weights files, `keras_vit.load_weights`."""

import keras
import numpy as np
import pytest

import keras_vit
from tests.models.tiny import TINY_MODELS, tiny_images, tiny_model
from tests.testing import to_numpy


@pytest.mark.parametrize("name", sorted(TINY_MODELS))
def test_keras_and_weights_files_round_trip(name, tmp_path):
    model = tiny_model(name)
    images = tiny_images(model)
    expected = to_numpy(model(images))
    assert np.abs(expected).max() > 1e-3  # random weights: no zero head hides a mismatch
    model.save(tmp_path / "model.keras")
    model.save_weights(tmp_path / "model.weights.h5")

    # The whole model from its file: the same layers, classes and outputs.
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    np.testing.assert_array_equal(to_numpy(loaded(images)), expected)

    # Into a fresh model of the same arguments: Keras' weights file and keras_vit's loader of `.keras` files.
    fresh = tiny_model(name, seed=1)
    fresh.load_weights(tmp_path / "model.weights.h5")
    np.testing.assert_array_equal(to_numpy(fresh(images)), expected)
    fresh = tiny_model(name, seed=1)
    keras_vit.load_weights(fresh, tmp_path / "model.keras")
    np.testing.assert_allclose(to_numpy(fresh(images)), expected, rtol=1e-6, atol=1e-6)

"""ClassToken and DeiT's distillation token against numpy (ViT Eq. 1, DeiT Sec. 5)."""

import keras
import numpy as np
import pytest

from keras_vit.layers import ClassToken, DistillationToken, DistillationTokenPooling
from tests.testing import ATOL, check_layer, set_random_weights, to_numpy


@pytest.mark.parametrize("use_position_embedding", [True, False])
def test_class_token_prepends_token_plus_its_position_slot(use_position_embedding):
    tokens = np.random.normal(size=(3, 5, 4)).astype("float32")
    check_layer(ClassToken, {"use_position_embedding": use_position_embedding}, tokens)
    layer = ClassToken(use_position_embedding=use_position_embedding)
    layer(tokens)
    set_random_weights(layer)
    weights = [to_numpy(w) for w in layer.weights]
    first = sum(weights)  # x_class, plus E_pos[0] when the slot is used
    output = to_numpy(layer(tokens))
    assert output.shape == (3, 6, 4)
    np.testing.assert_allclose(output[:, 0], np.broadcast_to(first, (3, 4)), atol=ATOL)
    np.testing.assert_array_equal(output[:, 1:], tokens)
    assert len(weights) == (2 if use_position_embedding else 1)


def test_class_token_handles_unknown_batch_symbolically():
    out = ClassToken()(keras.KerasTensor((None, 7, 8)))
    assert tuple(out.shape) == (None, 8, 8)


@pytest.mark.parametrize("use_position_embedding", [True, False])
def test_distillation_token_goes_right_after_the_class_token(use_position_embedding):
    # DeiT Fig. 2: [x_class; x_dist; patches], each token with its own slot of E_pos.
    tokens = np.random.normal(size=(3, 5, 4)).astype("float32")
    check_layer(DistillationToken, {"use_position_embedding": use_position_embedding}, tokens)
    layer = DistillationToken(use_position_embedding=use_position_embedding, name="distillation_token")
    layer(tokens)
    set_random_weights(layer)
    weights = [to_numpy(w) for w in layer.weights]
    paths = ["distillation_token/token", "distillation_token/position_embedding"]
    assert [w.path for w in layer.weights] == paths[: len(weights)]
    output = to_numpy(layer(tokens))
    assert output.shape == (3, 6, 4)
    np.testing.assert_array_equal(output[:, 0], tokens[:, 0])
    np.testing.assert_allclose(output[:, 1], np.broadcast_to(sum(weights), (3, 4)), atol=ATOL)
    np.testing.assert_array_equal(output[:, 2:], tokens[:, 1:])


def test_distillation_token_is_initialized_as_deit_does():
    layer = DistillationToken(use_position_embedding=False)
    layer.build((None, 3, 4096))
    token = to_numpy(layer.token)
    # Truncated normal of standard deviation 0.02: nothing beyond two of them.
    assert np.abs(token).max() <= 0.04 and 0.01 < token.std() < 0.02


def test_distillation_token_pooling_reads_the_second_token():
    tokens = np.random.normal(size=(2, 5, 3)).astype("float32")
    output = check_layer(DistillationTokenPooling, {}, tokens)
    np.testing.assert_array_equal(output, tokens[:, 1])


def test_distillation_token_handles_unknown_batch_symbolically():
    out = DistillationToken()(keras.KerasTensor((None, 7, 8)))
    assert tuple(out.shape) == (None, 8, 8)

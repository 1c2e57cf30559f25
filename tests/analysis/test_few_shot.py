"""Few-shot linear evaluation on data with a known linear answer."""

import numpy as np
import pytest

from keras_vit.few_shot import few_shot_linear, fit_least_squares


def test_least_squares_is_the_closed_form_solution():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    y = rng.integers(0, 3, 40)
    weights = fit_least_squares(x, y, 3, l2_reg=0.0)
    design = np.concatenate([x, np.ones((40, 1))], 1)
    expected, *_ = np.linalg.lstsq(design, 2 * np.eye(3)[y] - 1, rcond=None)
    np.testing.assert_allclose(weights, expected, atol=1e-10)
    # The ridge penalty shrinks the weights but not the bias.
    ridge = fit_least_squares(x, y, 3, l2_reg=100.0)
    assert np.abs(ridge[:-1]).sum() < np.abs(weights[:-1]).sum()


def test_few_shot_accuracy_on_linearly_separable_classes():
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(4, 16)) * 3
    def draw(n):
        labels = rng.integers(0, 4, n)
        return centres[labels] + rng.normal(size=(n, 16)), labels
    train, test = draw(400), draw(400)
    results = few_shot_linear(lambda x: x, train, test, shots=(1, 5, 25))
    assert set(results) == {1, 5, 25}
    assert results[25] > 0.95 and results[5] > 0.8
    assert results[1] <= results[25]


def test_few_shot_errors():
    x = np.zeros((4, 2))
    y = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match="Class 0 has 2 training examples, fewer than 3 shots"):
        few_shot_linear(lambda v: v, (x, y), (x, y), shots=(3,))
    with pytest.raises(ValueError, match=r"`shots` must hold positive integers. Received: shots=\(0,\)"):
        few_shot_linear(lambda v: v, (x, y), (x, y), shots=(0,))

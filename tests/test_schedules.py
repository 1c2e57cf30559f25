"""WarmupDecay against its formulas, and its serialization inside a saved model."""

import math

import keras
import numpy as np
import pytest

from tests.testing import to_numpy
from keras_vit.schedules import WarmupDecay


def lr(schedule, step):
    return float(to_numpy(schedule(step)))


@pytest.mark.parametrize("decay", ["linear", "cosine"])
def test_values_at_start_warmup_end_middle_and_end(decay):
    peak, end, warmup, total = 3e-3, 1e-5, 100, 1100
    schedule = WarmupDecay(peak, total, warmup, decay, end)
    assert lr(schedule, 0) == 0.0
    assert lr(schedule, 50) == pytest.approx(peak * 50 / warmup)
    assert lr(schedule, warmup) == pytest.approx(peak)
    middle = warmup + (total - warmup) // 2
    expected_middle = end + (peak - end) * (0.5 if decay == "linear" else 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr(schedule, middle) == pytest.approx(expected_middle, rel=1e-5)
    quarter = warmup + (total - warmup) // 4
    expected_quarter = end + (peak - end) * (0.75 if decay == "linear" else 0.5 * (1 + math.cos(math.pi * 0.25)))
    assert lr(schedule, quarter) == pytest.approx(expected_quarter, rel=1e-5)
    assert lr(schedule, total) == pytest.approx(end)
    assert lr(schedule, total + 500) == pytest.approx(end)


def test_no_warmup_starts_at_peak():
    assert lr(WarmupDecay(0.1, 10, 0, "cosine"), 0) == pytest.approx(0.1)
    assert lr(WarmupDecay(0.1, 10, 0, "constant"), 7) == pytest.approx(0.1)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"`decay` must be one of \('linear', 'cosine', 'constant'\). Received: decay='step'"):
        WarmupDecay(0.1, 10, 0, "step")
    with pytest.raises(ValueError, match=r"`warmup_steps` must be in \[0, total_steps\). Received: warmup_steps=10, total_steps=10"):
        WarmupDecay(0.1, 10, 10)


def test_saved_model_reloads_with_its_schedule(tmp_path):
    schedule = WarmupDecay(1e-3, 500, 50, "linear", 1e-6)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.AdamW(schedule), loss="mse")
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    model.save(str(tmp_path / "m.keras"))
    optimizer = keras.models.load_model(str(tmp_path / "m.keras")).optimizer
    restored = keras.optimizers.schedules.deserialize(optimizer.get_config()["learning_rate"])
    assert isinstance(restored, WarmupDecay) and restored.get_config() == schedule.get_config()
    # The reloaded optimizer follows the schedule at its own step (one step taken).
    assert float(to_numpy(optimizer.learning_rate)) == pytest.approx(lr(schedule, 1))
    assert lr(restored, 20) == pytest.approx(lr(schedule, 20))

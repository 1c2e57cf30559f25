"""A run's schedule fitted to its length: warmup and EMA no longer than the run (#61)."""

import dataclasses

import pytest

from train.configs import get_config
from train.optimization import fit_to_run, make_optimizer


def test_a_six_step_fine_tune_gets_no_warmup_and_no_ema_and_says_so():
    # The preset's 500 warmup steps and EMA 0.9999 (about 10,000 steps) kept the head at zero.
    config = get_config("vit_finetune")
    warmup, decay, notes = fit_to_run(config, 6)
    assert (warmup, decay) == (0, None)
    assert notes == [
        "--warmup_steps=500 is not shorter than this run's 6 steps: warmup fitted to 0 steps (a tenth of the run).",
        "--ema_decay=0.9999 averages over about 10,000 steps, more than this run's 6: EMA off. "
        "--ema_decay=0 turns EMA off.",
    ]
    assert not make_optimizer(config, 6).use_ema


def test_a_longer_short_run_keeps_a_warmup_and_an_average_over_a_tenth_of_it():
    warmup, decay, notes = fit_to_run(get_config("vit_finetune"), 300)
    assert warmup == 30 and decay == pytest.approx(1 - 1 / 30) and len(notes) == 2
    assert "EMA decay fitted to 0.966667 (an average over a tenth of the run)" in notes[1]
    assert make_optimizer(get_config("vit_finetune"), 300).ema_momentum == pytest.approx(0.966667)


@pytest.mark.parametrize("steps", [471, 5628])
def test_a_run_as_long_as_its_schedule_keeps_it(steps):
    # The main job: 12 epochs of 469 steps, warmup 470, EMA 0.99 (100 steps).
    config = get_config("default")
    assert fit_to_run(config, steps) == (config.warmup_steps, config.ema_decay, [])


def test_an_ema_decay_of_zero_turns_ema_off():
    config = dataclasses.replace(get_config("default"), ema_decay=0.0)
    assert fit_to_run(config, 5628) == (470, None, [])
    assert not make_optimizer(config, 5628).use_ema

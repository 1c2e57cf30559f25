"""Shared pytest setup: deterministic seeds per test."""

import keras
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)
    np.random.seed(0)
    yield
    keras.config.set_dtype_policy("float32")

"""`.keras` files saved by an earlier version load and compute what they computed then."""

import pathlib

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers)
from tests.testing import to_numpy

LEGACY = pathlib.Path(__file__).parent.parent / "data" / "legacy"
NAMES = sorted(path.stem for path in LEGACY.glob("*.keras"))


def test_every_family_has_a_legacy_file():
    assert NAMES == ["convit", "deit_distilled", "hybrid", "swin", "vit", "vit_gap_dynamic"]


@pytest.mark.parametrize("name", NAMES)
def test_legacy_file_loads_with_the_same_outputs(name):
    model = keras.saving.load_model(LEGACY / f"{name}.keras")
    saved = np.load(LEGACY / f"{name}.npz")
    # The same float32 graph on another backend or oneDNN setting differs by rounding only.
    np.testing.assert_allclose(to_numpy(model(saved["images"], training=False)), saved["outputs"],
                               rtol=1e-4, atol=1e-4)

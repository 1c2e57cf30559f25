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
    assert NAMES == ["axial", "convit", "convit_frozen", "deit_distilled", "hybrid", "swin", "vit", "vit_gap_dynamic"]


@pytest.mark.parametrize("name", NAMES)
def test_legacy_file_loads_with_the_same_outputs(name):
    model = keras.saving.load_model(LEGACY / f"{name}.keras")
    saved = np.load(LEGACY / f"{name}.npz")
    # The same float32 graph on another backend or oneDNN setting differs by rounding only.
    np.testing.assert_allclose(to_numpy(model(saved["images"], training=False)), saved["outputs"],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["convit", "convit_frozen"])
def test_the_first_versions_convit_blocks_load_as_gpsa_blocks_and_save_again(name, tmp_path):
    # Written as `TransformerBlock(use_gpsa=True, ...)`, read as `GPSABlock`s with their switches.
    from keras_vit.models.convit import GPSABlock, gpsa_blocks

    model = keras.saving.load_model(LEGACY / f"{name}.keras")
    blocks = gpsa_blocks(model)
    assert [block.name for block in blocks] == ["encoderblock_0", "encoderblock_1"]
    assert all(isinstance(block, GPSABlock) for block in blocks)
    frozen = name == "convit_frozen"
    assert all((block.train_gating, block.train_gpsa_attention) == (not frozen, not frozen) for block in blocks)
    assert bool(model.non_trainable_weights) == frozen
    images = np.load(LEGACY / f"{name}.npz")["images"]
    path = tmp_path / "again.keras"
    model.save(path)
    again = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(again(images)), to_numpy(model(images)), rtol=1e-6, atol=1e-6)

"""Known checkpoints: trust-on-first-use hashes, names, and their check against the model."""

import hashlib
import os

import numpy as np
import pytest

import keras_vit
from keras_vit.architectures import ARCHITECTURES
from keras_vit.weights import registry
from tests.testing import set_random_weights, to_numpy
from tests.weights.checkpoints import TINY, official_npz_arrays, save_npz


def tiny(**overrides):
    return keras_vit.VisionTransformer(**{**TINY, "preprocessing": None, **overrides})


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A known checkpoint without a pinned hash, served from a local file:// address."""
    source = save_npz(tmp_path / "served.npz", official_npz_arrays())
    monkeypatch.setitem(registry.KNOWN_CHECKPOINTS, "Tiny/served", registry.KnownCheckpoint(f"file://{source}"))
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache" / "models" / "keras_vit" / "served.npz")


def test_first_use_records_the_hash_beside_the_file(served):
    report = keras_vit.load_weights(tiny(), "Tiny/served")
    assert report.source == served and report.exact
    with open(f"{served}.sha256") as f:
        assert f.read() == f"{sha256(served)}  served.npz\n"
    # Written atomically: no temporary file is left beside it.
    assert sorted(os.listdir(os.path.dirname(served))) == ["served.npz", "served.npz.sha256"]


def test_later_uses_verify_without_downloading_again(served):
    keras_vit.load_weights(tiny(), "Tiny/served")
    stamp = os.stat(served).st_mtime_ns, os.stat(f"{served}.sha256").st_mtime_ns
    assert keras_vit.load_weights(tiny(), "Tiny/served").exact
    assert (os.stat(served).st_mtime_ns, os.stat(f"{served}.sha256").st_mtime_ns) == stamp


def test_a_deleted_file_is_downloaded_again_and_checked_against_the_record(served):
    keras_vit.load_weights(tiny(), "Tiny/served")
    recorded = open(f"{served}.sha256").read()
    os.remove(served)
    assert keras_vit.load_weights(tiny(), "Tiny/served").exact
    assert open(f"{served}.sha256").read() == recorded


def test_a_file_cached_before_records_existed_is_recorded_at_its_first_use(served, tmp_path):
    os.makedirs(os.path.dirname(served))
    with open(tmp_path / "served.npz", "rb") as src, open(served, "wb") as dst:
        dst.write(src.read())
    assert registry.fetch(registry.KNOWN_CHECKPOINTS["Tiny/served"]) == served
    assert open(f"{served}.sha256").read().split()[0] == sha256(served)


def test_a_pinned_hash_is_checked_and_no_record_is_written(served, monkeypatch, tmp_path):
    source = str(tmp_path / "served.npz")
    monkeypatch.setitem(registry.KNOWN_CHECKPOINTS, "Tiny/served", registry.KnownCheckpoint(f"file://{source}", sha256(source)))
    assert keras_vit.load_weights(tiny(), "Tiny/served").exact
    assert not os.path.exists(f"{served}.sha256")


def test_every_known_checkpoint_names_a_variant_whose_architecture_it_states():
    for key in registry.KNOWN_CHECKPOINTS:
        variant = key.split("/")[0]
        assert variant in ARCHITECTURES, key
        architecture = registry.checkpoint_architecture(key)
        assert architecture["num_channels"] == 3 and architecture["builder"] == ARCHITECTURES[variant][0]


def test_a_known_name_loads_into_a_renamed_model(tmp_path, monkeypatch):
    # `name=` renames the model, so the builder must resolve a short checkpoint
    # name from the variant, not from the model's name.
    source = keras_vit.ViT_Ti16(num_classes=3, image_size=32)
    set_random_weights(source)
    path = str(tmp_path / "ti.keras")
    source.save(path)
    monkeypatch.setitem(
        registry.KNOWN_CHECKPOINTS, "ViT_Ti16/unit-test",
        registry.KnownCheckpoint(f"file://{path}", config={"num_classes": 3, "image_size": 32}),
    )
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = keras_vit.ViT_Ti16(weights="unit-test", name="renamed")
    assert model.name == "renamed"
    for a, b in zip(model.weights, source.weights):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))

"""load_weights: resolution change, head surgery, strict mode, bad files, known names."""

import hashlib
import os

import numpy as np
import pytest

import keras_vit
from keras_vit import checkpoints
from keras_vit.weights import registry
from runs.reference import torch
from tests.testing import set_random_weights, to_numpy
from tests.weights.checkpoints import TINY, official_npz_arrays, save_npz


def tiny(**overrides):
    return keras_vit.VisionTransformer(**{**TINY, "preprocessing": None, **overrides})


def weights_of(model):
    return [to_numpy(w).copy() for w in model.weights]


# ---- resolution change (ViT Sec. 3.2) -----------------------------------------


def smooth_grid(rows, cols, width=6):
    y, x = np.meshgrid(np.linspace(0, 1, rows), np.linspace(0, 1, cols), indexing="ij")
    return np.stack([np.sin(3 * x + k) * np.cos(2 * y - k) for k in range(width)], -1).astype("float32")


@pytest.mark.parametrize("source,target", [((14, 14), (24, 24)), ((7, 7), (10, 14)), ((12, 8), (6, 4))])
def test_resampling_matches_an_independent_resize_and_stays_smooth(source, target):
    grid = smooth_grid(*source)
    ours = keras_vit.resample_position_embedding(grid, target)
    reference = torch.nn.functional.interpolate(
        torch.from_numpy(grid).permute(2, 0, 1)[None], size=target, mode="bilinear", align_corners=False
    )[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(ours, reference, atol=1e-6)
    # Smooth in, smooth out: neighbouring cells differ by no more than in the source.
    for axis in (0, 1):
        if target[axis] >= source[axis]:
            assert np.abs(np.diff(ours, axis=axis)).max() <= np.abs(np.diff(grid, axis=axis)).max() + 1e-6


def test_resampling_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"`grid` must have shape \(rows, cols, width\). Received: grid.shape=\(4, 5\)"):
        keras_vit.resample_position_embedding(np.zeros((4, 5)), (2, 2))
    with pytest.raises(ValueError, match=r"`new_grid_size` must be two positive integers. Received: new_grid_size=\(0, 3\)"):
        keras_vit.resample_position_embedding(np.zeros((4, 5, 2)), (0, 3))


def test_loading_into_a_higher_resolution_resamples_and_keeps_the_class_slot(tmp_path):
    arrays = official_npz_arrays()
    path = save_npz(tmp_path / "vit224.npz", arrays)
    model = tiny(image_size=(48, 64))  # 6 x 8 grid from a 4 x 4 one, like 224 -> 384
    report = keras_vit.load_weights(model, path)
    assert report.resampled == [("patch_encoder/position_embedding", (4, 4, 32), (6, 8, 32))]
    sequence = arrays["Transformer/posembed_input/pos_embedding"][0]
    np.testing.assert_array_equal(to_numpy(model.get_layer("class_token").position_embedding), sequence[0])
    expected = keras_vit.resample_position_embedding(sequence[1:].reshape(4, 4, 32), (6, 8))
    np.testing.assert_allclose(to_numpy(model.get_layer("patch_encoder").position_embedding), expected)
    logits = to_numpy(model(np.random.uniform(-1, 1, (2, 48, 64, 3)).astype("float32")))
    assert np.isfinite(logits).all() and logits.std() > 0
    with pytest.raises(ValueError, match="strict loading found mismatches for \\['patch_encoder/position_embedding'\\]"):
        keras_vit.load_weights(tiny(image_size=(48, 64)), path, strict=True)


# ---- head surgery (ViT App. B.1.1) --------------------------------------------


def test_new_num_classes_gets_a_zero_head_and_drops_pre_logits(tmp_path):
    path = save_npz(tmp_path / "i21k.npz", official_npz_arrays(pre_logits=24, classes=21))
    model = tiny(num_classes=5)
    set_random_weights(model.get_layer("head"))
    report = keras_vit.load_weights(model, path)
    assert not to_numpy(model.get_layer("head").kernel).any()
    skipped = dict(report.skipped)
    assert "num_classes differs (21 in the checkpoint, 5 in the model)" in skipped["head/kernel"]
    assert "dropped with the head" in skipped["pre_logits/kernel"]
    assert "head/kernel" in dict(report.missing)
    text = report.table()
    assert "skipped" in text and "pre_logits/kernel" in text and "zero-initialized new head" in text
    with pytest.raises(ValueError, match=r"strict loading found mismatches for .*'head/kernel'"):
        keras_vit.load_weights(tiny(num_classes=5), path, strict=True)


def test_keep_pre_logits_keeps_it_with_a_new_head(tmp_path):
    arrays = official_npz_arrays(pre_logits=24, classes=21)
    path = save_npz(tmp_path / "i21k.npz", arrays)
    model = tiny(num_classes=5, representation_size=24)
    keras_vit.load_weights(model, path, keep_pre_logits=True)
    np.testing.assert_array_equal(to_numpy(model.get_layer("pre_logits").kernel), arrays["pre_logits/kernel"])
    assert not to_numpy(model.get_layer("head").kernel).any()


def test_model_without_top_skips_the_head(tmp_path):
    path = save_npz(tmp_path / "vit.npz", official_npz_arrays())
    report = keras_vit.load_weights(tiny(include_top=False), path)
    assert dict(report.skipped)["head/kernel"] == "the model has no 'head' layer"


# ---- formats and bad files ----------------------------------------------------


def test_keras_file_round_trip(tmp_path):
    source = tiny()
    set_random_weights(source)
    source.save(str(tmp_path / "m.keras"))
    model = tiny()
    report = keras_vit.load_weights(model, str(tmp_path / "m.keras"), strict=True)
    assert report.format == "keras" and report.layout == "keras_vit"
    for a, b in zip(weights_of(model), weights_of(source)):
        np.testing.assert_array_equal(a, b)


def _assert_fails_unchanged(model, path, message):
    before = weights_of(model)
    with pytest.raises(ValueError, match=message):
        keras_vit.load_weights(model, path)
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)


def test_truncated_npz(tmp_path):
    path = save_npz(tmp_path / "vit.npz", official_npz_arrays())
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    _assert_fails_unchanged(tiny(), path, r"vit.npz")


def test_truncated_safetensors(tmp_path):
    from tests.weights.checkpoints import randomize_torch, save_state_dict, timm_vit

    path = save_state_dict(tmp_path / "vit.safetensors", randomize_torch(timm_vit()))
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-100])
    _assert_fails_unchanged(tiny(), path, r"vit.safetensors' is truncated")


def test_checkpoint_of_another_model_size(tmp_path):
    path = save_npz(tmp_path / "wide.npz", official_npz_arrays(hidden=64, heads=2))
    _assert_fails_unchanged(
        tiny(), path,
        r"wide.npz: (weight 'patch_encoder/projection/kernel' has shape \(192, 64\) in the checkpoint but \(192, 32\)|the position embeddings are 64 wide)",
    )


def test_unknown_format(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(256))
    _assert_fails_unchanged(tiny(), str(path), r"Unknown checkpoint format of .*weights.bin.*Accepted formats: .npz")


def test_missing_key_names_file_and_key(tmp_path):
    arrays = official_npz_arrays()
    del arrays["Transformer/encoderblock_1/LayerNorm_2/scale"]
    path = save_npz(tmp_path / "partial.npz", arrays)
    _assert_fails_unchanged(tiny(), path, r"partial.npz: the checkpoint has no value for 1 model weight\(s\): \['encoderblock_1/norm2/gamma'\]")


def test_missing_file_or_unknown_name():
    # A path says that the file is missing first; a name gets the known ones close to it.
    with pytest.raises(ValueError, match=r"`checkpoint` file not found: 'nope.npz' does not exist \(a known checkpoint "
                                         r"name has no file extension, e.g. 'ViT_B16/augreg'\)"):
        keras_vit.load_weights(tiny(), "nope.npz")
    with pytest.raises(ValueError, match=r"Close names: \['ViT_B16/imagenet21k'.*Received: checkpoint='ViT_B16/imagenet21"):
        keras_vit.load_weights(tiny(), "ViT_B16/imagenet21")


# ---- known names --------------------------------------------------------------


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """A known checkpoint served from a local file:// address, cached under tmp_path."""
    path = save_npz(tmp_path / "served.npz", official_npz_arrays(classes=7))
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    entry = checkpoints.KnownCheckpoint(f"file://{path}", digest, {"num_classes": 7})
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/unit-test", entry)
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    return entry


def test_known_name_downloads_into_the_cache_and_loads(registered, tmp_path):
    model = tiny(num_classes=7, name="tiny")
    report = keras_vit.load_weights(model, "unit-test")
    assert report.source.startswith(str(tmp_path / "cache"))
    assert report.exact


def test_corrupt_download_is_detected_and_removed(registered, monkeypatch, tmp_path):
    bad = checkpoints.KnownCheckpoint(registered.url, "0" * 64, registered.config)
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/unit-test", bad)
    model = tiny(num_classes=7, name="tiny")
    before = weights_of(model)
    with pytest.raises(ValueError, match="corrupt or incomplete: its sha256 is not the recorded 0000"):
        keras_vit.load_weights(model, "Tiny/unit-test")
    assert not any(name.endswith(".npz") for _, _, files in os.walk(tmp_path / "cache") for name in files)
    for a, b in zip(weights_of(model), before):
        np.testing.assert_array_equal(a, b)


def test_builder_takes_a_known_name_and_its_settings(tmp_path, monkeypatch):
    source = keras_vit.ViT_Ti16(num_classes=3, image_size=64)
    set_random_weights(source)
    path = str(tmp_path / "ti.keras")
    source.save(path)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    monkeypatch.setitem(
        checkpoints.KNOWN_CHECKPOINTS, "ViT_Ti16/unit-test",
        checkpoints.KnownCheckpoint(f"file://{path}", digest, {"num_classes": 3, "image_size": 64}),
    )
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = keras_vit.ViT_Ti16(weights="unit-test")
    assert model.output_shape == (None, 3) and model.input_shape == (None, 64, 64, 3)
    for a, b in zip(weights_of(model), weights_of(source)):
        np.testing.assert_array_equal(a, b)
    # Overriding a setting of the checkpoint works too: a new head of 5 classes.
    assert keras_vit.ViT_Ti16(weights="unit-test", num_classes=5).output_shape == (None, 5)

"""Known checkpoints: trust-on-first-use hashes, names, and their check against the model."""

import hashlib
import os

import numpy as np
import pytest

import keras_vit
from keras_vit.architectures import ARCHITECTURES
from keras_vit import checkpoints
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
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(f"file://{source}"))
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
    assert registry.fetch(checkpoints.KNOWN_CHECKPOINTS["Tiny/served"]) == served
    assert open(f"{served}.sha256").read().split()[0] == sha256(served)


def test_a_pinned_hash_is_checked_and_no_record_is_written(served, monkeypatch, tmp_path):
    source = str(tmp_path / "served.npz")
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(f"file://{source}", sha256(source)))
    assert keras_vit.load_weights(tiny(), "Tiny/served").exact
    assert not os.path.exists(f"{served}.sha256")


def test_every_known_checkpoint_names_a_variant_whose_architecture_it_states():
    for key in checkpoints.KNOWN_CHECKPOINTS:
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
        checkpoints.KNOWN_CHECKPOINTS, "ViT_Ti16/unit-test",
        checkpoints.KnownCheckpoint(f"file://{path}", config={"num_classes": 3, "image_size": 32}),
    )
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = keras_vit.ViT_Ti16(weights="unit-test", name="renamed")
    assert model.name == "renamed"
    for a, b in zip(model.weights, source.weights):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


# ---- DeiT (timm hub names) --------------------------------------------------------

DEIT_HUB = {
    "DeiT_Ti16": "deit_tiny_patch16_224",
    "DeiT_S16": "deit_small_patch16_224",
    "DeiT_B16": "deit_base_patch16_224",
    "DeiT_B16_384": "deit_base_patch16_384",
    "DeiT_Ti16_distilled": "deit_tiny_distilled_patch16_224",
    "DeiT_S16_distilled": "deit_small_distilled_patch16_224",
    "DeiT_B16_distilled": "deit_base_distilled_patch16_224",
    "DeiT_B16_384_distilled": "deit_base_distilled_patch16_384",
}


@pytest.mark.parametrize("variant", sorted(DEIT_HUB))
def test_deit_names_resolve_to_the_timm_hub_files(variant):
    from runs.reference import timm

    key, known = checkpoints.find_checkpoint("imagenet", variant)
    assert key == f"{variant}/imagenet"
    tag = f"{DEIT_HUB[variant]}.fb_in1k"
    assert known.url == f"https://huggingface.co/timm/{tag}/resolve/main/model.safetensors"
    # The name, resolution and normalization timm itself publishes for it.
    cfg = timm.models.get_pretrained_cfg(tag)
    assert cfg.hf_hub_id == f"timm/{tag}" and cfg.input_size == (3, known.config["image_size"], known.config["image_size"])
    assert known.config["preprocessing"] == "imagenet" and tuple(cfg.mean) == (0.485, 0.456, 0.406)
    assert registry.checkpoint_architecture(key)["distillation"] is variant.endswith("_distilled")


@pytest.mark.parametrize(
    "build,weights,message",
    [
        (lambda w: keras_vit.DeiT_B16(weights=w), "DeiT_B16_distilled/imagenet",
         r"'DeiT_B16_distilled/imagenet' is one of DeiT_B16_distilled and does not fit DeiT_B16: "
         r"distillation=True vs distillation=False .*Nothing was downloaded"),
        (lambda w: keras_vit.DeiT_S16_distilled(weights=w), "DeiT_S16/imagenet",
         r"does not fit DeiT_S16_distilled: distillation=False vs distillation=True"),
        (lambda w: keras_vit.load_weights(tiny(distillation=True), w), "DeiT_Ti16/imagenet",
         r"does not fit the model 'vision_transformer': hidden_size=192 vs hidden_size=32, .*distillation=False vs distillation=True"),
    ],
)
def test_a_deit_name_of_another_architecture_is_refused_before_downloading(tmp_path, monkeypatch, build, weights, message):
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match=message):
        build(weights)
    assert not os.path.exists(tmp_path / "cache")


def test_a_deit_name_loads_the_cached_timm_file(tmp_path, monkeypatch):
    from runs.reference import timm, torch
    from tests.weights.checkpoints import randomize_torch, save_state_dict

    # The file timm's hub serves, generated here and placed where `fetch` keeps it.
    reference = randomize_torch(timm.create_model("deit_tiny_distilled_patch16_224", pretrained=False), seed=1)
    cache = tmp_path / "cache" / "models" / "keras_vit"
    cache.mkdir(parents=True)
    save_state_dict(cache / "deit_tiny_distilled_patch16_224.fb_in1k.safetensors", reference)
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = keras_vit.DeiT_Ti16_distilled(weights="imagenet")
    assert model.output_shape == (None, 1000) and model.input_shape == (None, 224, 224, 3)
    # The model's own preprocessing is timm's ImageNet mean/std normalization.
    pixels = np.random.default_rng(0).uniform(0, 255, (1, 224, 224, 3)).astype("float32")
    normalized = (pixels / 255 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    with torch.no_grad():
        expected = reference(torch.from_numpy(normalized.transpose(0, 3, 1, 2).astype("float32").copy())).numpy()
    # Twelve full-width blocks of random weights give logits of several units:
    # the 1e-4 bar for O(1) logits, scaled to them.
    np.testing.assert_allclose(to_numpy(model(pixels)), expected, atol=1e-4 * np.abs(expected).max(), rtol=0)


def test_a_failed_download_is_one_message_that_names_the_local_routes(served, tmp_path, monkeypatch):
    # A file:// address that does not exist fails in `get_file` as an unreachable host does offline.
    origin = f"file://{tmp_path}/gone/served.npz"
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(origin))
    with pytest.raises(registry.CheckpointDownloadError) as caught:
        keras_vit.load_weights(tiny(), "Tiny/served")
    message = str(caught.value)
    assert message.startswith(f"The checkpoint could not be downloaded from {origin} (")
    assert "pass its path (weights='/path/to/served.npz', or --pretrained= in train/main.py)" in message
    assert f"or put it at {served}, where it is found without a download" in message
    # One message, no chained traceback, and nothing half-written in the cache.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert not os.path.exists(served)


# ---- the records ------------------------------------------------------------------


def test_every_record_is_named_by_its_key_and_says_its_layout_and_transform():
    for key, record in checkpoints.KNOWN_CHECKPOINTS.items():
        assert record.name == key and record.variant == key.split("/")[0]
        assert record.layout and record.eval_config.source, key
        # The converter the layout picks is one the loader has (a family's, or ViT's own).
        assert record.layout in {"official ViT", "timm ViT", "timm ConViT", "timm Swin", "timm DINOv2"}, key


def test_users_list_the_checkpoints_and_read_one_record():
    assert checkpoints.list_checkpoints() == sorted(checkpoints.KNOWN_CHECKPOINTS)
    assert keras_vit.list_checkpoints("vit_b16") == [
        "ViT_B16/augreg", "ViT_B16/imagenet21k", "ViT_B16/imagenet21k+imagenet2012"]
    record = keras_vit.get_checkpoint("deit_s16/IMAGENET")
    assert (record.name, record.variant, record.layout) == ("DeiT_S16/imagenet", "DeiT_S16", "timm ViT")
    assert record.timm_tag == "deit_small_patch16_224.fb_in1k" and record.url.endswith(f"/{record.timm_tag}/"
                                                                                         "resolve/main/model.safetensors")
    assert (record.eval_config.crop_fraction, record.timm_eval_config.crop_fraction) == (0.875, 0.9)
    assert (record.top1, record.config["image_size"]) == (79.9, 224)
    # A variant of which none was published has none; a misspelt one is refused with close names.
    assert keras_vit.list_checkpoints("AxialViT_B16") == []
    with pytest.raises(ValueError, match=r"Unknown variant\. Close: \['ViT_B16'.* Received: variant='ViT_B17'"):
        keras_vit.list_checkpoints("ViT_B17")


@pytest.mark.parametrize("name, message", [
    ("DeiT_S16/imagenet2012", r"Close names: \['DeiT_S16/imagenet'.*lists all \d+\. Received: name='DeiT_S16/imagenet2012'"),
    # A full name is asked for, never a file, even one that exists.
    ("weights/vit_b16.npz", r"`name` must be a known checkpoint name, '<Variant>/<checkpoint>' .*not a file path"),
    (__file__, r"`name` must be a known checkpoint name, '<Variant>/<checkpoint>' .*not a file path"),
    (3, r"`name` must be a known checkpoint name. Received: name=3"),
])
def test_an_unknown_record_is_refused_with_close_names_or_as_a_missing_file(name, message):
    with pytest.raises(ValueError, match=message):
        keras_vit.get_checkpoint(name)


def test_a_record_is_registered_once_and_only_whole():
    record = checkpoints.KNOWN_CHECKPOINTS["ViT_Ti16/augreg"]
    before = dict(checkpoints.KNOWN_CHECKPOINTS)
    with pytest.raises(ValueError, match=r"Checkpoints registered already.*: \['ViT_Ti16/augreg'\]"):
        checkpoints.register_checkpoints({"ViT_Ti16/augreg": record})
    # Looked up in any case, a name that differs only in case would never be found.
    with pytest.raises(ValueError, match=r"Checkpoints registered already \(names compare in any case\): "
                                         r"\['vit_ti16/AUGREG'\]"):
        checkpoints.register_checkpoints({"vit_ti16/AUGREG": record.__class__(record.url, layout="official ViT",
                                                                              eval_config=record.eval_config)})
    with pytest.raises(ValueError, match=r"name must be its key.*Received: key='ViT_Ti16', name='ViT_Ti16/augreg'"):
        checkpoints.register_checkpoints({"ViT_Ti16": record})
    with pytest.raises(ValueError, match=r"Checkpoint 'ViT_Ti16/other' has no layout"):
        checkpoints.register_checkpoints({"ViT_Ti16/fine": record.__class__(record.url, layout="official ViT",
                                                                             eval_config=record.eval_config),
                                          "ViT_Ti16/other": record.__class__(record.url,
                                                                             eval_config=record.eval_config)})
    assert checkpoints.KNOWN_CHECKPOINTS == before


def test_a_downloaded_file_of_another_layout_than_its_record_is_refused(tmp_path, monkeypatch):
    # The record's layout picks the converter: a `.keras` file served under a `.npz` record's name is not it.
    source = tiny()
    path = tmp_path / "served.keras"
    source.save(path)
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "Tiny/served", checkpoints.KnownCheckpoint(
        f"file://{path}", name="Tiny/served", layout="official ViT"))
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    model = tiny()
    before = [to_numpy(w).copy() for w in model.weights]
    with pytest.raises(ValueError, match=r"served.keras holds a checkpoint in the keras_vit layout, but 'Tiny/served' "
                                         r"was published in the official ViT layout: the file is not that checkpoint"):
        keras_vit.load_weights(model, "Tiny/served")
    assert all(np.array_equal(a, to_numpy(b)) for a, b in zip(before, model.weights))

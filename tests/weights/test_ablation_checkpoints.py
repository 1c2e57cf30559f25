"""Known checkpoints and the papers' ablation switches (issue #29): refused before any download, or loaded.

A switch that changes the weights' shapes or meaning (ViT's position embeddings,
Swin's position terms, ConViT's gates frozen at 0) is refused on every path that
names a known checkpoint: a builder's `weights`, `keras_vit.load_weights` and the
trainer's `--pretrained`. A switch that changes neither (Swin's unshifted windows,
ConViT's frozen GPSA attention) loads the checkpoint. The checkpoints here are tiny
published-like models served from local `file://` addresses.
"""

import os
import re

import numpy as np
import pytest

import keras_vit
from keras_vit import checkpoints, inspection
from keras_vit.architectures import ABLATION_DEFAULTS, ARCHITECTURES, architecture, mismatches
from keras_vit.models.convit import ConViT, gpsa_blocks
from keras_vit.models.convit.inspection import architecture_of as convit_arguments
from keras_vit.models.swin import SwinTransformer, swin_arguments
from keras_vit.models.variants import TESTING_VARIANTS
from keras_vit.models.vit import VisionTransformer
from keras_vit.weights import loading, registry
from tests.testing import set_random_weights, to_numpy
from train.configs import TrainConfig
from train.modeling import build_model

PUBLISHED = {"num_classes": 10, "image_size": 32, "num_channels": 3}

# family -> (builder, the sizes of its tiny variant).
FAMILIES = {
    "vit": (VisionTransformer, dict(patch_size=8, hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64)),
    "convit": (ConViT, {k: v for k, v in TESTING_VARIANTS["convit"][1].items() if k not in PUBLISHED}),
    # Stage 0 an 8 x 8 map of 4 x 4 windows, its second block shifted.
    "swin": (SwinTransformer, dict(patch_size=4, embed_dim=16, depths=(2, 2), num_heads=(1, 2), window_size=4)),
}

# (family, switches, what `weights` needs, what the model has), every value each switch
# takes besides the published one.
REFUSED = [
    ("vit", dict(position_embedding="none"), "position_embedding='learned_1d', position_embedding_at='stem'",
     "position_embedding='none', position_embedding_at='stem'"),
    ("vit", dict(position_embedding="learned_2d"), "position_embedding='learned_1d'", "position_embedding='learned_2d'"),
    ("vit", dict(position_embedding="relative"), "position_embedding='learned_1d'", "position_embedding='relative'"),
    ("vit", dict(position_embedding_at="every_layer"), "position_embedding_at='stem'",
     "position_embedding_at='every_layer'"),
    ("vit", dict(position_embedding_at="every_layer_shared"), "position_embedding_at='stem'",
     "position_embedding_at='every_layer_shared'"),
    ("convit", dict(train_gating=False), "train_gating=True", "train_gating=False"),
    ("convit", dict(train_gating=False, train_gpsa_attention=False), "train_gating=True", "train_gating=False"),
    ("swin", dict(position_embedding="none"), "position_embedding='relative', absolute_position_embedding=False",
     "position_embedding='none', absolute_position_embedding=False"),
    ("swin", dict(position_embedding="absolute"), "position_embedding='relative'",
     "position_embedding='absolute', absolute_position_embedding=True"),
    ("swin", dict(position_embedding="absolute+relative"), "position_embedding='relative'",
     "position_embedding='absolute+relative', absolute_position_embedding=True"),
    ("swin", dict(position_embedding="relative_without_content"), "position_embedding='relative'",
     "position_embedding='relative_without_content'"),
    ("swin", dict(absolute_position_embedding=True), "absolute_position_embedding=False",
     "position_embedding='absolute+relative', absolute_position_embedding=True"),
]
ALLOWED = [("convit", dict(train_gpsa_attention=False)), ("swin", dict(shifted_windows=False))]


def refused(family, **switches):
    """The entry of `REFUSED` for these switches."""
    return next(case for case in REFUSED if case[:2] == (family, switches))


def build(family, **overrides):
    builder, sizes = FAMILIES[family]
    return builder(**{**sizes, **PUBLISHED, "preprocessing": None, **overrides})


@pytest.fixture
def published(tmp_path, monkeypatch):
    """`publish(family)`: a default tiny model of `family` served as the known checkpoint `Tiny_{family}/published`.

    Returns the checkpoint's name and its model. Every fetch is recorded in
    `publish.fetched`; the cache is `publish.cache`.
    """
    cache = tmp_path / "cache"
    monkeypatch.setattr(registry, "CACHE_DIR", str(cache))
    fetched = []

    def recording_fetch(checkpoint, cache_dir=None):
        fetched.append(checkpoint.url)
        return registry.fetch(checkpoint, cache_dir)

    monkeypatch.setattr(loading, "fetch", recording_fetch)

    def publish(family):
        builder, sizes = FAMILIES[family]
        model = build(family)
        set_random_weights(model, seed=3)
        path = str(tmp_path / f"{family}.keras")
        model.save(path)
        variant = f"Tiny_{family}"
        monkeypatch.setitem(ARCHITECTURES, variant, (builder.__name__, sizes))
        monkeypatch.setitem(
            checkpoints.KNOWN_CHECKPOINTS, f"{variant}/published",
            checkpoints.KnownCheckpoint(f"file://{path}", config={**PUBLISHED, **ABLATION_DEFAULTS[builder.__name__]}),
        )
        return f"{variant}/published", model

    publish.fetched, publish.cache = fetched, cache
    return publish


def trainer_model(family, name, switches):
    builder, sizes = FAMILIES[family]
    config = TrainConfig(model=builder.__name__, model_kwargs={**sizes, "preprocessing": None, **switches},
                         pretrained=name)
    return build_model(config, num_classes=10, image_size=32, channels=3)[0]


def assert_weights_equal(model, reference):
    assert [v.path for v in model.weights] == [v.path for v in reference.weights]
    for a, b in zip(model.weights, reference.weights):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b), err_msg=a.path)


# ---- inspection reads the switches back -------------------------------------------


# The testing variants, the hybrid with its ResNet root alone (its stages read back
# as the stages of the other hybrids do, and take seconds to build on JAX).
DEFAULT_MODELS = {
    **TESTING_VARIANTS,
    "hybrid": (VisionTransformer, {**TESTING_VARIANTS["vit"][1], "patch_size": 2, "resnet_stages": ()}),
    "swin": (SwinTransformer, {**FAMILIES["swin"][1], **PUBLISHED}),
}


@pytest.mark.parametrize("variant", sorted(DEFAULT_MODELS))
def test_every_family_reads_back_as_its_arguments(variant):
    builder, arguments = DEFAULT_MODELS[variant]
    model = builder(**arguments)
    expected = architecture(builder.__name__, {**arguments, "num_channels": 3})
    actual = inspection.model_architecture(model)
    assert mismatches(expected, actual) == [] and set(expected) <= set(actual)
    for key, default in ABLATION_DEFAULTS[builder.__name__].items():
        assert actual[key] == default


@pytest.mark.parametrize(
    "family,switches",
    [(f, s) for f, s, _, _ in REFUSED] + ALLOWED + [
        # One block: a shared embedding and one per block are told apart by name only.
        ("vit", dict(position_embedding_at="every_layer", num_layers=1)),
        ("vit", dict(position_embedding_at="every_layer_shared", num_layers=1)),
    ],
)
def test_ablation_models_read_back_as_their_arguments(family, switches):
    builder = FAMILIES[family][0]
    model = build(family, **switches)
    expected = architecture(builder.__name__, {**FAMILIES[family][1], **switches, "num_channels": 3})
    actual = inspection.model_architecture(model)
    assert mismatches(expected, actual) == [] and set(expected) <= set(actual)
    # The switches that are no architecture keys are read back too.
    read = (swin_arguments(model) if family == "swin" else convit_arguments(model)[1] if family == "convit"
            else inspection.vit_arguments(model))
    defaults = {"swin": {"shifted_windows": True}, "convit": {"train_gpsa_attention": True}}.get(family, {})
    for key, value in defaults.items():
        assert read[key] == switches.get(key, value)


def test_a_swin_model_without_a_second_block_reads_as_shifted():
    # No block could shift, so the two settings build the same model.
    model = SwinTransformer(image_size=32, embed_dim=16, depths=(1, 1), num_heads=(1, 2), window_size=4,
                            num_classes=5, shifted_windows=False)
    assert swin_arguments(model)["shifted_windows"] is True


# ---- the registry states the published switches -----------------------------------


def test_every_known_checkpoint_fits_its_variant_with_the_default_switches():
    for key, known in checkpoints.KNOWN_CHECKPOINTS.items():
        builder, config = ARCHITECTURES[key.split("/")[0]]
        for arguments in (config, {**config, **known.config}):
            registry.check_fits(key, architecture(builder, arguments), key)
        # Builders without ablation switches (DINOv2) have no entry.
        switches = ABLATION_DEFAULTS.get(builder, {})
        assert {k: known.config[k] for k in switches} == switches, key


@pytest.mark.parametrize(
    "variant,switches,needs",
    [
        ("ViT_Ti16", dict(position_embedding="relative"), "position_embedding='learned_1d'"),
        ("DeiT_Ti16", dict(position_embedding_at="every_layer"), "position_embedding_at='stem'"),
        ("ConViT_Ti", dict(train_gating=False), "train_gating=True"),
        ("Swin_T", dict(position_embedding="absolute"), "position_embedding='relative'"),
    ],
)
def test_a_variant_builder_refuses_its_checkpoint_for_an_ablation_before_building(
    variant, switches, needs, tmp_path, monkeypatch
):
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    key = next(k for k in checkpoints.KNOWN_CHECKPOINTS if k.startswith(f"{variant}/"))
    with pytest.raises(ValueError, match=rf"'{re.escape(key)}' is one of {variant} and does not fit {variant}: "
                                         rf"`weights` needs [^(]*{needs}.*Nothing was downloaded"):
        getattr(keras_vit, variant)(weights=key.split("/")[1], **switches)
    assert not os.path.exists(tmp_path / "cache")


# ---- refused on every path ---------------------------------------------------------


@pytest.mark.parametrize("family,switches,needs,has", REFUSED)
def test_load_weights_refuses_an_ablation_before_downloading(published, family, switches, needs, has):
    name, _ = published(family)
    model = build(family, **switches)
    with pytest.raises(ValueError) as error:
        keras_vit.load_weights(model, name)
    message = str(error.value)
    # Only the switches differ, and the message says what the checkpoint needs.
    assert f"does not fit the model '{model.name}': `weights` needs " in message, message
    assert needs in message.split(" and the model has ")[0] and has in message.split(" and the model has ")[1]
    assert "Nothing was downloaded" in message
    assert published.fetched == [] and not published.cache.exists()


@pytest.mark.parametrize(
    "family,switches",
    [("vit", dict(position_embedding="none")), ("convit", dict(train_gating=False)),
     ("swin", dict(position_embedding="absolute"))],
)
def test_a_builders_weights_refuse_an_ablation_before_downloading(published, family, switches):
    name, _ = published(family)
    argument = next(iter(switches))
    with pytest.raises(ValueError, match=rf"{argument}=.*{argument}={switches[argument]!r}"):
        build(family, **switches, weights=name)
    assert published.fetched == [] and not published.cache.exists()


@pytest.mark.parametrize(
    "family,switches,needs,has",
    [refused("vit", position_embedding="learned_2d"),
     refused("convit", train_gating=False, train_gpsa_attention=False),
     refused("swin", absolute_position_embedding=True)],
)
def test_the_trainers_pretrained_refuses_an_ablation_before_downloading(published, family, switches, needs, has):
    name, _ = published(family)
    with pytest.raises(ValueError, match=r"`weights` needs .*Nothing was downloaded") as error:
        trainer_model(family, name, switches)
    assert needs in str(error.value) and has in str(error.value)
    assert published.fetched == [] and not published.cache.exists()


# ---- loaded where the weights are the same -----------------------------------------


@pytest.mark.parametrize("family,switches", ALLOWED)
@pytest.mark.parametrize("path", ["builder", "load_weights", "trainer"])
def test_switches_that_keep_the_weights_load_the_checkpoint(published, family, switches, path):
    name, reference = published(family)
    if path == "builder":
        model = build(family, **switches, weights=name)
    elif path == "load_weights":
        model = build(family, **switches)
        assert keras_vit.load_weights(model, name).exact
    else:
        model = trainer_model(family, name, switches)
    assert published.fetched == [checkpoints.KNOWN_CHECKPOINTS[name].url]
    assert_weights_equal(model, reference)
    if family == "convit":
        # Frozen at the checkpoint's values: ConViT Table 3 (g) from a trained model.
        gpsa = gpsa_blocks(model)
        assert {v.path for v in model.non_trainable_weights} == {
            v.path for block in gpsa for v in block.attention.weights
        }
        assert all(block.train_gating for block in gpsa)
    else:
        assert not any(any(block.shift_size) for block in inspection.blocks(model))

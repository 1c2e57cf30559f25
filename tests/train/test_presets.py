"""The presets through the command line's flags: what they build, and how they are described."""

import pathlib
import re

import keras
import numpy as np
import pytest
from absl import flags

from train import main as cli
from train.checks import check_config
from train.configs import PRESETS
from train.modeling import build_model

ROOT = pathlib.Path(__file__).resolve().parents[2]


def config_of(*argv):
    """The config `python train/main.py ARGV...` would train, checked as `main` checks it."""
    flags.FLAGS.unparse_flags()
    try:
        cli.parse_flags(["main.py", *argv])
        config = cli.config_from_flags()
    finally:
        flags.FLAGS.unparse_flags()
    check_config(config)
    return config


def _blocks(model):
    return [layer for layer in model._flatten_layers(include_self=False) if hasattr(layer, "remat")]


@pytest.mark.parametrize("preset, drop_path_rate", [("deit", 0.1), ("swin", 0.2)])
def test_remat_with_the_presets_stochastic_depth_builds_and_trains_a_step(preset, drop_path_rate):
    config = config_of(f"--config={preset}", "--remat", "--dataset=synthetic", "--precision=float32")
    assert config.remat and config.drop_path_rate == drop_path_rate
    model, _ = build_model(config, num_classes=4, image_size=32, channels=3)
    blocks = _blocks(model)
    # Stochastic depth grows with depth (0 in the first block).
    assert blocks and all(block.remat for block in blocks) and blocks[-1].drop_path_rate > 0
    model.compile(optimizer=keras.optimizers.SGD(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    images = np.random.default_rng(0).uniform(0, 255, (2, 32, 32, 3)).astype("float32")
    assert np.isfinite(model.train_on_batch(images, np.array([0, 3])))


def test_remat_still_refuses_dropout_naming_the_flag():
    with pytest.raises(ValueError, match=r"^--remat cannot be combined with --dropout_rate.*"
                                         r"Received: remat=True, dropout_rate=0\.1$"):
        config_of("--config=deit", "--remat", "--dropout_rate=0.1", "--dataset=synthetic")


def test_main_describes_its_default_model_as_the_hybrid():
    assert "resnet_stages" in PRESETS["default"].model_kwargs  # the BiT root: a hybrid
    summary = " ".join(cli.__doc__.split())
    assert "hybrid" in summary and "BiT's ResNet root feeding a small ViT" in summary


def test_presets_say_each_comment_once():
    # A comment paragraph (consecutive comment lines) written twice drifts apart when one is edited.
    paragraphs = re.findall(r"(?:^[ \t]*#.*\n)+", (ROOT / "train" / "configs" / "presets.py").read_text(), re.M)
    texts = [" ".join(line.strip(" \t#") for line in paragraph.splitlines()) for paragraph in paragraphs]
    repeated = {text for text in texts if texts.count(text) > 1}
    assert not repeated, repeated


def test_a_run_of_the_command_line_checks_its_configuration_once(tmp_path, monkeypatch):
    # train/main.py checks every flag before it builds the strategy, then trains through
    # `train_checked`; `train` (the library's entry) checks for itself.
    from tests.train.helpers import call_main, make_idx_dataset, tiny_flags
    from train import checks, trainer

    calls = []

    def counted(config):
        calls.append(config)
        return check_config(config)

    monkeypatch.setattr(checks, "check_config", counted)
    monkeypatch.setattr(trainer, "check_config", counted)
    data = make_idx_dataset(tmp_path / "data", train=32, test=8)
    assert call_main(list(tiny_flags(tmp_path / "run", data, "--steps=1", "--warmup_steps=0"))) == 0
    assert len(calls) == 1


def test_every_registered_builder_and_named_variant_is_a_model_flag():
    # The trainer keeps no list of families: what the registry holds, `--model` takes.
    import dataclasses

    import keras_vit
    from train.checks import check_model
    from train.configs import TrainConfig

    for name in [*keras_vit.models.BUILDERS, *keras_vit.VARIANTS]:
        check_model(dataclasses.replace(TrainConfig(), model=name))
    assert {"VisionTransformer", "ConViT", "SwinTransformer", "AxialViT", "DINOv2"} <= set(keras_vit.models.BUILDERS)
    with pytest.raises(ValueError, match=r"--model must be a builder name .*Did you mean 'DINOv2'\?"):
        check_model(dataclasses.replace(TrainConfig(), model="DINOv3"))

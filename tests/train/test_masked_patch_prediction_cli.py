"""`--objective=masked_patch_prediction` (ViT App. B.1.2): pretrain without labels, then fine-tune the encoder."""

import json

import keras
import numpy as np
import pytest
from keras import ops

import keras_vit  # noqa: F401  (registers the layers for loading)
from tests.train.helpers import JIT_FLAG, TINY_MODEL, main_here, make_idx_dataset
from train.checks import check_config
from train.configs import PRESETS, get_config


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=128, test=32)


def test_pretrain_then_fine_tune_the_exported_encoder(tmp_path, idx_dir, capsys):
    common = ("--config=fashion_mnist_vit", "--dataset=fashion_mnist", f"--data_dir={idx_dir}", "--image_size=16",
              "--batch_size=32", f"--model_kwargs={TINY_MODEL}", "--warmup_steps=2", JIT_FLAG)
    pretrain = tmp_path / "pretrain"
    result = main_here(capsys, f"--workdir={pretrain}", *common, "--objective=masked_patch_prediction", "--epochs=2",
                      "--mpp_target=downsized", "--mpp_corruption_rate=0.15")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "pretraining loss" in result.stdout and "test accuracy" not in result.stdout
    assert "its head is untrained: fine-tune before serving" in result.stdout
    summary = json.loads((pretrain / "summary.json").read_text())
    assert summary["accuracy"] is None and summary["objective"] == "masked_patch_prediction"
    # Labels unused: 8 classes of mean colour per cell (1 channel, 3 bits); the loss starts at ln 8.
    assert summary["history"]["loss"][-1] < np.log(8)
    encoder = keras.saving.load_model(str(pretrain / "model.keras"))
    assert not [w.path for w in encoder.weights if "mask" in w.path or "prediction_head" in w.path]

    finetune = tmp_path / "finetune"
    # Another seed: without the pretrained weights its encoder would start elsewhere.
    result = main_here(capsys, f"--workdir={finetune}", *common, "--steps=4", "--seed=1",
                      f"--pretrained={pretrain / 'model.keras'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test accuracy" in result.stdout
    tuned = keras.saving.load_model(str(finetune / "model.keras"))
    path = "encoderblock_0/attention/qkv/kernel"
    before = {w.path: ops.convert_to_numpy(w) for w in encoder.weights}[path]
    after = {w.path: ops.convert_to_numpy(w) for w in tuned.weights}[path]
    # Four steps from the pretrained encoder move its kernel by a small fraction of its size.
    assert np.abs(after - before).mean() < 0.2 * np.abs(before).mean()


@pytest.mark.parametrize("overrides, message", [
    (dict(objective="mae"), r"--objective must be one of \('classification', 'masked_patch_prediction'\). "
                            r"Received: objective='mae'"),
    (dict(mpp_target="l2"), r"--mpp_target must be one of \('mean_color', 'downsized', 'pixels'\). "
                            r"Received: mpp_target='l2'"),
    (dict(mpp_corruption_rate=0.0), r"mpp_corruption_rate.*\(0, 1\].*Received: mpp_corruption_rate=0.0"),
    (dict(objective="masked_patch_prediction", teacher="ViT_Ti16", distillation="hard"),
     r"takes no --teacher. Received: teacher='ViT_Ti16'"),
    (dict(objective="masked_patch_prediction", cutmix=1.0),
     r"takes no MixUp or CutMix.*Received: mixup=0.0, cutmix=1.0"),
    (dict(objective="masked_patch_prediction", random_erasing=0.25),
     r"takes no random erasing: set --random_erasing=0. Received: random_erasing=0.25"),
    (dict(objective="masked_patch_prediction", eval_flip=True),
     r"has no class logits for --eval_flip to average: set --eval_flip=false. Received: eval_flip=True"),
])
def test_bad_objective_settings_are_named(overrides, message):
    import dataclasses

    with pytest.raises(ValueError, match=message):
        check_config(dataclasses.replace(get_config("fashion_mnist_vit"), **overrides))


def test_the_preset_is_the_appendix_recipe():
    preset = PRESETS["vit_masked_patch_prediction"]
    assert (preset.objective, preset.mpp_target, preset.mpp_corruption_rate) == (
        "masked_patch_prediction", "mean_color", 0.5)
    assert (preset.learning_rate, preset.warmup_steps, preset.decay, preset.batch_size, preset.weight_decay) == (
        2e-4, 10_000, "cosine", 4096, 0.0)
    check_config(preset)

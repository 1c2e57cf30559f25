"""MirroredStrategy on two logical CPUs trains like one device; presets hold the papers' values."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.train.helpers import ROOT, TINY_MODEL, make_idx_dataset
from train.configs import get_config

SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
mode, data_dir, workdir, model_kwargs = sys.argv[1:5]
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, {root!r})
import keras
from train.configs import TrainConfig
from train.trainer import train
config = TrainConfig(model="VisionTransformer", model_kwargs=json.loads(model_kwargs), dataset="fashion_mnist",
                     data_dir=data_dir, image_size=16, batch_size=32, epochs=2, warmup_steps=2,
                     learning_rate=3e-3, jit_compile=False, augmentation="none")
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]) if mode == "mirrored" else None
summary = train(config, workdir, strategy, verbose=0)
model = keras.models.load_model(workdir + "/model.keras")
np.savez(workdir + "/weights.npz", *[keras.ops.convert_to_numpy(w) for w in model.weights])
print(json.dumps({{"replicas": strategy.num_replicas_in_sync if strategy else 1, "loss": summary["loss"]}}))
"""


def run(mode, data_dir, workdir):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(root=ROOT), mode, data_dir, str(workdir), TINY_MODEL],
        capture_output=True, text=True, timeout=300, env={**os.environ, "KERAS_BACKEND": "tensorflow"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads(result.stdout.strip().splitlines()[-1])
    with np.load(workdir / "weights.npz") as data:
        return info, [data[f"arr_{i}"] for i in range(len(data.files))]


def test_mirrored_on_two_cpus_matches_one_device(tmp_path):
    data_dir = make_idx_dataset(tmp_path / "data", train=256, test=64)
    mirrored, mirrored_weights = run("mirrored", data_dir, tmp_path / "mirrored")
    single, single_weights = run("single", data_dir, tmp_path / "single")
    assert mirrored["replicas"] == 2 and single["replicas"] == 1
    # Same global batch, gradients all-reduced over the two half batches: the same
    # training up to float32 summation order over 16 steps.
    assert mirrored["loss"] == pytest.approx(single["loss"], abs=1e-4)
    for a, b in zip(mirrored_weights, single_weights):
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_presets_hold_the_papers_settings():
    pretrain = get_config("vit_pretrain")
    assert (pretrain.optimizer, pretrain.adam_beta1, pretrain.adam_beta2) == ("adamw", 0.9, 0.999)
    assert (pretrain.batch_size, pretrain.warmup_steps, pretrain.decay, pretrain.weight_decay) == (4096, 10_000, "linear", 0.1)
    imagenet = get_config("vit_imagenet")
    assert (imagenet.learning_rate, imagenet.decay, imagenet.weight_decay, imagenet.dropout_rate, imagenet.clip_norm) == (3e-3, "cosine", 0.3, 0.1, 1.0)
    finetune = get_config("vit_finetune")
    assert (finetune.optimizer, finetune.momentum, finetune.batch_size, finetune.decay) == ("sgd", 0.9, 512, "cosine")
    assert (finetune.weight_decay, finetune.clip_norm, finetune.image_size) == (0.0, 1.0, 384)
    deit = get_config("deit")
    assert (deit.weight_decay, deit.label_smoothing, deit.mixup, deit.cutmix, deit.adam_epsilon) == (
        0.05, 0.1, 0.8, 1.0, 1e-8)
    # timm's transform as DeiT's main.py calls it, and DeiT's repeated-augmentation sampler.
    assert (deit.augmentation, deit.randaugment, deit.random_erasing, deit.repeated_augmentation, deit.eval_crop) == (
        "random_resized_crop", "rand-m9-mstd0.5-inc1", 0.25, 3, 0.875)
    convit = get_config("convit")
    assert convit.model == "ConViT_S" and deit.model == "DeiT_S16"
    assert dataclasses.replace(convit, model="DeiT_S16") == deit
    # Swin App. A2.1: 300 epochs, 20 of them warmup (1251 steps an epoch at batch 1024).
    swin = get_config("swin")
    assert (swin.model, swin.image_size, swin.optimizer, swin.batch_size, swin.learning_rate) == (
        "Swin_T", 224, "adamw", 1024, 1e-3)
    assert (swin.epochs, swin.warmup_steps, swin.decay, swin.weight_decay, swin.clip_norm) == (
        300, 20 * 1251, "cosine", 0.05, 5.0)
    assert (swin.drop_path_rate, swin.randaugment, swin.mixup, swin.cutmix, swin.label_smoothing) == (
        0.2, "rand-m9-mstd0.5-inc1", 0.8, 1.0, 0.1)
    # Swin's code: timm's transform with erasing 0.25, but no repeated augmentation.
    assert (swin.augmentation, swin.random_erasing, swin.repeated_augmentation, swin.eval_crop) == (
        "random_resized_crop", 0.25, 1, 0.875)
    assert swin.ema_decay is None and swin.adam_epsilon == 1e-8
    # timm mixes each GPU's batch: DeiT-S ran 4 GPUs x 256, Swin 8 x 128.
    assert (deit.mixing_group, swin.mixing_group) == (256, 128)
    with pytest.raises(ValueError, match=r"`config` must be one of \[.*'default'.*\]. Received: config='jft'"):
        get_config("jft")


def test_presets_are_fresh_copies_that_share_nothing():
    from train.configs import PRESETS

    deit = get_config("deit")
    deit.model_kwargs["patch_size"] = 8
    deit.learning_rate = 1.0
    assert PRESETS["deit"].model_kwargs == {} and PRESETS["deit"].learning_rate != 1.0
    assert PRESETS["convit"].model_kwargs is not PRESETS["deit"].model_kwargs
    default = get_config("default")
    default.model_kwargs["hidden_size"] = 8
    assert PRESETS["default"].model_kwargs["hidden_size"] == 96


def test_a_remote_tpu_that_does_not_answer_is_an_error_within_the_deadline_not_a_hang():
    import socket
    import time

    from train import strategy as strategy_lib

    with socket.socket() as listener:  # a port that was free a moment ago: nothing listens there now
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(strategy_lib.TPUUnavailableError, match=rf"--tpu_name=grpc://127.0.0.1:{port}: nothing "
                                                               rf"accepted a connection at 127.0.0.1:{port} within 2 s"):
        strategy_lib.check_tpu_address(f"grpc://127.0.0.1:{port}", deadline=2)
    assert time.monotonic() - start < 10
    for bad in ("grpc://", "grpc://host", "grpc://host:port"):
        with pytest.raises(ValueError, match=r"--tpu_name must be a TPU name or grpc://host:port\. Received"):
            strategy_lib.grpc_address(bad)
    assert strategy_lib.grpc_address("my-tpu") is None

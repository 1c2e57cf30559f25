"""A workdir on a non-local file system: TensorFlow's in-memory `ram://`, as `gs://` on a TPU.

The run goes through `tf.io.gfile` for every file it writes: checkpoints (with
their manifests), `config.json`, the TensorBoard logs, `model.keras`, the
SavedModel and `summary.json`; resuming and the damaged-checkpoint fallback
work there as on a local disk. TensorFlow backend only (`ram://` lives in the
TensorFlow runtime of this process; on JAX the same code paths run, but the
test would need a second file system to read them back).
"""

import json

import keras
import numpy as np
import pytest

from tests.train.helpers import BACKEND, TINY_MODEL, make_idx_dataset
from train import files
from train.checkpoints import CheckpointManager
from train.configs import TrainConfig
from train.trainer import train

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="ram:// is TensorFlow's in-process file system")


def tiny_config(data_dir, steps):
    return TrainConfig(
        dataset="fashion_mnist", data_dir=str(data_dir), image_size=16, batch_size=32, steps=steps,
        model_kwargs=json.loads(TINY_MODEL), warmup_steps=2, jit_compile=False, checkpoint_every_steps=4,
    )


def read(path):
    with files.open_file(path) as f:
        return f.read()


def test_a_run_writes_resumes_and_exports_on_ram(tmp_path):
    import tensorflow as tf

    data = make_idx_dataset(tmp_path / "data")
    workdir = "ram://keras_vit_test/run"
    summary = train(tiny_config(data, steps=8), workdir, verbose=0)
    assert summary["workdir"] == workdir
    assert sorted(files.listdir(workdir)) == ["checkpoints", "config.json", "labels.txt", "logs", "model.keras",
                                              "saved_model", "summary.json"]
    assert "ckpt-8" in files.listdir(f"{workdir}/checkpoints")
    assert read(f"{workdir}/checkpoints/latest").strip() == "ckpt-8"
    manifest = json.loads(read(f"{workdir}/checkpoints/ckpt-8/manifest.json"))
    assert set(manifest["files"]) == {"model.weights.h5", "optimizer.npz"}
    assert json.loads(read(f"{workdir}/summary.json"))["step"] == 8

    # The exported SavedModel serves from ram://, and model.keras loads from it.
    served = tf.saved_model.load(f"{workdir}/saved_model")
    images = np.random.default_rng(0).integers(0, 255, (2, 16, 16, 1)).astype("uint8")
    probabilities = served.serve(tf.constant(images)).numpy()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    import keras_vit  # noqa: F401 - registers the layers

    local = tmp_path / "model.keras"
    tf.io.gfile.copy(f"{workdir}/model.keras", str(local))
    reloaded = keras.saving.load_model(local)
    expected = keras.ops.softmax(reloaded(images.astype("float32"), training=False)).numpy()
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)


def test_damaged_checkpoint_on_ram_is_set_aside_and_the_older_one_resumed(tmp_path):
    data = make_idx_dataset(tmp_path / "data")
    workdir = "ram://keras_vit_test/damaged"
    # 6 steps with a checkpoint every 4: ckpt-4 and ckpt-6, then the newest is damaged.
    first = train(tiny_config(data, steps=6), workdir, verbose=0)
    assert first["step"] == 6
    for name in ("model.keras", "summary.json"):
        files.remove(f"{workdir}/{name}")
    files.rmtree(f"{workdir}/saved_model")
    weights = f"{workdir}/checkpoints/ckpt-6/model.weights.h5"
    with files.open_file(weights, "wb") as f:
        f.write(b"\0" * 100)
    messages = []
    manager = CheckpointManager(f"{workdir}/checkpoints", log=messages.append)
    assert manager.set_aside_damaged().endswith("ckpt-4")
    assert "moved to 'damaged-ckpt-6'" in messages[0]
    assert sorted(files.listdir(f"{workdir}/checkpoints")) == ["ckpt-4", "damaged-ckpt-6", "latest"]
    resumed = train(tiny_config(data, steps=6), workdir, verbose=0)
    assert resumed["resumed_from"] == "ckpt-4" and resumed["step"] == 6

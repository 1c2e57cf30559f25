"""The trainer on JAX over 8 virtual devices: data parallel as one device would, `--tpu` without one.

The runs are subprocesses with `KERAS_BACKEND=jax` and
`XLA_FLAGS=--xla_force_host_platform_device_count=8`, whatever the backend of the
test session (XLA reads the flag when JAX starts).
"""

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers for loading)

from tests.train.helpers import make_idx_dataset, run_main, tiny_flags

EIGHT_DEVICES = {"KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
ONE_DEVICE = {"KERAS_BACKEND": "jax", "XLA_FLAGS": ""}


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=128, test=40)


def weights(path):
    return [keras.ops.convert_to_numpy(w) for w in keras.models.load_model(str(path)).weights]


def test_data_parallel_over_8_devices_trains_like_one_device(tmp_path, idx_dir):
    flags = ("--epochs=2", "--ema_decay=0.9", "--augmentation=inception_crop", "--jit_compile=true")
    parallel = run_main(*tiny_flags(tmp_path / "parallel", idx_dir, *flags), env=EIGHT_DEVICES)
    assert parallel.returncode == 0, parallel.stderr[-3000:]
    assert "backend=jax on data parallel (keras.distribution.DataParallel) over 8 cpu devices" in parallel.stdout
    single = run_main(*tiny_flags(tmp_path / "single", idx_dir, *flags), env=ONE_DEVICE)
    assert single.returncode == 0, single.stderr[-3000:]
    assert "on 1 cpu device" in single.stdout
    # The same global batches, split over 8 devices: the same training up to
    # float32 summation order over 8 steps.
    for a, b in zip(weights(tmp_path / "parallel" / "model.keras"), weights(tmp_path / "single" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=2e-5)
    # Evaluation needs whole batches over 8 devices: 40 test images in batches of 32.
    assert '"eval_images": 32' in (tmp_path / "parallel" / "summary.json").read_text()


def test_jax_flag_errors_are_one_line(tmp_path, idx_dir):
    for flags, message in (
        (("--tpu",), "error: --tpu was given but JAX sees no TPU devices (it sees cpu x8)"),
        (("--mesh=batch:3,model:2",), "error: --mesh must use all 8 devices (batch x model = 8). "
                                      "Received: mesh='batch:3,model:2'"),
        (("--distribution=pipeline",), "error: --distribution must be one of ('auto', 'data', 'fsdp')."),
        (("--distribution=data", "--mesh=batch:4,model:2"), "error: --distribution=data puts every device on "
                                                           "the batch axis."),
    ):
        result = run_main(*tiny_flags(tmp_path / "run", idx_dir, *flags), env=EIGHT_DEVICES, timeout=120)
        assert result.returncode == 2, result.stderr[-2000:]
        assert message in result.stderr and "Traceback" not in result.stderr


def test_fsdp_over_a_2x4_mesh_trains_like_one_device(tmp_path, idx_dir):
    # Wide enough that the qkv and MLP kernels pass layout_map's size threshold and are split.
    model = '{"patch_size": 4, "hidden_size": 512, "num_layers": 1, "num_heads": 4, "mlp_dim": 1024}'
    flags = ("--steps=6", "--jit_compile=true", "--augmentation=none", f"--model_kwargs={model}")
    sharded = run_main(*tiny_flags(tmp_path / "fsdp", idx_dir, *flags, "--distribution=fsdp",
                                   "--mesh=batch:2,model:4"), env=EIGHT_DEVICES)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "FSDP (keras.distribution.ModelParallel) over 8 cpu devices, mesh batch:2 x model:4" in sharded.stdout
    single = run_main(*tiny_flags(tmp_path / "single", idx_dir, *flags), env=ONE_DEVICE)
    assert single.returncode == 0, single.stderr[-3000:]
    for a, b in zip(weights(tmp_path / "fsdp" / "model.keras"), weights(tmp_path / "single" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=5e-5)

"""The trainer on JAX over 8 virtual devices: data parallel as one device would, `--tpu` without one.

These run in the JAX phase of the suite only. The multi-device runs are subprocesses with
`XLA_FLAGS=--xla_force_host_platform_device_count=8` (XLA reads the flag when JAX
starts); the one-device references are calls in the test's process, on the session's
single CPU device (they were subprocesses of the TensorFlow phase until #38).
"""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers for loading)

from tests.xla import xla_flags
from tests.train.helpers import BACKEND, main_here, make_idx_dataset, run_main, run_many, tiny_flags

pytestmark = pytest.mark.skipif(BACKEND != "jax", reason="the JAX trainer: runs in the suite's JAX phase")
EIGHT_DEVICES = {"KERAS_BACKEND": "jax", "XLA_FLAGS": xla_flags(8)}


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=128, test=40)


def weights(path):
    return [keras.ops.convert_to_numpy(w) for w in keras.models.load_model(str(path)).weights]


def test_data_parallel_over_8_devices_trains_like_one_device(tmp_path, idx_dir, capsys):
    flags = ("--epochs=2", "--ema_decay=0.9", "--augmentation=inception_crop", "--jit_compile=true")
    # Its compiled steps kept where the flag says (over the suite's own JAX_COMPILATION_CACHE_DIR), for a next run.
    cache = tmp_path / "compiled"
    parallel = run_main(*tiny_flags(tmp_path / "parallel", idx_dir, *flags, f"--jax_compilation_cache={cache}"),
                        env=EIGHT_DEVICES)
    assert parallel.returncode == 0, parallel.stderr[-3000:]
    assert any(name.startswith("jit_") for name in os.listdir(cache))
    assert "backend=jax on data parallel (keras.distribution.DataParallel) over 8 cpu devices" in parallel.stdout
    single = main_here(capsys, *tiny_flags(tmp_path / "single", idx_dir, *flags))
    assert single.returncode == 0, single.stderr[-3000:]
    assert "on 1 cpu device" in single.stdout
    # The same global batches, split over 8 devices: the same training up to
    # float32 summation order over 8 steps.
    for a, b in zip(weights(tmp_path / "parallel" / "model.keras"), weights(tmp_path / "single" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=2e-5)
    # Evaluation needs whole batches over 8 devices: 40 test images in batches of 32.
    assert '"eval_images": 32' in (tmp_path / "parallel" / "summary.json").read_text()


def test_jax_flag_errors_are_one_line(tmp_path, idx_dir):
    cases = (
        (("--tpu",), "error: --tpu was given but JAX sees no TPU devices (it sees cpu x8)"),
        (("--mesh=batch:3,model:2",), "error: --mesh must use all 8 devices (batch x model = 8). "
                                      "Received: mesh='batch:3,model:2'"),
        (("--distribution=pipeline",), "error: --distribution must be one of ('auto', 'data', 'fsdp')."),
        (("--distribution=data", "--mesh=batch:4,model:2"), "error: --distribution=data puts every device on "
                                                           "the batch axis."),
    )
    # The first case end to end (exit status 2, no traceback); the others parsed and checked by
    # the script's own main() in one process over the same 8 devices (tests/train/run_many.py).
    result = run_main(*tiny_flags(tmp_path / "run", idx_dir, *cases[0][0]), env=EIGHT_DEVICES, timeout=120)
    assert result.returncode == 2 and cases[0][1] in result.stderr and "Traceback" not in result.stderr
    outcomes = run_many([list(tiny_flags(tmp_path / "run", idx_dir, *flags)) for flags, _ in cases[1:]],
                        EIGHT_DEVICES, timeout=300)
    for (flags, message), outcome in zip(cases[1:], outcomes):
        assert outcome["status"] == 2, (flags, outcome["stderr"][-2000:])
        assert message in outcome["stderr"] and "Traceback" not in outcome["stderr"]
    assert not (tmp_path / "run").exists()


# Over 60 s (about 95 s): the default preset's hybrid on a 4x2 mesh evaluated over 10,000 test
# images (fewer batches did not reproduce the abort it guards against), and on one device.
def test_fsdp_with_the_default_model_evaluates_many_batches_like_one_device(tmp_path_factory, tmp_path, capsys):
    # The README's model (the default preset's hybrid) on a 4x2 mesh at the default batch size,
    # evaluated over 78 batches of Fashion-MNIST's test-split size: Keras' callback thread reading
    # one batch's logs beside the next step's collectives made XLA:CPU's all-reduce rendezvous
    # abort the run (3 of 3 runs before `SynchronousBatchEnds`; 20 or 40 batches did not).
    data = make_idx_dataset(tmp_path_factory.mktemp("fashion_10000"), train=256, test=10000, size=32)
    # One view (`--eval_flip=false`): the preset's mirror averaging would run the 78 batches twice;
    # the notebook's 8-device run (tests/notebooks) evaluates it under a distribution.
    flags = ("--dataset=fashion_mnist", f"--data_dir={data}", "--steps=4", "--warmup_steps=2", "--augmentation=none",
             "--eval_flip=false")
    # XLA's CPU passes on: 78 evaluation batches of the hybrid run long enough to pay for them
    # (about 90 s against 115 s with them off, as the rest of the suite compiles).
    sharded = run_main(f"--workdir={tmp_path / 'fsdp'}", *flags, "--distribution=fsdp", "--mesh=batch:4,model:2",
                       env=dict(EIGHT_DEVICES, XLA_FLAGS=xla_flags(8, optimized=True)))
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "mesh batch:4 x model:2" in sharded.stdout
    # The one-device reference trains on the same images and needs no long evaluation: its test split
    # is one batch (it evaluated all 10,000 images until #38; only the sharded run's evaluation aborted).
    small = make_idx_dataset(tmp_path_factory.mktemp("fashion_128"), train=256, test=128, size=32)
    single = main_here(capsys, f"--workdir={tmp_path / 'single'}", *flags, f"--data_dir={small}")
    assert single.returncode == 0, single.stderr[-3000:]
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("fsdp", "single")]
    assert summaries[0]["eval_images"] == 78 * 128 and summaries[1]["eval_images"] == 128
    for a, b in zip(weights(tmp_path / "fsdp" / "model.keras"), weights(tmp_path / "single" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=5e-5)


# Over 60 s (about 80 s): four JAX runs (sharded and not, each straight and resumed from the
# other layout's checkpoint), with kernels wide enough (512) for FSDP to shard them. The two
# sharded runs share one process over 8 devices (`run_many`); the unsharded ones run here.
def test_fsdp_over_a_2x4_mesh_trains_like_one_device_and_orbax_checkpoints_move_between_layouts(tmp_path, idx_dir,
                                                                                                 capsys):
    """FSDP trains as one device does, and a run resumed from the other layout's checkpoint ends alike.

    Orbax writes each array as the devices hold it (FSDP: in shards over the
    model axis) and restores it into the sharding of the variable it fills. (The
    FSDP-against-one-device comparison was a test of its own with the same two
    straight runs; it is the first assertion here, #38.)
    """
    import shutil

    model = '{"patch_size": 4, "hidden_size": 512, "num_layers": 1, "num_heads": 4, "mlp_dim": 1024}'
    # 4 steps an epoch: checkpoints at steps 4 (the epoch's end) and 6 (the run's end).
    flags = ("--steps=6", "--jit_compile=true", "--augmentation=none", f"--model_kwargs={model}")
    fsdp = ("--distribution=fsdp", "--mesh=batch:2,model:4")

    def check_orbax_checkpoint(workdir):
        manifest = json.loads((workdir / "checkpoints" / "ckpt-4" / "manifest.json").read_text())
        assert manifest["format"] == "orbax" and "state/_METADATA" in manifest["files"]

    def resumable_copy(written, resumed):
        workdir = tmp_path / f"{written}_then_{resumed}"
        shutil.copytree(tmp_path / written, workdir)
        _as_if_stopped_after_the_first_checkpoint(workdir)
        return workdir

    unsharded = main_here(capsys, *tiny_flags(tmp_path / "unsharded", idx_dir, *flags))
    assert unsharded.returncode == 0, unsharded.stderr[-3000:]
    check_orbax_checkpoint(tmp_path / "unsharded")
    to_sharded = resumable_copy("unsharded", "sharded")
    straight, resumed = run_many([list(tiny_flags(tmp_path / "sharded", idx_dir, *flags, *fsdp)),
                                  list(tiny_flags(to_sharded, idx_dir, *flags, *fsdp))], EIGHT_DEVICES)
    for run in (straight, resumed):
        assert run["status"] == 0, run["stderr"][-3000:]
        assert "FSDP (keras.distribution.ModelParallel) over 8 cpu devices, mesh batch:2 x model:4" in run["stdout"]
    check_orbax_checkpoint(tmp_path / "sharded")
    finals = {name: weights(tmp_path / name / "model.keras") for name in ("sharded", "unsharded")}
    # The kernels split over the model axis, the batch over the other: the same training as
    # one device, up to the float32 summation order that sharding changes.
    for a, b in zip(finals["sharded"], finals["unsharded"]):
        np.testing.assert_allclose(a, b, atol=5e-5)
    to_unsharded = resumable_copy("sharded", "unsharded")
    back = main_here(capsys, *tiny_flags(to_unsharded, idx_dir, *flags))
    assert back.returncode == 0, back.stderr[-3000:]
    # Steps 5 and 6 ran in the other layout: equal to the uninterrupted run up to the float32
    # summation order that sharding changes.
    for workdir, stdout, written in ((to_sharded, resumed["stdout"], "unsharded"),
                                     (to_unsharded, back.stdout, "sharded")):
        assert "Resumed from ckpt-4 (step 4)" in stdout, workdir.name
        for a, b in zip(weights(workdir / "model.keras"), finals[written]):
            np.testing.assert_allclose(a, b, atol=5e-5, err_msg=workdir.name)


def _as_if_stopped_after_the_first_checkpoint(workdir):
    import shutil

    for leftover in ("checkpoints/ckpt-6", "model.keras", "saved_model", "summary.json"):
        path = workdir / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (workdir / "checkpoints" / "latest").write_text("ckpt-4")


# The TensorFlow runs are processes of their own; the JAX ones run here.
def test_a_tensorflow_checkpoint_resumes_on_jax_and_an_orbax_one_is_refused_on_tensorflow(tmp_path, idx_dir, capsys):
    # Compiled on both backends: the JAX runs would otherwise dispatch op by op (twice as long).
    flags = ("--steps=6", "--augmentation=none", "--jit_compile=true")
    tensorflow = {"KERAS_BACKEND": "tensorflow"}
    run = run_main(*tiny_flags(tmp_path / "tf", idx_dir, *flags), env=tensorflow)
    assert run.returncode == 0, run.stderr[-3000:]
    _as_if_stopped_after_the_first_checkpoint(tmp_path / "tf")
    resumed = main_here(capsys, *tiny_flags(tmp_path / "tf", idx_dir, *flags))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resumed from ckpt-4 (step 4)" in resumed.stdout

    run = main_here(capsys, *tiny_flags(tmp_path / "jax", idx_dir, *flags))
    assert run.returncode == 0, run.stderr[-3000:]
    _as_if_stopped_after_the_first_checkpoint(tmp_path / "jax")
    refused = run_main(*tiny_flags(tmp_path / "jax", idx_dir, *flags), env=tensorflow)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "was written by the JAX backend with Orbax: resume this run with KERAS_BACKEND=jax" in refused.stderr


def test_on_an_emulated_tpu_the_trainer_takes_splash_and_trains_as_the_cpu_path(tmp_path, idx_dir, capsys,
                                                                                 emulated_tpu):
    # 1 x 1 patches of the 16 x 16 images: 257 tokens, over the kernel's 128-token threshold; head size 64.
    model = '{"patch_size": 1, "hidden_size": 64, "num_layers": 1, "num_heads": 1, "mlp_dim": 64}'
    flags = ("--epochs=2", "--precision=float32", f"--model_kwargs={model}", "--ema_decay=0.9")
    cpu = main_here(capsys, *tiny_flags(tmp_path / "cpu", idx_dir, *flags))
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    with emulated_tpu():
        tpu = main_here(capsys, *tiny_flags(tmp_path / "tpu", idx_dir, "--tpu", *flags))
    assert tpu.returncode == 0, tpu.stderr[-3000:]
    assert "backend=jax on 1 tpu device" in tpu.stdout
    summaries = {path: json.loads((tmp_path / path / "summary.json").read_text()) for path in ("cpu", "tpu")}
    kernels = summaries["tpu"]["attention_kernels"]
    assert set(kernels) == {"splash (pallas)"} and summaries["cpu"]["attention_kernels"].keys() == {"keras"}
    assert f"attention: splash (pallas) ({kernels['splash (pallas)']} traces)" in tpu.stdout
    # Two epochs of 4 steps, then the evaluation: the same losses up to float32 summation order
    # (the kernel's online softmax; the accelerator path's layer norm and GELU).
    np.testing.assert_allclose(summaries["tpu"]["history"]["loss"], summaries["cpu"]["history"]["loss"], rtol=1e-4)
    np.testing.assert_allclose(summaries["tpu"]["loss"], summaries["cpu"]["loss"], rtol=1e-4)
    for a, b in zip(weights(tmp_path / "tpu" / "model.keras"), weights(tmp_path / "cpu" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=1e-4)

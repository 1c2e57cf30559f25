"""`--multihost` on JAX: two processes on 127.0.0.1 form one job, as the hosts of a TPU pod slice do.

Each process has one CPU device; `keras.distribution.initialize` joins them
(collectives over gloo), `DataParallel` spans both, every host reads its half
of each global batch, and Orbax writes and restores the checkpoints from both.
The two-host test runs in the suite's JAX phase only, where its one-process
reference is a call in the test's process; the refusal on TensorFlow runs in the
TensorFlow phase, in its process too.
"""

import os
import shutil
import socket
import subprocess

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers for loading)

from tests.xla import xla_flags
from tests.train.helpers import BACKEND, ROOT, main_command, main_here, make_idx_dataset, tiny_flags


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_hosts(flags, count=2, timeout=300):
    address = f"127.0.0.1:{free_port()}"
    hosts = []
    for index in range(count):
        env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": xla_flags(), "KERAS_DISTRIBUTION_JOB_ADDRESSES": address,
               "KERAS_DISTRIBUTION_NUM_PROCESSES": str(count), "KERAS_DISTRIBUTION_PROCESS_ID": str(index)}
        hosts.append(subprocess.Popen(main_command(*flags, "--multihost"), env=env, cwd=ROOT, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outputs = []
    try:
        for host in hosts:
            outputs.append(host.communicate(timeout=timeout)[0])
    finally:
        for host in hosts:
            host.kill()
    return [host.returncode for host in hosts], outputs


def weights(path):
    return keras.models.load_model(str(path)).get_weights()


# Over 60 s (about 120 s on 2 cores until #38, with the reference run in a process of its own): two
# JAX host processes that join over gloo, twice (trained, then resumed), each importing JAX and
# TensorFlow.
@pytest.mark.both_backends
@pytest.mark.skipif(BACKEND != "jax", reason="the JAX hosts: runs in the suite's JAX phase")
def test_two_hosts_train_like_one_process_and_resume_from_their_orbax_checkpoint(tmp_path, capsys):
    data = make_idx_dataset(tmp_path / "data")
    # Compiled, as the JAX runs of the suite are: op by op a tiny JAX run took twice as long.
    flags = ("--steps=16", "--checkpoint_every_steps=8", "--jit_compile=true")
    codes, outputs = run_hosts(tiny_flags(tmp_path / "job", data, *flags))
    assert codes == [0, 0], outputs
    assert "data parallel (keras.distribution.DataParallel) over 2 cpu devices" in outputs[0]
    assert "a non-chief worker" in outputs[1]
    single = main_here(capsys, *tiny_flags(tmp_path / "single", data, *flags))
    assert single.returncode == 0, single.stderr[-3000:]
    reference = weights(tmp_path / "single" / "model.keras")
    # Each host computed the gradient of its half batch; the mean over the two
    # is the global batch's: the weights are one process's up to summation order.
    for ours, theirs in zip(weights(tmp_path / "job" / "model.keras"), reference):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    job = tmp_path / "job"
    assert sorted(os.listdir(job)) == ["checkpoints", "config.json", "labels.txt", "logs", "model.keras",
                                       "saved_model", "summary.json"]
    assert sorted(os.listdir(job / "checkpoints")) == ["ckpt-16", "ckpt-8", "latest"]

    # As if the job had stopped after its first checkpoint: both hosts resume from it.
    for leftover in ("checkpoints/ckpt-16", "model.keras", "saved_model", "summary.json"):
        path = job / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (job / "checkpoints" / "latest").write_text("ckpt-8")
    codes, outputs = run_hosts(tiny_flags(job, data, *flags))
    assert codes == [0, 0], outputs
    assert all("Resumed from ckpt-8 (step 8)" in out or "resumed from 8" in out for out in outputs), outputs
    for ours, theirs in zip(weights(job / "model.keras"), reference):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="the refusal on TensorFlow")
def test_multihost_on_tensorflow_is_one_line(tmp_path, capsys):
    data = make_idx_dataset(tmp_path / "data")
    result = main_here(capsys, *tiny_flags(tmp_path / "run", data, "--multihost"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--multihost joins the hosts of a JAX job (KERAS_BACKEND=jax)" in result.stderr

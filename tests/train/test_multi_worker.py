"""`--strategy=multi_worker`: two worker processes on 127.0.0.1 under MultiWorkerMirroredStrategy.

TensorFlow only (the JAX test run leaves this file out): on JAX, hosts are
joined by `keras.distribution`, tested in test_jax.py on virtual devices.
"""

import json
import os
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

from tests.train.helpers import BACKEND, ROOT, call_main, main_command, make_idx_dataset, tiny_flags

pytestmark = pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute runs on the TensorFlow backend")


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_workers(flags, count=2):
    """Starts `count` workers of one job; returns their Popen objects (worker 0 first)."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(count)]}
    workers = []
    for index in range(count):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CONFIG": tf_config}
        workers.append(subprocess.Popen(
            main_command(*flags, "--strategy=multi_worker"), env=env, cwd=ROOT,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ))
    return workers


def finish(workers, timeout=300):
    outputs = []
    for worker in workers:
        out, _ = worker.communicate(timeout=timeout)
        outputs.append(out)
    return [w.returncode for w in workers], outputs


def weights(path):
    import keras

    import keras_vit  # noqa: F401 - registers the layers the file names

    return keras.saving.load_model(path).get_weights()


# Over 60 s (about 90 s in the suite, with other tests beside it): two TensorFlow worker processes
# that join over gRPC and train, then the one-process reference run (in this process since #38).
def test_two_workers_train_like_one_process_on_the_same_global_batches(tmp_path):
    data = make_idx_dataset(tmp_path / "data")
    flags = tiny_flags(tmp_path / "job", data, "--steps=16", "--checkpoint_every_steps=8")
    codes, outputs = finish(start_workers(flags))
    assert codes == [0, 0], outputs
    assert "2 replica(s)" in outputs[0]
    assert "a non-chief worker" in outputs[1] and "a non-chief worker" not in outputs[0]

    assert call_main(list(tiny_flags(tmp_path / "single", data, "--steps=16", "--checkpoint_every_steps=8"))) == 0
    # Each worker read its half of every global batch of 32; the all-reduced
    # gradient is the global batch's mean, so the weights are the single
    # process's up to float32 summation order.
    for ours, reference in zip(weights(tmp_path / "job" / "model.keras"), weights(tmp_path / "single" / "model.keras")):
        np.testing.assert_allclose(ours, reference, atol=1e-4)

    # Only the chief wrote: the files of one run, no second set, no scratch left behind.
    job = tmp_path / "job"
    assert sorted(os.listdir(job)) == ["checkpoints", "config.json", "logs", "model.keras", "saved_model",
                                       "summary.json"]
    assert sorted(os.listdir(job / "checkpoints")) == ["ckpt-16", "ckpt-8", "latest"]
    assert json.loads((job / "summary.json").read_text())["chief"] is True


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# Over 60 s (about 115 s on 2 cores): two worker processes train, one is killed, the other must
# notice and stop, and both are started again to resume; four TensorFlow processes in all.
def test_a_killed_worker_stops_the_job_and_the_job_resumes_from_the_last_checkpoint(tmp_path):
    data = make_idx_dataset(tmp_path / "data")
    # Long enough that the job is still training when the first checkpoint appears and a worker is
    # killed (88 steps after it); short enough that the resumed job ends soon (it was 300 until #38).
    flags = tiny_flags(tmp_path / "job", data, "--steps=96", "--checkpoint_every_steps=8")
    checkpoints = tmp_path / "job" / "checkpoints"
    workers = start_workers(flags)
    try:
        wait_for(lambda: (checkpoints / "latest").exists(), 240, "the first checkpoint")
        workers[1].send_signal(signal.SIGKILL)
        codes, outputs = finish(workers, timeout=120)
    finally:
        for worker in workers:
            worker.kill()
    assert codes[0] == 1, outputs[0][-3000:]
    assert "a worker of the multi-worker job stopped" in outputs[0], outputs[0][-3000:]
    assert "resume" in outputs[0]
    last = (checkpoints / "latest").read_text().strip()
    assert last.startswith("ckpt-")

    codes, outputs = finish(start_workers(flags))
    assert codes == [0, 0], outputs[0][-3000:]
    resumed_step = int(outputs[0].split("Resumed from ckpt-")[1].split()[0])
    assert resumed_step >= int(last.split("-")[1])
    assert "steps             96 (resumed from" in outputs[0]

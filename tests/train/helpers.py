"""Tiny generated datasets, and runners for `train/main.py`: in a subprocess, or called in this process."""

import gzip
import json
import os
import struct
import subprocess
import sys
import time
import types

import numpy as np
from PIL import Image

# The trainer runs on the backend of the test session (TensorFlow unless told).
BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Whether the tiny runs compile their step with XLA. On JAX, yes: without `jax.jit` every
# op is dispatched on its own, and a tiny run takes about twice as long as compiling it. On
# TensorFlow, no: its graph without XLA starts sooner than an XLA compile for a few steps.
JIT_COMPILE = BACKEND == "jax"
JIT_FLAG = f"--jit_compile={str(JIT_COMPILE).lower()}"
# A tiny ViT for 16 x 16 images: every run takes seconds.
TINY_MODEL = '{"patch_size": 4, "hidden_size": 16, "num_layers": 1, "num_heads": 2, "mlp_dim": 32}'


def write_idx(path, array):
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def learnable_images(n, size, seed, channels=1):
    """Class k has brightness around 30 + 60 k, plus noise.

    Brightness survives flips and crops, so the classes stay learnable under
    augmentation, and a few steps of a tiny model learn them.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    noise = rng.integers(-25, 25, (n, size, size, channels))
    images = 30 + 60 * labels[:, None, None, None] + noise
    return images.clip(0, 255).astype(np.uint8), labels


def make_idx_dataset(directory, train=256, test=64, size=16):
    """Fashion-MNIST-style IDX files (gzipped) with 4 learnable classes."""
    os.makedirs(directory, exist_ok=True)
    for prefix, n, seed in (("train", train, 0), ("t10k", test, 1)):
        images, labels = learnable_images(n, size, seed)
        write_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), images[..., 0])
        write_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), labels)
    return str(directory)


def make_image_folder(root, per_class=12, size=20, corrupt=0):
    """root/{train,test}/class_k/*.png (RGB), with `corrupt` broken files in train."""
    for split, seed in (("train", 0), ("test", 1)):
        images, labels = learnable_images(per_class * 4, size, seed, channels=3)
        for i, (image, label) in enumerate(zip(images, labels)):
            directory = os.path.join(root, split, f"class_{label}")
            os.makedirs(directory, exist_ok=True)
            Image.fromarray(image).save(os.path.join(directory, f"{i}.png"))
    for i in range(corrupt):
        with open(os.path.join(root, "train", "class_0", f"broken_{i}.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 this is not a jpeg")
    return str(root)


def tiny_flags(workdir, data_dir, *extra):
    """Flags of a run that takes seconds: the tiny ViT on 16 x 16 IDX images.

    The plain-ViT preset (`default`'s is a hybrid): a later `--config` flag wins.
    """
    return (
        f"--workdir={workdir}", "--config=fashion_mnist_vit", "--dataset=fashion_mnist", f"--data_dir={data_dir}",
        "--image_size=16", "--batch_size=32", f"--model_kwargs={TINY_MODEL}",
        "--warmup_steps=2", JIT_FLAG, *extra,
    )


def main_command(*flags):
    return [sys.executable, os.path.join(ROOT, "train", "main.py"), *flags]


def run_main(*flags, timeout=300, env=None):
    """Runs train/main.py to completion; returns the CompletedProcess."""
    environment = {**os.environ, "KERAS_BACKEND": BACKEND, **(env or {})}
    return subprocess.run(
        main_command(*flags), capture_output=True, text=True, timeout=timeout, env=environment, cwd=ROOT
    )


def call_main(argv):
    """Parses `argv` as `train/main.py` does and runs its `main` in this process; returns the status.

    The absl flags are reset before and after, so calls do not leak flags into each other.
    """
    from absl import flags

    from train import main as cli

    flags.FLAGS.unparse_flags()
    try:
        cli.parse_flags(["main.py", *argv])
        return cli.main([])
    except SystemExit as exit_:
        return exit_.code
    finally:
        flags.FLAGS.unparse_flags()


def main_here(capsys, *flags):
    """`call_main(flags)` here, read back as a finished process: `returncode`, `stdout`, `stderr`.

    For runs whose subject is the training, not the process around it (exit status,
    signals, no traceback: tests/bad_inputs/test_cli.py and the kill tests): the same
    `main`, without a second import of TensorFlow or JAX (6 s and 3 s a run here).
    """
    capsys.readouterr()  # what the test printed before is not the run's
    status = call_main(list(flags))
    captured = capsys.readouterr()
    return types.SimpleNamespace(returncode=status, stdout=captured.out, stderr=captured.err)


def run_student_here(workdir, data_dir, seed, flags):
    """`runs.students.run_student` with the trainer called in this process.

    The scripts run each student in a process of its own, which imports TensorFlow and
    Keras again (about 9 s of a tiny run's 12 on 2 cores); the same flags
    (`student_arguments`) go to the same `main` here.
    """
    from runs.students import finished_summary, student_arguments

    start = time.perf_counter()
    arguments = student_arguments(workdir, data_dir, seed, flags)
    status = call_main(arguments)
    if status:
        raise RuntimeError(f"train/main.py {arguments} exited {status}")
    return finished_summary(workdir, start)


def run_in_process(argv, capsys):
    """`main_here` for flag checks and short runs; returns `(status, stderr)`."""
    result = main_here(capsys, *argv)
    return result.returncode, result.stderr


def run_many(argv_lists, env, timeout=600):
    """`call_main` for each entry, all in one new process with `env` added to this one's.

    An entry is an argument list, or `{"argv": [...], "env": {...}}` with variables set for that
    call only (those the trainer reads when it runs: `TF_CONFIG`, `KERAS_DISTRIBUTION_*`).

    For command lines that need an environment of their own (a backend, 8 virtual devices):
    TensorFlow and Keras are imported once for all of them (tests/train/run_many.py).

    Returns:
        One dict per argument list: `status`, `stdout` and `stderr` of its call.
    """
    process = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "train", "run_many.py")], input=json.dumps(argv_lists),
        capture_output=True, text=True, env={**os.environ, **env}, cwd=ROOT, timeout=timeout)
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])

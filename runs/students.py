"""Fashion-MNIST slices and trainer runs of the plain ViT preset, for the benchmark and experiment scripts.

Each run is `train/main.py` in a process of its own (`run_student`), on IDX files
written by `write_slice`, with the preset's warmup and EMA horizon scaled to the
run's length (`scaled_schedule`): the preset's own 4,680 steps would leave a short
run's EMA weights near their initial values.
"""

import gzip
import json
import os
import shlex
import struct
import subprocess
import sys
import time

import numpy as np

from train.data import read_idx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The students are the plain ViT of this preset (the `default` one is a hybrid).
STUDENT_PRESET = "fashion_mnist_vit"
PRESET_STEPS = 4680
PRESET_EMA_HORIZON = 1 / (1 - 0.999)


def write_idx(path, array):
    """A gzipped unsigned-byte IDX file, as `train.data.read_idx` reads it."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def write_slice(source_dir, directory, train_size, test_size):
    """The first `train_size` training and `test_size` test examples, as Fashion-MNIST IDX files.

    Returns:
        `(train examples, test examples)` written (fewer when the source has fewer).
    """
    os.makedirs(directory, exist_ok=True)
    sizes = []
    for prefix, size in (("train", train_size), ("t10k", test_size)):
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
            array = read_idx(os.path.join(source_dir, f"{prefix}-{kind}.gz"))[:size]
            write_idx(os.path.join(directory, f"{prefix}-{kind}.gz"), array)
        sizes.append(len(array))
    return tuple(sizes)


def scaled_schedule(total_steps):
    """`(warmup steps, EMA decay)` of the preset, scaled to a run of `total_steps`."""
    horizon = max(PRESET_EMA_HORIZON * total_steps / PRESET_STEPS, 2.0)
    return total_steps // 10, round(1 - 1 / horizon, 5)


def student_arguments(workdir, data_dir, seed, flags):
    """The `train/main.py` flags of a student run: the preset on the Fashion-MNIST files of `data_dir`."""
    return [f"--workdir={workdir}", f"--config={STUDENT_PRESET}", "--dataset=fashion_mnist", f"--data_dir={data_dir}",
            f"--seed={seed}", *flags]


def run_student(workdir, data_dir, seed, flags):
    """Runs `train/main.py` to completion; returns its `summary.json`."""
    command = [sys.executable, os.path.join(ROOT, "train", "main.py"),
               *student_arguments(workdir, data_dir, seed, flags)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"{shlex.join(command)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return finished_summary(workdir, start)


def finished_summary(workdir, start):
    """A finished run's `summary.json`, with `wall_seconds` since `start` (`time.perf_counter()`)."""
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    summary["wall_seconds"] = time.perf_counter() - start
    return summary


def machine():
    """`lscpu`'s model name and the core count."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        import platform

        name = platform.processor() or "unknown CPU"
    return f"{name}, {os.cpu_count()} cores"


def check_source_and_workdir(parser, args):
    """Errors (exit 2) for a `--source_dir` without Fashion-MNIST files or a used `--workdir`."""
    if not os.path.isfile(os.path.join(args.source_dir, "train-images-idx3-ubyte.gz")):
        parser.error(f"--source_dir holds no train-images-idx3-ubyte.gz (install the Debian package "
                     f"dataset-fashion-mnist, or point it at IDX files). Received: source_dir={args.source_dir!r}")
    if args.workdir is not None and os.path.isdir(args.workdir) and os.listdir(args.workdir):
        parser.error(f"--workdir must be empty or new (earlier runs there would be resumed, not retrained). "
                     f"Received: workdir={args.workdir!r}")

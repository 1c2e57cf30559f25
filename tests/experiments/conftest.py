"""Fixtures of the experiment scripts' tests."""

import time

import pytest

from benchmarks.distillation import finished_summary, student_arguments
from experiments import common
from tests.train.helpers import call_main, make_idx_dataset


@pytest.fixture(scope="session")
def source(tmp_path_factory):
    """A small generated IDX dataset in Fashion-MNIST's layout: 128 training and 32 test images of 28x28."""
    return make_idx_dataset(tmp_path_factory.mktemp("source"), train=128, test=32, size=28)


@pytest.fixture(autouse=True)
def trainer_in_this_process(monkeypatch):
    """The scripts' trainer runs call `train/main.py`'s `main` in the test's process.

    The scripts run each in a process of its own (`benchmarks.distillation.run_student`), which
    imports TensorFlow and Keras again: about 9 s of a tiny run's 12 on 2 cores. The same flags
    (`student_arguments`) go to the same `main` here; that process plumbing is run end to end
    by `tests/benchmarks/test_distillation_script.py`.
    """
    def run_student(workdir, data_dir, seed, flags):
        start = time.perf_counter()
        arguments = student_arguments(workdir, data_dir, seed, flags)
        status = call_main(arguments)
        if status:
            raise RuntimeError(f"train/main.py {arguments} exited {status}")
        return finished_summary(workdir, start)

    monkeypatch.setattr(common, "run_student", run_student)

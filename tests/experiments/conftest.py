"""Fixtures of the experiment scripts' tests."""

import pytest

from experiments import common
from tests.train.helpers import make_idx_dataset, run_student_here


@pytest.fixture(scope="session")
def source(tmp_path_factory):
    """A small generated IDX dataset in Fashion-MNIST's layout: 128 training and 32 test images of 28x28."""
    return make_idx_dataset(tmp_path_factory.mktemp("source"), train=128, test=32, size=28)


@pytest.fixture(autouse=True)
def trainer_in_this_process(monkeypatch):
    """The scripts' trainer runs call `train/main.py`'s `main` in the test's process
    (`tests.train.helpers.run_student_here`); the process plumbing of `run_student` is run end
    to end by `tests/benchmarks/test_distillation_script.py`."""
    monkeypatch.setattr(common, "run_student", run_student_here)

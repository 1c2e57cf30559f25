"""Fixtures of the experiment scripts' tests."""

import pytest

from tests.train.helpers import make_idx_dataset


@pytest.fixture(scope="session")
def source(tmp_path_factory):
    """A small generated IDX dataset in Fashion-MNIST's layout: 128 training and 32 test images of 28x28."""
    return make_idx_dataset(tmp_path_factory.mktemp("source"), train=128, test=32, size=28)

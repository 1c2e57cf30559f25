"""`import keras_vit` switches TensorFlow to its BFC CPU allocator, unless the user chose."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Allocator statistics exist only for the BFC allocator: with the default one
# `get_memory_info` raises, so the script prints which allocator is in use.
SCRIPT = """
import keras_vit
import tensorflow as tf
tf.ones((256, 256)) + 1.0
try:
    info = tf.config.experimental.get_memory_info("CPU:0")
    print("bfc", info["peak"] > 0)
except ValueError:
    print("default")
"""


@pytest.mark.parametrize("user_value, expected", [(None, "bfc True"), ("false", "default")])
def test_import_turns_on_bfc_cpu_allocator_unless_set(user_value, expected):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    env.update(KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
    if user_value is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = user_value
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == expected

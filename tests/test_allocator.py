"""`import keras_vit` asks TensorFlow for its BFC CPU allocator, unless the user chose.

What is tested is what keras_vit does: the variable it sets before TensorFlow
starts, and that a value of the user's is kept. How a given TensorFlow build
then reports its allocator differs between builds, so it is not asserted here
(the speed effect is measured in BENCHMARKS.md).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = """
import os
import keras_vit
print(os.environ.get("TF_CPU_ALLOCATOR_USE_BFC", "<unset>"))
"""


@pytest.mark.parametrize("user_value, expected", [(None, "true"), ("false", "false"), ("true", "true")])
def test_import_sets_the_bfc_allocator_variable_unless_the_user_set_it(user_value, expected):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    env.update(KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
    if user_value is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = user_value
    result = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == expected

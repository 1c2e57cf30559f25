"""The training entry points ask TensorFlow for its BFC CPU allocator; `import keras_vit` changes nothing.

What is tested is what our code does: the variable each entry point sets before
TensorFlow is first imported (it is read once, at TensorFlow's first op), that a
value of the user's is kept, and that the library leaves the environment alone.
How a given TensorFlow build then reports its allocator differs between builds,
so it is not asserted here (the speed effect is measured in BENCHMARKS.md).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"

# Runs a script as `python SCRIPT ARGS...` would, and reports the variable at the moment
# TensorFlow is first imported, then stops the process there: no model is built.
AT_TENSORFLOW_IMPORT = f"""
import os, runpy, sys

class ReportAtTensorFlowImport:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            print("{VARIABLE}=" + os.environ.get("{VARIABLE}", "<unset>"), flush=True)
            os._exit(0)
        return None

sys.meta_path.insert(0, ReportAtTensorFlowImport())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
print("TensorFlow was never imported", flush=True)
"""

# The entry points that train with TensorFlow on a CPU (or time it).
ENTRY_POINTS = [
    ["train/main.py"],
    ["benchmarks/bench.py"],
    ["benchmarks/fast_paths.py"],
    ["benchmarks/ablate_train_step.py"],
    ["benchmarks/profile_step.py"],
]


def _environment(user_value):
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    env.update(KERAS_BACKEND="tensorflow", PYTHONPATH=ROOT)
    if user_value is not None:
        env[VARIABLE] = user_value
    return env


@pytest.mark.parametrize("entry_point", ENTRY_POINTS, ids=lambda argv: argv[0])
@pytest.mark.parametrize("user_value, expected", [(None, "true"), ("false", "false")])
def test_entry_point_sets_the_bfc_allocator_before_tensorflow_unless_the_user_did(
    entry_point, user_value, expected, tmp_path
):
    env = {**_environment(user_value), "TMPDIR": str(tmp_path)}  # profile_step.py makes its folder first
    result = subprocess.run([sys.executable, "-c", AT_TENSORFLOW_IMPORT, *entry_point], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == f"{VARIABLE}={expected}"


def test_importing_train_main_sets_it():
    script = f"import os, train.main; print(os.environ.get('{VARIABLE}', '<unset>'))"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=_environment(None),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "true"


# Keras and TensorFlow set variables of their own when imported: imported first, they
# leave only what `import keras_vit` itself would change.
UNCHANGED_BY_IMPORT = """
import importlib.util, os
import keras
if importlib.util.find_spec("tensorflow"):
    import tensorflow
before = dict(os.environ)
import keras_vit
after = dict(os.environ)
print(sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)))
"""


def test_import_keras_vit_leaves_the_environment_unchanged():
    env = _environment(None)
    env["KERAS_BACKEND"] = os.environ.get("KERAS_BACKEND", "tensorflow")
    result = subprocess.run([sys.executable, "-c", UNCHANGED_BY_IMPORT], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"

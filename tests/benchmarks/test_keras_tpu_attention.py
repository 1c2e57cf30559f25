"""`benchmarks/keras_tpu_attention.py`: the report on Keras's own TPU attention runs and measures each length.

What Keras computes is Keras's (a later release may fix it): the test checks the script,
not Keras. Its two references differ by far more than float32 rounding, so every row must
be far from at least one of them; and the script never imports keras_vit, so that it can
be sent upstream as it is.
"""

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "keras_tpu_attention.py")


def test_each_length_gets_a_row_against_both_references():
    result = subprocess.run([sys.executable, SCRIPT, "--lengths=65,256", "--head_dim=16"], capture_output=True,
                            text=True, cwd=ROOT, timeout=300, env={**os.environ, "KERAS_BACKEND": "jax"})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {}
    for line in result.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].isdigit():
            rows[int(cells[0])] = (float(cells[1]), float(cells[2]), int(cells[3]))
    assert rows.keys() == {65, 256}, result.stdout
    for right, causal_unscaled, logged in rows.values():
        assert max(right, causal_unscaled) > 0.1 and logged >= 0


def test_the_script_stands_alone_and_refuses_bad_flags():
    imported = set()
    for node in ast.walk(ast.parse(open(SCRIPT).read())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported <= {"argparse", "contextlib", "logging", "os", "unittest", "jax", "keras", "numpy"}, imported
    for flag, message in (("--lengths=64,x", "--lengths takes positive integers"),
                          ("--head_dim=0", "--head_dim takes a positive integer")):
        result = subprocess.run([sys.executable, SCRIPT, flag], capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert result.returncode == 2 and message in result.stderr, result.stderr

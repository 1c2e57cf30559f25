"""The README's commands are the ones CI runs."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert len(ci_lines) == 1
    assert re.search(r"^" + re.escape(ci_lines[0]) + r"$", readme, re.M), ci_lines[0]
    assert "KERAS_BACKEND=tensorflow" in ci_lines[0] and "KERAS_BACKEND=jax" in ci_lines[0]

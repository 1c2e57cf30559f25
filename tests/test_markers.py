"""The suite's markers (tests/conftest.py): every test file has a backend class, the slow list is real.

The README's command runs the JAX phase with `-m both_backends`: a test file left out of
`BACKENDS` would run on TensorFlow only, silently, so collection refuses it; this test says
which file, without collecting the suite.
"""

import ast
import configparser
import re

from tests import conftest
from tests.test_readme import readme_commands

TESTS = conftest.TESTS


def defined_tests(path):
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}


def files_with_tests():
    return sorted(path for path in TESTS.rglob("test_*.py") if defined_tests(path))


def test_every_test_file_has_a_backend_class():
    missing = [path.relative_to(TESTS).as_posix() for path in files_with_tests() if conftest.backend_class(path) is None]
    assert not missing, f"add these to tests/conftest.py BACKENDS: {missing}"
    assert set(conftest.BACKENDS.values()) == {conftest.BOTH, conftest.ONE}


def test_backend_class_takes_the_longest_matching_path():
    assert conftest.backend_class(TESTS / "models" / "test_models.py") == conftest.BOTH
    assert conftest.backend_class(TESTS / "models" / "test_variants.py") == conftest.ONE
    assert conftest.backend_class(TESTS / "train" / "test_main.py") == conftest.BOTH
    assert conftest.backend_class(TESTS / "train" / "test_data.py") == conftest.ONE
    assert conftest.backend_class(TESTS / "no_such_folder" / "test_x.py") is None


def test_every_slow_or_first_entry_names_a_test_that_exists():
    stale = []
    assert len(set(conftest.FIRST)) == len(conftest.FIRST)
    for entry in (*conftest.SLOW, *conftest.FIRST):
        relative, name = entry.split("::")
        path = TESTS / relative
        if not path.exists() or name not in defined_tests(path):
            stale.append(entry)
    assert not stale, f"tests/conftest.py SLOW or FIRST names tests that do not exist: {stale}"


def test_the_longest_tests_run_first_and_the_others_keep_their_order():
    import types

    def item(entry):
        relative, name = entry.split("::")
        return types.SimpleNamespace(path=TESTS / relative, originalname=name)

    others = [item("layers/test_patches.py::test_a"), item("models/test_models.py::test_b"),
              item("layers/test_patches.py::test_c")]
    first, second = item(conftest.FIRST[0]), item(conftest.FIRST[1])
    # Every parametrization of a test in FIRST shares its originalname and moves with it.
    ordered = conftest.run_first([others[0], second, others[1], first, others[2], second])
    assert ordered == [first, second, second, *others]


def test_the_development_loop_keeps_a_test_of_every_file_but_the_end_to_end_ones():
    slow_files = set()
    for path in files_with_tests():
        relative = path.relative_to(TESTS).as_posix()
        if all(f"{relative}::{name}" in conftest.SLOW for name in defined_tests(path)):
            slow_files.add(relative)
    assert slow_files == conftest.ALL_SLOW


def test_markers_are_registered_and_the_readme_runs_the_jax_phase_by_marker():
    config = configparser.ConfigParser()
    config.read(TESTS.parent / "setup.cfg")
    registered = {line.split(":")[0].strip() for line in config["tool:pytest"]["markers"].strip().splitlines()}
    assert {conftest.BOTH, conftest.ONE, "slow"} <= registered
    assert "--strict-markers" in config["tool:pytest"]["addopts"]
    phases = re.findall(r"KERAS_BACKEND=(\w+) python -m pytest ([^&]*)", readme_commands()[1])
    assert [backend for backend, _ in phases] == ["tensorflow", "jax"]
    assert "-m" not in phases[0][1].split() and f"-m {conftest.BOTH}" in phases[1][1]
    assert all("--durations=25" in arguments and "--ignore" not in arguments for _, arguments in phases)

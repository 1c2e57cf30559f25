"""The README's commands are the ones CI runs."""

import pathlib
import re

import numpy as np

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


FAMILIES = ("ViT", "hybrid ResNet+ViT", "DeiT", "ConViT", "Swin")


def test_readme_and_package_description_name_every_family():
    readme = (ROOT / "README.md").read_text()
    first_paragraph = " ".join(readme.split("\n\n")[1].split())
    description = next(line for line in (ROOT / "setup.cfg").read_text().splitlines()
                       if line.startswith("description = "))
    for text in (first_paragraph, description):
        missing = [family for family in FAMILIES if family not in text]
        assert not missing, f"{missing} not named in: {text}"


def test_readme_main_command_installs_the_trainer():
    readme = (ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if line.endswith("python train/main.py"))
    extras = re.search(r'pip install -q -e "\.\[([\w,-]+)\]"', command).group(1).split(",")
    assert "train" in extras and "cpu" in extras, command


def test_readme_python_examples_run(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert tuple(namespace["logits"].shape) == (2, 1000)
    assert tuple(namespace["probs"].shape) == (1, 12, 197, 197)
    assert namespace["heat"].shape == (1, 96, 96) and namespace["gates"].shape == (10, 4)
    assert (tmp_path / "custom.keras").exists() and (tmp_path / "custom_savedmodel").is_dir()
    assert namespace["report"].resampled and "head/kernel" in dict(namespace["report"].skipped)
    if namespace["keras"].config.backend() == "tensorflow":
        assert namespace["ov_logits"].shape == (4, 10) and np.isfinite(namespace["ov_logits"]).all()

"""The README is the landing page: short, its commands the ones CI runs and the docs show."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_commands():
    """The README's two set-up commands: the main job's and the tests'."""
    lines = README.read_text().splitlines()
    main = next(line for line in lines if line.endswith("python train/main.py"))
    tests = next(line for line in lines if "python -m pytest" in line)
    return main, tests


def test_ci_runs_the_readme_test_command():
    ci_lines = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line and not line.startswith(("#", "set ", "cd "))
    ]
    assert len(ci_lines) == 1
    assert ci_lines[0] == readme_commands()[1]
    assert "KERAS_BACKEND=tensorflow" in ci_lines[0] and "KERAS_BACKEND=jax" in ci_lines[0]
    # The JAX phase is chosen by marker (tests/test_markers.py), never by a list of --ignore flags.
    assert "--ignore" not in ci_lines[0]


def test_the_site_shows_the_same_two_commands():
    page = (ROOT / "docs" / "getting-started.md").read_text().splitlines()
    for command in readme_commands():
        assert command in page, command


FAMILIES = ("ViT", "hybrid ResNet+ViT", "DeiT", "ConViT", "Swin", "DINOv2")


def test_readme_and_package_description_name_every_family():
    readme = README.read_text()
    first_paragraph = " ".join(readme.split("\n\n")[1].split())
    description = next(line for line in (ROOT / "setup.cfg").read_text().splitlines()
                       if line.startswith("description = "))
    for text in (first_paragraph, description):
        missing = [family for family in FAMILIES if family not in text]
        assert not missing, f"{missing} not named in: {text}"


def test_readme_main_command_installs_the_trainer():
    command = readme_commands()[0]
    extras = re.search(r'pip install -q -e "\.\[([\w,-]+)\]"', command).group(1).split(",")
    assert "train" in extras and "cpu" in extras, command


def test_readme_docs_command_installs_a_keras_backend_beside_the_docs_tools():
    # The API reference imports keras_vit, whose Keras needs a backend; the docs extra names none.
    line = next(line for line in README.read_text().splitlines() if "mkdocs build --strict" in line)
    extras = re.search(r'pip install -q -e "\.\[([\w,-]+)\]"', line).group(1).split(",")
    assert "docs" in extras and {"cpu", "tpu", "gpu", "jax"} & set(extras), line


def test_readme_is_a_landing_page_whose_links_resolve():
    text = README.read_text()
    # A quickstart: measurements with their machines and dates live in BENCHMARKS.md, history in CHANGELOG.md.
    assert len(text.splitlines()) <= 80
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text), "a date in the README"
    assert not re.findall(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", text), "a commit hash in the README"
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [target for target in targets if "://" not in target and not (ROOT / target).exists()]
    assert not missing, missing


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert tuple(namespace["logits"].shape) == (2, 1000)
    assert tuple(namespace["swin"].input_shape) == (None, 200, 264, 1)
    assert tuple(namespace["swin"].output_shape) == (None, 10)

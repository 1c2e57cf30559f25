"""The Colab notebooks run top to bottom on a CPU in their SMALL mode, and draw their figures."""

import os
import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[2]
# notebook -> how many figures (image/png outputs) it must draw
NOTEBOOKS = {"train_on_tpu.ipynb": 1, "finetune_pretrained.ipynb": 1, "inspect_vit.ipynb": 6}


def run_small(name, workdir):
    notebook = nbformat.read(ROOT / "colab" / name, as_version=4)
    parameters = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    assert "SMALL = False" in parameters.source
    parameters.source = parameters.source.replace("SMALL = False", "SMALL = True")
    parameters.source += f"\nWORKDIR = {str(workdir)!r}"
    os.environ["KERAS_BACKEND"] = "tensorflow"
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "colab")}}).execute()
    return notebook


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_and_draws(name, tmp_path):
    notebook = run_small(name, tmp_path)
    figures = [
        output for cell in notebook.cells if cell.cell_type == "code"
        for output in cell.get("outputs", []) if "image/png" in output.get("data", {})
    ]
    assert len(figures) >= NOTEBOOKS[name]
    first = notebook.cells[0].source
    assert "colab.research.google.com/github/" in first and f"colab/{name}" in first


def test_notebooks_import_the_package_and_do_not_redefine_it():
    for name in NOTEBOOKS:
        cells = nbformat.read(ROOT / "colab" / name, as_version=4).cells
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        assert "import keras_vit" in code
        assert not re.search(r"^\s*(class|def) ", code, re.M), "notebooks must not define code"

"""The Colab notebooks run top to bottom on a CPU in their SMALL mode, and draw their figures.

Each runs on the TensorFlow backend; `train_on_tpu.ipynb` also on JAX over 8 virtual
devices (the device count of a TPU v2-8), and with its `BACKEND = "tensorflow-tpu"` switch,
which finds no TPU here and must say so. The kernel inherits this process's environment,
so the backend and XLA flags are set with `monkeypatch` (and restored after the test).
"""

import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

from tests.xla import xla_flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
# notebook -> how many figures (image/png outputs) it must draw
NOTEBOOKS = {"train_on_tpu.ipynb": 1, "finetune_pretrained.ipynb": 1, "inspect_vit.ipynb": 8}


def run_small(name, workdir, monkeypatch, backend="tensorflow", settings="", twice=False, **environment):
    """Executes `colab/<name>` with `SMALL = True`, `WORKDIR = workdir` and `settings` in a kernel on `backend`.

    With `twice`, every cell runs a second time after the last in the same kernel, as
    "Run all" does when clicked again: the second pass finds the first one's workdir.
    """
    notebook = nbformat.read(ROOT / "colab" / name, as_version=4)
    parameters = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    assert "SMALL = False" in parameters.source
    parameters.source = parameters.source.replace("SMALL = False", "SMALL = True")
    parameters.source += f"\nWORKDIR = {str(workdir)!r}\n{settings}"
    if twice:
        notebook.cells = notebook.cells + [nbformat.from_dict(dict(cell)) for cell in notebook.cells]
    monkeypatch.setenv("KERAS_BACKEND", backend)
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "colab")}}).execute()
    return notebook


def figures(notebook):
    return [
        output for cell in notebook.cells if cell.cell_type == "code"
        for output in cell.get("outputs", []) if "image/png" in output.get("data", {})
    ]


def printed(cells):
    """Everything `cells` wrote to stdout, and their text results."""
    parts = []
    for cell in cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(output.get("text", "") if output.get("name") == "stdout" else "")
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def test_every_notebook_is_run():
    assert sorted(path.name for path in (ROOT / "colab").glob("*.ipynb")) == sorted(NOTEBOOKS)


# Each notebook runs twice in a row in one kernel ("Run all" clicked again): every cell works the
# second time, on the first pass's workdir, and draws its figures again.
@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_twice_and_draws(name, tmp_path, monkeypatch):
    notebook = run_small(name, tmp_path, monkeypatch, twice=True)
    assert len(figures(notebook)) >= 2 * NOTEBOOKS[name]
    text = printed(notebook.cells)
    assert "backend tensorflow" in text
    if name == "train_on_tpu.ipynb":
        assert "No TPU or GPU: training on the CPU" in text
        # The second pass resumes the finished run: nothing to train, the same summary and curves.
        assert text.count("Trained 24 steps on 1 cpu device(s)") == 2
        assert "Code path: cpu; attention kernels traced: {'keras':" in text
    if name == "finetune_pretrained.ipynb":
        # Offline (as in CI) the generated stand-in; with a network the known checkpoint itself.
        assert re.search(r"Pretrained weights: (the known checkpoint ViT_Ti16/augreg|a generated checkpoint of ViT_Ti16)",
                         text)
        assert "resampled" in text and "test accuracy" in text


def test_train_on_tpu_trains_data_parallel_over_8_jax_devices(tmp_path, monkeypatch):
    # A TPU v2-8 shows JAX 8 devices; 8 virtual CPU devices stand in for them here.
    notebook = run_small("train_on_tpu.ipynb", tmp_path, monkeypatch, backend="jax", XLA_FLAGS=xla_flags(8),
                         JAX_PLATFORMS="cpu")
    text = printed(notebook.cells)
    assert "backend jax" in text
    assert "data parallel (keras.distribution.DataParallel) over 8 cpu devices" in text
    assert "No TPU or GPU: training on the CPU" in text
    assert "Trained 24 steps on 8 cpu device(s)" in text
    assert figures(notebook)
    assert (tmp_path / "model.keras").exists() and (tmp_path / "saved_model").is_dir()


def test_train_on_tpu_switched_to_tensorflow_tpu_says_so_when_there_is_no_tpu(tmp_path, monkeypatch):
    # Off Colab nothing is installed: TensorFlow's CPU build tries TPUStrategy, fails, and trains on the CPU.
    notebook = run_small("train_on_tpu.ipynb", tmp_path, monkeypatch, settings='BACKEND = "tensorflow-tpu"')
    strategy_cell = next(cell for cell in notebook.cells if "get_strategy(use_tpu=True" in cell.source)
    said = printed([strategy_cell])
    assert "TPU" in said.split("_DefaultDistributionStrategy")[0], "the failed TPU connection is reported"
    assert "_DefaultDistributionStrategy with 1 replica(s)" in said
    assert "No TPU or GPU: training on the CPU" in said
    assert "Trained 24 steps on 1 cpu device(s)" in printed(notebook.cells)


def test_notebooks_import_the_package_and_do_not_redefine_it():
    for name in NOTEBOOKS:
        cells = nbformat.read(ROOT / "colab" / name, as_version=4).cells
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        assert "import keras_vit" in code
        assert not re.search(r"^\s*(class|def) ", code, re.M), "notebooks must not define code"

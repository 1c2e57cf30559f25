"""setup.cfg's requirements against what the code imports (read as text and syntax; nothing is installed).

The base install is what `import keras_vit` needs; the `train` extra is what the
trainer in train/ imports besides; the `test` extra runs everything.
"""

import ast
import configparser
import pathlib
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Import names whose distribution is named otherwise.
DISTRIBUTIONS = {"PIL": "pillow", "absl": "absl-py", "tensorflow_datasets": "tensorflow-datasets",
                 "keras_cv": "keras-cv", "ai_edge_litert": "ai-edge-litert", "orbax": "orbax-checkpoint"}
# Installed by the runtime's extra (cpu, tpu, gpu, ...), never by `train` or the base.
RUNTIME = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu", "jax", "jaxlib"}
# Imported only by optional paths that name their own extra (analysis, litert, openvino) or
# by multi-host JAX checkpoints (orbax, which the JAX runtimes bring).
OPTIONAL = {"matplotlib", "ai-edge-litert", "openvino", "orbax-checkpoint"}


def _requirements(text):
    return {canonicalize_name(Requirement(line).name)
            for line in text.strip().splitlines() if line.strip() and not line.startswith("#")}


def setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    extras = {name: _requirements(text) for name, text in parser["options.extras_require"].items()}
    return _requirements(parser["options"]["install_requires"]), extras


def imported_distributions(folder):
    """The third-party distributions that the modules under `folder` import, at the top or lazily."""
    local = {path.name.removesuffix(".py") for path in ROOT.iterdir()}
    names = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    third_party = names - set(sys.stdlib_module_names) - local
    return {canonicalize_name(DISTRIBUTIONS.get(name, name)) for name in third_party}


def test_the_base_install_is_what_keras_vit_imports():
    base, _ = setup_cfg()
    imported = imported_distributions("keras_vit")
    assert base == imported - RUNTIME - OPTIONAL, "install_requires must hold what keras_vit imports, no more"


def test_the_train_extra_holds_what_the_trainer_imports_besides():
    base, extras = setup_cfg()
    needed = imported_distributions("train") - RUNTIME - OPTIONAL - base
    assert needed <= extras["train"], f"missing from the train extra: {sorted(needed - extras['train'])}"
    assert not extras["train"] & RUNTIME, "the train extra goes beside a runtime's extra"
    assert "tensorboard" in extras["train"]  # the TensorBoard logs of every run


def test_the_test_extra_runs_the_trainer_too():
    _, extras = setup_cfg()
    assert extras["train"] <= extras["test"]

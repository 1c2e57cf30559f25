"""The package's names as IDEs and type checkers see them: read from the source, never run.

basedpyright (a build of pyright, the checker behind VS Code's Python support) reads a
file that names every public name of `keras_vit` and `keras_vit.models`, with keras_vit
found on the interpreter's path as an installed typed package is (where a name only
imported is private). Each must resolve, the named builders
(`ViT_B16 = named_builder("ViT_B16")` in each family's `named.py`) to callables that
return a `keras.Model`. No stub is written for it.
"""

import json
import os
import pathlib
import subprocess
import sys
import types

import keras_vit

ROOT = pathlib.Path(keras_vit.__file__).parent.parent


def _check(tmp_path, source):
    """basedpyright's diagnostics for `source`, with the repository importable: `[(severity, message)]`."""
    (tmp_path / "check.py").write_text(source)
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "basic"}))
    # On the interpreter's path, not the checker's own `extraPaths`: read as an installed package.
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    run = subprocess.run(
        [sys.executable, "-m", "basedpyright", "--outputjson", "--pythonpath", sys.executable, "check.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env,
    )
    report = json.loads(run.stdout)
    return [(item["severity"], item["message"]) for item in report["generalDiagnostics"]]


def test_every_public_name_resolves_and_the_named_builders_return_models(tmp_path):
    public = {name for name, value in vars(keras_vit).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    # Every public name but the submodules Python adds as attributes is declared public.
    assert public <= set(keras_vit.__all__), sorted(public - set(keras_vit.__all__))
    assert {"ViT_B16", "Swin_T", "DINOv2_S14", "VisionTransformer", "load_weights", "models"} <= set(keras_vit.__all__)
    # A family's builder named as one of the package's names would replace it: each name once.
    assert len(set(keras_vit.__all__)) == len(keras_vit.__all__), keras_vit.__all__
    assert len(set(keras_vit.models.__all__)) == len(keras_vit.models.__all__), keras_vit.models.__all__
    source = "\n".join([
        "import keras_vit",
        "import keras_vit.models",
        *(f"keras_vit.{name}" for name in keras_vit.__all__),
        *(f"keras_vit.models.{name}" for name in keras_vit.models.__all__),
        "reveal_type(keras_vit.ConViT_Ti)",
        "reveal_type(keras_vit.ViT_B16(weights=None, num_classes=10))",
        # The control: a name the package does not have is an error, so the check can fail.
        "keras_vit.ViT_B17",
    ])
    diagnostics = _check(tmp_path, source)
    errors = [message for severity, message in diagnostics if severity == "error"]
    assert errors == ['"ViT_B17" is not a known attribute of module "keras_vit"'], errors
    revealed = [message for severity, message in diagnostics if severity == "information"]
    assert revealed == ['Type of "keras_vit.ConViT_Ti" is "NamedBuilder"',
                        'Type of "keras_vit.ViT_B16(weights=None, num_classes=10)" is "Model"'], revealed

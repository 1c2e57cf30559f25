"""The release installs: sdist and wheel build, `twine check` passes, and the wheel works on its own.

The wheel goes into a new virtual environment, apart from the checkout: keras_vit is
imported from there (every public name), and a copy of the trainer, run from outside the
checkout, trains its first steps with it. The environment reuses this one's installed
dependencies through a path file (Keras, TensorFlow and JAX are not downloaded again), which
adds their directory to `sys.path` without running its own path files, so the checkout's
editable install stays out of it.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from tests.docs.test_site import public_names
from tests.train.helpers import BACKEND, ROOT, make_idx_dataset

DISTRIBUTION = "keras_vision_transformers"  # the wheel's file-name form of keras-vision-transformers
SOURCES = ("keras_vit", "setup.cfg", "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md")


def run(*command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """sdist and wheel built from a copy of the package's sources (the checkout stays clean)."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        path = os.path.join(ROOT, name)
        if os.path.isdir(path):
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, source / name)
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the installed setuptools builds it; nothing is downloaded.
    run(sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out), str(source))
    return out


def test_build_and_twine_check(dist):
    from keras_vit.version import __version__

    names = sorted(os.listdir(dist))
    assert names == [f"{DISTRIBUTION}-{__version__}-py3-none-any.whl", f"{DISTRIBUTION}-{__version__}.tar.gz"]
    run(sys.executable, "-m", "twine", "check", "--strict", *(str(dist / name) for name in names))
    with zipfile.ZipFile(dist / names[0]) as wheel:
        files = wheel.namelist()
    assert any(name.endswith("/LICENSE") and ".dist-info/" in name for name in files), files
    assert "keras_vit/data/imagenet_classes.txt" in files
    # Typed, and each family's builders by name, where an IDE reads them in the installed files.
    assert "keras_vit/py.typed" in files and "keras_vit/models/swin/named.py" in files
    assert not [name for name in files if name.startswith(("tests/", "train/", "experiments/"))]


def test_the_wheel_installs_into_a_new_environment_and_trains(dist, tmp_path):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    site_packages = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site_packages, "dependencies.pth"), "w") as f:
        f.write("\n".join(sorted(ours)) + "\n")
    wheel = next(str(dist / name) for name in os.listdir(dist) if name.endswith(".whl"))
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)

    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["KERAS_BACKEND"] = BACKEND
    names = sorted(public_names())
    check = (
        "import importlib, keras_vit\n"
        f"assert keras_vit.__file__.startswith({str(venv)!r}), keras_vit.__file__\n"
        f"for name in {names!r}:\n"
        "    module, attribute = name.rsplit('.', 1)\n"
        "    getattr(importlib.import_module(module), attribute)\n"
        f"print(len({names!r}), keras_vit.__version__)\n"
    )
    imported = run(python, "-c", check, cwd=away, env=env)
    assert imported.stdout.split()[0] == str(len(names))

    # The main job's first steps with the installed package: the trainer copied out of the checkout.
    shutil.copytree(os.path.join(ROOT, "train"), away / "train", ignore=shutil.ignore_patterns("__pycache__"))
    data = make_idx_dataset(tmp_path / "fashion", train=128, test=32)
    tiny = '{"hidden_size": 24, "num_layers": 1, "num_heads": 2, "mlp_dim": 32}'
    trained = run(python, "train/main.py", f"--workdir={tmp_path / 'run'}", f"--data_dir={data}",
                  "--batch_size=32", "--steps=3", "--warmup_steps=1", "--jit_compile=false",
                  f"--model_kwargs={tiny}", cwd=away, env=env)
    assert "test accuracy" in trained.stdout and (tmp_path / "run" / "model.keras").exists()

"""The README's documentation command, run as it is written, in a copy of the checkout and a new venv (#62)."""

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


# Where the checkout is not a git repository: what a build or a run leaves beside the sources.
GENERATED = shutil.ignore_patterns(".git", "site", "build", "dist", "workdir", "*.egg-info", "__pycache__",
                                   ".pytest_cache", ".hypothesis", ".venv", "venv")


def _copy_checkout(clone):
    """The tracked files as the working tree has them (what a newcomer's clone holds), else the tree."""
    try:
        tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, clone, ignore=GENERATED)
        return
    for name in filter(None, tracked.stdout.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)


def test_the_readme_docs_command_builds_the_site_in_a_new_venv(tmp_path):
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if "mkdocs build --strict" in line)
    clone = tmp_path / "clone"
    _copy_checkout(clone)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=300)
    # A new shell in the new venv, with nothing of this process's Python path.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    command = f". {tmp_path / 'venv' / 'bin' / 'activate'} && {line}"
    result = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    models = (clone / "site" / "api" / "models" / "index.html").read_text()
    assert "Builds ViT_B16 (" in models and (clone / "site" / "index.html").is_file()

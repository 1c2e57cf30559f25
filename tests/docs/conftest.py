import os
import subprocess
import sys

import pytest

from tests.docs.blocks import ROOT


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The site built once per test process with `mkdocs build --strict` (any warning fails it)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return out

"""Every test the docs name (`tests/...py::test_name`) exists: a table of evidence cites real tests."""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def test_every_named_test_exists():
    pages = [*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md"]
    cited, missing = 0, []
    for page in pages:
        for path, name in REFERENCE.findall(page.read_text()):
            cited += 1
            source = ROOT / path
            tree = ast.parse(source.read_text()) if source.is_file() else None
            names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)} if tree else set()
            if name not in names:
                missing.append(f"{page.relative_to(ROOT)}: {path}::{name}")
    assert cited > 50, cited  # the faults table alone cites more
    assert not missing, missing

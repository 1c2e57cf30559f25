"""The notebooks as saved: markdown that renders as written, one settings cell, clean cells.

Pure checks on the .ipynb files (no kernel), so a generator or editing slip such as a
stray `MD` before a heading fails here in a second.
"""

import ast
import pathlib
import re

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK_PATHS = sorted((ROOT / "colab").glob("*.ipynb"))
BADGE_IMAGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
BADGE_LINK = re.compile(
    r"\(https://colab\.research\.google\.com/github/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)"
    r"/blob/(?P<branch>[\w./-]+?)/colab/(?P<name>[\w.-]+\.ipynb)\)"
)
# "MD## Title", "md# Title": something glued in front of a heading's hashes.
STRAY_PREFIX = re.compile(r"^\s*\S*?[^\s#]#{1,6}\s+\S")
# "##Title": Markdown needs a space after the hashes, else it is a paragraph.
HEADING_WITHOUT_SPACE = re.compile(r"^ {0,3}#{1,6}[^#\s]")


def read(path):
    return nbformat.read(path, as_version=4)


def prose_lines(source):
    """The lines of a markdown cell outside fenced code blocks, with their numbers."""
    fenced = False
    for number, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            yield number, line


def parameters_cell(notebook):
    cells = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(cells) == 1, "exactly one cell is tagged `parameters`"
    return cells[0]


def settings(notebook):
    """The names the parameters cell assigns to constants, with their values."""
    values = {}
    for node in ast.parse(parameters_cell(notebook).source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                values[node.targets[0].id] = ast.unparse(node.value)
    return values


def test_there_are_notebooks():
    assert {path.name for path in NOTEBOOK_PATHS} >= {
        "train_on_tpu.ipynb", "finetune_pretrained.ipynb", "inspect_vit.ipynb"
    }


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda path: path.name)
def test_markdown_renders_as_written(path):
    problems = []
    for index, cell in enumerate(read(path).cells):
        if cell.cell_type != "markdown":
            continue
        if not cell.source.strip():
            problems.append(f"cell {index}: empty markdown cell")
        for number, line in prose_lines(cell.source):
            if STRAY_PREFIX.match(line):
                problems.append(f"cell {index} line {number}: text before the heading's '#': {line!r}")
            if HEADING_WITHOUT_SPACE.match(line):
                problems.append(f"cell {index} line {number}: no space after the heading's '#': {line!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "line, malformed",
    [("MD## The strategy", True), ("md# Title", True), ("##Title", True), ("#Title", True),
     ("## The strategy", False), ("# Title", False), ("Text with a # inside", False),
     ("[![Open In Colab](x.svg)](y)", False)],
)
def test_the_markdown_check_tells_malformed_headings(line, malformed):
    assert bool(STRAY_PREFIX.match(line) or HEADING_WITHOUT_SPACE.match(line)) is malformed


def test_fenced_code_is_not_read_as_headings():
    source = "Run:\n```bash\n#comment\nMD## not a heading\n```\n## After"
    assert [line for _, line in prose_lines(source)] == ["Run:", "## After"]


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda path: path.name)
def test_first_cell_is_the_title_and_the_colab_badge_of_this_notebook(path):
    first = read(path).cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith("# "), "the first line is the title (`# ...`)"
    assert BADGE_IMAGE in first.source, "the first cell carries the Open In Colab badge"
    link = BADGE_LINK.search(first.source)
    assert link, "the badge links to colab.research.google.com/github/<owner>/<repo>/blob/<branch>/colab/<name>"
    assert link["name"] == path.name


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda path: path.name)
def test_badge_and_clone_address_are_one_setting_at_the_top(path):
    notebook = read(path)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells[0] is parameters_cell(notebook), "the settings are the first code cell"
    values = settings(notebook)
    assert values["SMALL"] is False and isinstance(values["WORKDIR"], str)
    link = BADGE_LINK.search(notebook.cells[0].source)
    assert values["REPOSITORY"] == f"https://github.com/{link['owner']}/{link['repo']}", (
        "the badge (markdown, which cannot read a variable) must open the repository that REPOSITORY clones"
    )
    others = "\n".join(cell.source for cell in code_cells[1:])
    assert "github.com" not in others, "the clone address is set only in the settings cell"
    assert "REPOSITORY" in others


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda path: path.name)
def test_notebooks_are_saved_clean(path):
    notebook = read(path)
    nbformat.validate(notebook)  # cell ids present, unique and well formed (nbformat 4.5)
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"cell {index} was saved with outputs"
            ast.parse(cell.source)  # no IPython magics: plain Python that any kernel reads


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda path: path.name)
def test_backend_is_chosen_before_keras_is_imported(path):
    notebook = read(path)
    assert settings(notebook)["BACKEND"] == "auto"
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert code.index('os.environ["KERAS_BACKEND"]') < code.index("import keras\n")


def test_train_on_tpu_has_the_tensorflow_tpu_switch():
    notebook = read(ROOT / "colab" / "train_on_tpu.ipynb")
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    assert 'BACKEND == "tensorflow-tpu"' in code
    assert "https://storage.googleapis.com/libtpu-tf-releases/index.html" in code
    # The trainer's dependencies come with the `train` extra beside the runtime's.
    assert '"[tensorflow-tpu,train]"' in code and '"[tpu,train]"' in code
    assert "No TPU or GPU: training on the CPU" in code

"""The import graph of `keras_vit`'s modules is one-way (docs/design.md draws its order)."""

import ast
import pathlib

import keras_vit

ROOT = pathlib.Path(keras_vit.__file__).parent


def _modules():
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _imports(name, path, modules):
    """Every keras_vit module `path` (module `name`) imports, at module level or inside functions.

    Importing `a.b.c` runs the package `a.b`'s `__init__` first, so that counts
    too, except for the packages `name` itself lies in, which Python has
    initialized (or is initializing) before it.
    """
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "keras_vit":
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found.update(name if name in modules else node.module for name in names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "keras_vit")
    own = name.split(".")
    ancestors = {".".join(own[:i]) for i in range(1, len(own))}
    with_parents = set()
    for imported in found:
        parts = imported.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in with_parents - ancestors if m in modules}


def import_graph():
    modules = _modules()
    return {name: _imports(name, path, modules) - {name} for name, path in modules.items()}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt, stack)):
                return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [])):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_counting_deferred_imports_and_packages():
    assert _cycle(import_graph()) is None


def test_weight_conversion_never_imports_model_code():
    graph = import_graph()
    for name, imports in graph.items():
        if name.startswith("keras_vit.weights"):
            assert not {i for i in imports if i.startswith("keras_vit.models")}, name


def test_layers_import_nothing_above_them():
    # The one exception: the registered families' specs, which import nothing of keras_vit.
    graph = import_graph()
    assert graph["keras_vit.families"] == set()
    for name, imports in graph.items():
        if name.startswith("keras_vit.layers"):
            assert all(i.startswith("keras_vit.layers") or i == "keras_vit.families" for i in imports), (name, imports)


# The ranks drawn in docs/design.md ("The import order"); a module imports only
# from its own rank or below. The longest matching prefix decides.
RANKS = {
    "keras_vit.layers": 0,
    "keras_vit.architectures": 1,
    "keras_vit.checkpoints": 1,
    "keras_vit.families": 0,
    "keras_vit.files": 1,
    "keras_vit.images": 1,
    "keras_vit.imagenet": 1,
    "keras_vit.utils": 1,
    "keras_vit.schedules": 1,
    "keras_vit.distribution": 1,
    "keras_vit.few_shot": 1,
    "keras_vit.version": 1,
    "keras_vit.preprocessing": 1,
    "keras_vit.pretraining": 1,
    "keras_vit.inspection": 2,
    "keras_vit.weights": 3,
    "keras_vit.models": 4,
    "keras_vit.feature_extraction": 5,
    "keras_vit.classification": 5,
    "keras_vit.catalog": 5,
    "keras_vit.analysis": 3,
    "keras_vit.export": 5,
    "keras_vit": 6,
}


def rank(module):
    prefix = max((p for p in RANKS if module == p or module.startswith(p + ".")), key=len)
    return RANKS[prefix]


def test_every_import_goes_down_the_drawn_order():
    upward = [
        (name, imported)
        for name, imports in import_graph().items()
        for imported in imports
        if rank(imported) > rank(name)
    ]
    assert not upward


def test_the_design_notes_draw_every_rank():
    notes = (ROOT.parent / "docs" / "design.md").read_text()
    for module, number in RANKS.items():
        short = module.removeprefix("keras_vit.").split(".")[0]
        assert short in notes, module
    assert "tests/test_import_graph.py" in notes


def _docstrings(tree):
    """The string constants of `tree` that are docstrings (of a module, class or function, or after an assignment)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)):
                found.add(id(statement.value))
    return found


def code_words(path):
    """What a module names in code, lower-cased: identifiers, attributes, import paths and strings that are not docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words += [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, (ast.arg, ast.keyword)):
            words.append(node.arg or "")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append(node.value)
    return " ".join(words).lower()


def test_code_words_skip_comments_and_docstrings_only(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""About Axial."""\n# Axial\nx = "axial"\n\ndef f(axial_arg):\n    """Axial."""\n')
    assert sorted(code_words(module).split()) == ["axial", "axial_arg", "f", "x"]


# A family in its folder (`keras_vit/models/<family>/`) -> the words that name it in code.
FOLDER_FAMILIES = {"axial": ("axial",), "convit": ("convit", "gpsa"), "dinov2": ("dinov2",), "swin": ("swin",)}


# Outside its folder, a family is named by the module that imports the folders (and so registers
# them), and by the trainer's presets of the papers' recipes, which name the model each paper
# trained: kept in train/ because `train/main.py` parses its flags before Keras is imported,
# and importing a family folder imports keras_vit.
NAMING_MODULES = ["keras_vit/models/builders.py"]
RECIPES = {"convit": ["train/configs/presets.py"], "swin": ["train/configs/presets.py"]}


def test_a_family_is_named_outside_its_folder_only_where_the_folders_are_imported():
    # Issues #40 and #60: shared code (keras_vit/ and train/) asks the family's spec, its model's
    # blocks or the registry, never its name or classes.
    repository = ROOT.parent
    paths = [*ROOT.rglob("*.py"), *(repository / "train").rglob("*.py")]
    modules = {path: code_words(path) for path in paths}
    for family, words in FOLDER_FAMILIES.items():
        folder = ROOT / "models" / family
        assert folder.is_dir(), folder
        outside = sorted(str(path.relative_to(repository)) for path, text in modules.items()
                         if folder not in path.parents and any(word in text for word in words))
        assert outside == sorted(NAMING_MODULES + RECIPES.get(family, [])), (family, outside)


def test_a_module_over_400_lines_says_why_at_its_top():
    # Issue #40: a long module is split, or its docstring's opening says why it is one.
    repository = ROOT.parent
    long_ones = []
    for folder in ("keras_vit", "train", "experiments", "benchmarks", "runs"):
        for path in (repository / folder).rglob("*.py"):
            text = path.read_text()
            if text.count("\n") > 400:
                opening = (ast.get_docstring(ast.parse(text)) or "")[:400]
                if "400 lines" not in opening:
                    long_ones.append(str(path.relative_to(repository)))
    assert not long_ones, long_ones

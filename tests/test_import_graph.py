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
    for name, imports in import_graph().items():
        if name.startswith("keras_vit.layers"):
            assert all(i.startswith("keras_vit.layers") for i in imports), (name, imports)


# The ranks drawn in docs/design.md ("The import order"); a module imports only
# from its own rank or below. The longest matching prefix decides.
RANKS = {
    "keras_vit.layers": 0,
    "keras_vit.architectures": 1,
    "keras_vit.families": 1,
    "keras_vit.files": 1,
    "keras_vit.images": 1,
    "keras_vit.imagenet": 1,
    "keras_vit.utils": 1,
    "keras_vit.schedules": 1,
    "keras_vit.distribution": 1,
    "keras_vit.few_shot": 1,
    "keras_vit.evaluation": 1,
    "keras_vit.version": 1,
    "keras_vit.preprocessing": 1,
    "keras_vit.pretraining": 1,
    "keras_vit.inspection": 2,
    "keras_vit.weights": 3,
    "keras_vit.models": 4,
    "keras_vit.feature_extraction": 5,
    "keras_vit.classification": 5,
    "keras_vit.catalog": 5,
    "keras_vit.analysis": 5,
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

"""The documentation site builds strictly, documents every public name, and its code runs."""

import importlib
import inspect
import pathlib
import re
import zlib

import keras
import pytest

import keras_vit
from tests.docs import blocks
from tests.docs.files import PAGE_FILES
from tests.train.helpers import run_many

# The subpackages whose `__all__` is public API, beside the top-level names.
SUBPACKAGES = ("layers", "weights", "preprocessing", "export", "analysis", "pretraining", "few_shot", "utils")


def inventory_names(site, kind="py:"):
    """The objects mkdocstrings documented, from the site's `objects.inv` (Sphinx's format), of `kind`."""
    data = (site / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):  # four text lines, then the zlib-compressed body
        header_end = data.index(b"\n", header_end) + 1
    body = zlib.decompress(data[header_end:]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if f" {kind}" in line}


def public_names():
    names = {f"keras_vit.{name}" for name, value in vars(keras_vit).items()
             if not name.startswith("_") and not inspect.ismodule(value)}
    for sub in SUBPACKAGES:
        module = importlib.import_module(f"keras_vit.{sub}")
        names |= {f"keras_vit.{sub}.{name}" for name in module.__all__}
    return names


def test_the_reference_documents_every_public_name(site):
    documented = inventory_names(site)
    short = {name.rsplit(".", 1)[-1] for name in documented}
    missing = sorted(name for name in public_names()
                     if name not in documented and name.rsplit(".", 1)[-1] not in short)
    assert not missing, f"public names without a reference entry: {missing}"


def test_every_public_module_has_an_entry(site):
    # The package, the modules it declares public and each family's package (its layers and tools).
    modules = {"keras_vit", *(f"keras_vit.{name}" for name in keras_vit.__all__
                              if inspect.ismodule(getattr(keras_vit, name)))}
    folders = pathlib.Path(keras_vit.__file__).parent / "models"
    modules |= {f"keras_vit.models.{path.parent.name}" for path in folders.glob("*/named.py")}
    assert len(modules) >= 17 and "keras_vit.models.swin" in modules
    missing = sorted(modules - inventory_names(site, "py:module"))
    assert not missing, f"public modules without a reference entry: {missing}"


def test_no_reference_entry_is_empty_and_the_named_builders_have_their_docstrings(site):
    # The named builders are bound in each family's `named.py` (`ViT_B16 = named_builder(...)`);
    # griffe's reading of the source sees attributes (docs/hooks/griffe_builders.py makes them functions).
    from keras_vit.models.variants import VARIANTS

    for page in (site / "api").rglob("*.html"):
        html = page.read_text()
        empty = re.search(r'<div class="doc doc-contents ">\s*</div>', html)
        assert not empty, f"an empty reference entry in {page}: {html[max(0, empty.start() - 600):empty.start()]}"
    models = (site / "api" / "models" / "index.html").read_text()
    text = re.sub(r"<[^>]+>", "", models)
    for name in VARIANTS:
        assert f"{name}(weights=None, **kwargs)" in text and f"Builds {name} (" in text, name


def test_every_page_is_built(site):
    for page in blocks.pages():
        name = page[len("docs/"):] if page.startswith("docs/") else page.lower()
        built = site / re.sub(r"(index)?\.md$", "", name) / "index.html" if not name.endswith("index.md") else site / "index.html"
        assert built.exists(), f"{page} has no page in the site ({built})"


def test_math_is_rendered_as_mathml(site):
    # docs/hooks/mkdocs_hooks.py turns $...$ into MathML at build time; no page keeps raw LaTeX.
    html = (site / "models" / "vit" / "index.html").read_text()
    assert "<math" in html
    for page in site.rglob("*.html"):
        text = re.sub(r"<(pre|code)\b.*?</\1>", "", page.read_text(), flags=re.S)
        assert not re.search(r"\$\$|\\frac|\\mathbf", text), f"raw LaTeX left in {page}"



def test_inline_formulas_stay_inside_their_sentence(site):
    # ConViT's "with the gate $\sigma(\lambda_h)$, $\sigma$ the logistic sigmoid", wrapped so that
    # a formula begins a line of the Markdown source: every inline formula sits in a paragraph
    # or another inline context, none stands alone between paragraphs.
    for page in ("convit", "deit", "vit", "swin", "hybrid"):
        html = (site / "models" / page / "index.html").read_text()
        assert 'display="inline"' in html
        loose = re.findall(r"</p>\s*<span class=\"math-inline\">|</p>\s*<math[^>]*display=\"inline\"", html)
        assert not loose, (page, loose[:1])
    convit = (site / "models" / "convit" / "index.html").read_text()
    assert re.search(r"<p>[^<]*with the gate\s*<span class=\"math-inline\"><math", convit)


def test_operator_names_render_as_words(site):
    # Swin's W-MSA and SW-MSA, and every other \operatorname, as text: not "W − MSA" in italics.
    html = (site / "models" / "swin" / "index.html").read_text()
    assert "<mtext>W-MSA</mtext>" in html and "<mtext>SW-MSA</mtext>" in html
    assert "<mi>W</mi><mo>&#x02212;</mo><mi>M</mi>" not in html


PYTHON_PAGES = [page for page in blocks.pages() if blocks.blocks(page, "python")]


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if page in PAGE_FILES:  # what stands for the reader's own files (a folder of photos, a checkpoint)
        PAGE_FILES[page](str(tmp_path))
    namespace = {"__name__": "__docs__"}
    for number, code in enumerate(blocks.blocks(page, "python")):
        exec(compile(code, f"{page} (python block {number + 1})", "exec"), namespace)
    keras.backend.clear_session()


def shell_commands():
    found = []
    for page in blocks.pages():
        for code in blocks.blocks(page, "bash"):
            found += [(page, command) for command in blocks.commands(code)]
    return found


COMMANDS = shell_commands()


def test_every_shell_command_is_one_the_tests_check():
    unknown = []
    for page, command in COMMANDS:
        try:
            blocks.classify(command)
        except ValueError as error:
            unknown.append(f"{page}: {error}")
    assert not unknown, "\n".join(unknown)


def test_pip_commands_name_existing_extras():
    known = blocks.extras()
    for page, command in COMMANDS:
        kind, _, argv = blocks.classify(command)
        if kind == "pip":
            unknown = set(blocks.pip_extras(argv)) - known
            assert not unknown, f"{page}: {command!r} names extras {sorted(unknown)} not in setup.cfg"


def test_script_commands_pass_flags_the_script_defines():
    for page, command in COMMANDS:
        kind, _, argv = blocks.classify(command)
        if kind != "script":
            continue
        script = blocks.ROOT / argv[1]
        assert script.exists(), f"{page}: {command!r}: no {argv[1]}"
        # Flags every experiment shares (--workdir, --seeds, --write) are defined in experiments/common.py.
        shared = blocks.ROOT / argv[1].split("/")[0] / "common.py"
        source = script.read_text() + (shared.read_text() if shared.exists() else "")
        for word in argv[2:]:
            flag = re.match(r"(--\w+)", word)
            if flag:
                assert f'"{flag.group(1)}"' in source or f"{flag.group(1)}=" in source or (
                    f"{flag.group(1)})" in source), f"{page}: {command!r}: {argv[1]} defines no {flag.group(1)}"


def trainer_commands():
    found = set()
    for _, command in COMMANDS:
        try:
            if blocks.classify(command)[0] == "trainer":
                found.add(command)
        except ValueError:
            pass  # test_every_shell_command_is_one_the_tests_check names it
    return sorted(found)


TRAINER_COMMANDS = trainer_commands()


def dry_run_invocation(command, workdir):
    """`(environment, argv)` of `command`'s dry run: `--dry_run` and an empty local workdir added."""
    env, argv = blocks.split_env(command)
    # Another workdir (gs://, a shared disk) is the user's; the checks run on an empty local one.
    argv = [word for word in argv if not word.startswith("--workdir")]
    if "--multihost" in argv and env.get("KERAS_BACKEND") == "jax":
        # A pod slice finds its coordinator itself; elsewhere the job's addresses are in the environment.
        env.setdefault("KERAS_DISTRIBUTION_JOB_ADDRESSES", "10.0.0.1:1234,10.0.0.2:1234")
        env.setdefault("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
        env.setdefault("KERAS_DISTRIBUTION_PROCESS_ID", "0")
    env = {"KERAS_BACKEND": "tensorflow", **env}
    return env, [*argv[2:], "--dry_run", f"--workdir={workdir}"]


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """Every docs trainer command's dry run: `{command: (result, workdir)}`.

    The commands of one backend run in one process (tests/train/run_many.py), each with its
    own cluster variables, parsed and checked as `python train/main.py ...` would be.
    """
    root = tmp_path_factory.mktemp("dry_runs")
    groups = {}
    for index, command in enumerate(TRAINER_COMMANDS):
        workdir = root / f"workdir_{index}"
        env, argv = dry_run_invocation(command, workdir)
        # One process per backend (read at import); the cluster's variables (TF_CONFIG,
        # KERAS_DISTRIBUTION_*) are read when the trainer runs, so each call sets its own.
        backend = env.pop("KERAS_BACKEND")
        groups.setdefault(backend, []).append((command, {"argv": argv, "env": env}, workdir))
    results = {}
    for backend, runs in groups.items():
        outputs = run_many([entry for _, entry, _ in runs], {"KERAS_BACKEND": backend})
        for (command, _, workdir), output in zip(runs, outputs):
            results[command] = (output, workdir)
    return results


@pytest.mark.parametrize("command", TRAINER_COMMANDS)
def test_trainer_commands_pass_the_trainers_checks(command, dry_runs):
    """Each `python train/main.py ...` of the docs, with `--dry_run`: every flag checked, nothing run."""
    result, workdir = dry_runs[command]
    assert result["status"] == 0, f"{command}\n{result['stderr'][-3000:]}"
    assert "Dry run:" in result["stdout"]
    assert not workdir.exists()


def test_a_dry_run_of_a_bad_command_fails_in_the_shared_process(tmp_path):
    # The shared process reports each command's own status: a bad flag among good ones is caught.
    runs = [["--dry_run", f"--workdir={tmp_path / 'a'}"], ["--dry_run", "--learning_rate=-1", f"--workdir={tmp_path / 'b'}"],
            ["--dry_run", "--no_such_flag", f"--workdir={tmp_path / 'c'}"]]
    first, second, third = run_many(runs, {"KERAS_BACKEND": "tensorflow"}, timeout=300)
    assert first["status"] == 0 and "Dry run:" in first["stdout"]
    assert second["status"] == 2 and "--learning_rate must be a number in (0, inf)" in second["stderr"]
    assert third["status"] == 2 and "Unknown command line flag 'no_such_flag'" in third["stderr"]
    assert not any((tmp_path / name).exists() for name in "abc")

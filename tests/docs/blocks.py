"""The code blocks of the documentation site, as the tests run them.

Pages are the Markdown files under `docs/` and the root files the site shows
(`docs/hooks/mkdocs_hooks.py`, `ROOT_PAGES`). A ```python block runs as written,
in order with the other blocks of its page. A ```bash block is a list of
commands, each checked by what it is (`classify`):

- `python train/main.py ...`: run with `--dry_run`, which checks every flag and
  the workdir as a real run does, on the backend the command names;
- `python experiments/*.py`, `python benchmarks/*.py` or another `python train/*.py`
  (`classify.py`, `export.py`): the script exists and defines every `--flag` the command passes;
- `pip install ...`: every extra it names is in setup.cfg;
- the set-up and tool commands in `TOOLS` (apt-get, git, mkdocs, pytest, ...),
  which CI runs itself, are accepted as they are.

Anything else is an error, so a page cannot show a command no test looks at.
"""

import configparser
import pathlib
import re
import shlex
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
ROOT_PAGES = ("EXPERIMENTS.md", "BENCHMARKS.md", "CHANGELOG.md")
TOOLS = ("apt-get", "git", "cd", "mkdocs", "pytest", "twine", "gcloud", "export", "nvidia-smi", "tensorboard")
# A fenced block, at the margin or indented inside a list item (its lines then carry the indent).
_BLOCK = re.compile(r"^([ \t]*)```(\w+)[^\n]*\n(.*?)^\1```\s*$", re.M | re.S)
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def pages():
    """Every page of the site, as paths relative to the repository root."""
    found = sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
    return found + [name for name in ROOT_PAGES if (ROOT / name).exists()]


def blocks(page, language):
    """The code of each ```language block of `page`, in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return [textwrap.dedent(code) for _, lang, code in _BLOCK.findall(text) if lang == language]


def _split_outside_quotes(line):
    """`line` split at `&&` and `;` that stand outside quotes (`--command="cd x && y"` stays whole)."""
    parts, current, quote, index = [], "", None, 0
    while index < len(line):
        char = line[index]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif line.startswith("&&", index) or char == ";":
            parts.append(current.strip())
            current = ""
            index += 2 if char == "&" else 1
            continue
        current += char
        index += 1
    return [part for part in (*parts, current.strip()) if part]


def commands(block):
    """The commands of a bash block: continuation lines joined, comments dropped, split at && and ;."""
    text = re.sub(r"\\\n\s*", " ", block)
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            found += _split_outside_quotes(line)
    return found


def split_env(command):
    """`(environment, argv)` of a command: leading `NAME=value` words are its environment."""
    words = shlex.split(command)
    env = {}
    while words and _ENV.match(words[0]):
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return env, words


def extras():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return set(parser["options.extras_require"])


def classify(command):
    """`(kind, env, argv)`, kind one of "trainer", "script", "pip", "tool"; `ValueError` for anything else."""
    env, argv = split_env(command)
    if argv[:2] == ["python", "-m"] and len(argv) > 2 and argv[2] in ("pip", "build", "pytest", "venv"):
        argv = argv[2:] if argv[2] == "pip" else argv
        kind = "pip" if argv[0] == "pip" else "tool"
        return kind, env, argv
    if argv and argv[0] == "pip":
        return "pip", env, argv
    if argv[:2] == ["python", "train/main.py"]:
        return "trainer", env, argv
    scripts = r"(experiments|benchmarks|train)/\w+\.(py|sh)$"
    if len(argv) > 1 and argv[0] in ("python", "bash") and re.match(scripts, argv[1]):
        return "script", env, argv
    if argv and (argv[0] in TOOLS or argv[0] == "."):
        return "tool", env, argv
    raise ValueError(f"a command the docs tests do not know how to check: {command!r}")


DISTRIBUTION = "keras-vision-transformers"


def pip_extras(argv):
    """The extras of keras_vit a `pip install` names (`-e ".[cpu,train]"`, `keras-vision-transformers[gpu]`).

    Other packages' extras (`"jax[tpu]"`) are theirs, not checked here.
    """
    names = []
    for word in argv:
        match = re.match(r"^(\.|[\w./-]+\.whl|" + re.escape(DISTRIBUTION) + r")\[([\w,-]+)\]$", word)
        if match:
            names += match.group(2).split(",")
    return names

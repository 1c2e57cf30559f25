"""What the experiment scripts share: data slices, training runs, their results, and the report.

(Over 400 lines on purpose: it is the one shared module of the experiment scripts, so that
none of them repeats the data slices, runs and report code.)

Every script trains through `train/main.py` in a subprocess (one run per process,
`runs.students.run_student`, as `benchmarks/distillation.py` does), on
Fashion-MNIST slices written as IDX files into its workdir, prints a Markdown
table, draws its figure(s), and with `--write` replaces its own section of
EXPERIMENTS.md (command, machine, date, settings, table, figure paths).
"""

import argparse
import contextlib
import json
import os
import shlex
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # as train/main.py
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from runs.reporting import replace_section, write_atomic  # noqa: E402
from runs.students import (  # noqa: E402
    STUDENT_PRESET, check_source_and_workdir, machine, run_student, scaled_schedule, write_idx,
)
from train.configs import get_config  # noqa: E402
from train.data import FASHION_MNIST_DIR, read_idx  # noqa: E402

EXPERIMENTS_MD = os.path.join(ROOT, "EXPERIMENTS.md")
FIGURES = os.path.join(ROOT, "experiments", "figures")
HEADER = (
    "# Experiments\n\n"
    "The papers' claims checked in miniature on Fashion-MNIST, each by a script in `experiments/` that "
    "wrote its section here with `--write`: the command, the machine, the date, the settings, the table "
    "and the figure. The numbers are what was measured, whichever way they came out."
)
IMAGE_SIZE = 28
# The plain ViT preset (`train/main.py --config=fashion_mnist_vit`; every run here
# trains with it): its model, recipe and length (10 epochs of 60,000 images).
PRESET = get_config(STUDENT_PRESET)
PRESET_MODEL = dict(PRESET.model_kwargs)
FULL_TRAIN_SIZE = 60000
FULL_TEST_SIZE = 10000
# `--tiny` (the smoke tests): a model and a run that take seconds.
TINY_MODEL = dict(hidden_size=16, num_layers=2, num_heads=4, mlp_dim=32)
TINY_BATCH = 32
TINY_ANALYSIS_IMAGES = 16


def log(script, message):
    print(f"[{script}] {message}", file=sys.stderr, flush=True)


# ---- arguments ----------------------------------------------------------------------------


def import_reference(script):
    """`(timm, torch)` from `runs/reference.py`, or exits naming `script` when they are missing."""
    try:
        from runs.reference import timm, torch
    except Exception as error:  # noqa: BLE001 - ImportError, or torchvision failing inside timm's import
        sys.exit(f"{script} needs timm and PyTorch (CPU), the test-only reference "
                 f"(`pip install timm torch`): importing them failed: {type(error).__name__}: {error}")
    return timm, torch


def positive(name):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value <= 0:
            raise argparse.ArgumentTypeError(f"--{name} must be a positive integer. Received: {name}={text}")
        return value

    return parse


def int_list(name):
    def parse(text):
        try:
            values = [int(s) for s in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"--{name} must be comma-separated integers. Received: {name}={text!r}") from None
        return values

    return parse


def choice_list(name, accepted):
    def parse(text):
        values = [s.strip() for s in text.split(",") if s.strip()]
        if not values or any(v not in accepted for v in values):
            raise argparse.ArgumentTypeError(
                f"--{name} must be a comma-separated list of {', '.join(accepted)}. Received: {name}={text!r}")
        return values

    return parse


def json_object(name):
    def parse(text):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"--{name} must be a JSON object. Received: {name}={text!r}")
        return value

    return parse


def parse_fractions(parser, text):
    """`--fractions`: comma-separated numbers in (0, 1]; `parser.error` names the flag otherwise."""
    try:
        fractions = [float(f) for f in text.split(",")]
    except ValueError:
        parser.error(f"--fractions must be comma-separated numbers in (0, 1]. Received: fractions={text!r}")
    if not all(0 < f <= 1 for f in fractions):
        parser.error(f"--fractions must be in (0, 1]. Received: fractions={fractions}")
    return fractions


def read_run(script, path, settings):
    """The run record saved at `path`, or None when absent; exits when it was trained with other settings.

    `--resume` reads runs back only when `settings` (what a run's result depends on) match.
    """
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        record = json.load(f)
    if record.get("settings") != settings:
        sys.exit(f"{script} --resume: {path} was trained with other settings ({record.get('settings')}); "
                 f"this invocation's are {settings}. Use another --workdir.")
    return record


def make_parser(doc, name, seeds="0,1"):
    """An `ArgumentParser` with the options every experiment takes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int_list("seeds"), default=int_list("seeds")(seeds),
                        help=f"comma-separated; one run per seed and cell (default {seeds})")
    parser.add_argument("--source_dir", default=FASHION_MNIST_DIR,
                        help="Fashion-MNIST IDX files (train-images-idx3-ubyte.gz, t10k-..., labels)")
    parser.add_argument("--workdir", default=None, help="an empty or new folder for the slices and runs (kept); "
                        "default: a temporary folder, deleted at the end")
    parser.add_argument("--model_kwargs", type=json_object("model_kwargs"), default=None,
                        help="JSON builder arguments merged into every model's (e.g. a smaller width)")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run: a tiny model, batch 32, a few steps, no XLA (the tests)")
    parser.add_argument("--figure", default=os.path.join(FIGURES, f"{name}.png"),
                        help="where the PNG goes (default experiments/figures/<script>.png)")
    parser.add_argument("--write", action="store_true", help="replace or append this script's section of "
                        "--experiments_md")
    parser.add_argument("--experiments_md", default=EXPERIMENTS_MD, help="the Markdown file --write updates")
    return parser


def check_arguments(parser, args):
    """Errors (exit 2) for a source without Fashion-MNIST files or a used workdir."""
    check_source_and_workdir(parser, args)


def add_vit_convit_arguments(parser):
    """`--num_gpsa_layers` and `--initialization` of the scripts that compare ViT with ConViT."""
    parser.add_argument("--num_gpsa_layers", type=int, default=None,
                        help="ConViT's GPSA blocks (default: all but the last block)")
    parser.add_argument("--initialization", choices=("vit", "deit"), default="deit",
                        help="both models' initialization (default deit)")


def vit_convit_kwargs(args):
    """Builder arguments `(vit, convit)` of a same-width ViT and ConViT (`add_vit_convit_arguments`)."""
    base = dict(PRESET_MODEL, **(TINY_MODEL if args.tiny else {}), **(args.model_kwargs or {}))
    gpsa = args.num_gpsa_layers if args.num_gpsa_layers is not None else base["num_layers"] - 1
    shared = dict(initialization=args.initialization, preprocessing="imagenet")
    return dict(base, **shared), dict(base, **shared, num_gpsa_layers=gpsa)


@contextlib.contextmanager
def workdir(path, name):
    """`path`, created; or a temporary folder, deleted on exit."""
    if path is not None:
        os.makedirs(path, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"keras_vit-{name}-") as temporary:
        yield temporary


# ---- data -----------------------------------------------------------------------------------


def balanced_indices(labels, size):
    """The first `size` examples taken class by class in proportion: sorted indices.

    Each class gives its earliest examples, about `size * n_c / n` of them
    (the classes' shares are kept to within one example), so a small slice has
    the class balance of the whole split.
    """
    labels = np.asarray(labels)
    size = min(int(size), len(labels))
    rank = np.zeros(len(labels))
    for label in np.unique(labels):
        where = np.flatnonzero(labels == label)
        rank[where] = (np.arange(len(where)) + 0.5) / len(where)
    return np.sort(np.argsort(rank, kind="stable")[:size])


def write_slice(source_dir, directory, train_size, test_size, repeat_to=None):
    """A class-balanced `train_size` of the training split and the first `test_size` test examples, as IDX files.

    With `repeat_to`, the training slice is repeated (cyclically) to that
    many examples: one trainer epoch then makes several passes over a small
    slice, so that a run on 2% of the data is evaluated (at every epoch's
    end) as often as one on all of it, not fifty times as often.

    Returns:
        `(unique training examples, test examples)` written (fewer when the
        source has fewer).
    """
    os.makedirs(directory, exist_ok=True)
    sizes = []
    for prefix, size, balanced in (("train", train_size, True), ("t10k", test_size, False)):
        images = read_idx(os.path.join(source_dir, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(source_dir, f"{prefix}-labels-idx1-ubyte.gz"))
        keep = balanced_indices(labels, size) if balanced else np.arange(min(size, len(labels)))
        sizes.append(len(keep))
        if balanced and repeat_to is not None and repeat_to > len(keep):
            keep = np.resize(keep, repeat_to)
        write_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), images[keep])
        write_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), labels[keep])
    return tuple(sizes)


# ---- runs -----------------------------------------------------------------------------------


def read_back_note(count):
    """The notes' sentence on runs read back with `--resume` ("" when none were)."""
    if not count:
        return ""
    return (f" {count} of the runs were trained by an earlier invocation with the same settings and read back "
            "from the workdir (`--resume`); \"Whole script\" counts this invocation only.")


def recipe_flags(steps, batch_size, tiny):
    """The trainer flags of a run of `steps`: the preset's schedule scaled to it (`scaled_schedule`)."""
    warmup, ema_decay = scaled_schedule(steps)
    flags = [f"--steps={steps}", f"--batch_size={batch_size}", f"--warmup_steps={warmup}",
             f"--ema_decay={ema_decay}"]
    if tiny:
        flags.append("--jit_compile=false")  # tracing, not XLA, is what a few tiny steps can afford
    return flags


def model_flags(model, kwargs):
    return [f"--model={model}", f"--model_kwargs={json.dumps(kwargs)}"]


def train(workdir, data_dir, seed, flags):
    """Runs `train/main.py` to completion; returns its `summary.json`, with `analysis.json` when written.

    Adds `wall_seconds` (the whole process) and, when the run logged
    analyses (`--log_analysis`), `analysis` (the history's entries).
    """
    summary = run_student(workdir, data_dir, seed, list(flags))
    path = os.path.join(workdir, "analysis.json")
    if os.path.isfile(path):
        with open(path) as f:
            summary["analysis"] = json.load(f)
    return summary


def build(model, kwargs, image_size=IMAGE_SIZE, num_classes=10, channels=1):
    """The model `train/main.py --model=model --model_kwargs=kwargs` trains, untrained; and its builder arguments."""
    from train.modeling import builder_for

    arguments = dict(kwargs, image_size=image_size, num_classes=num_classes, num_channels=channels)
    return builder_for(model)(**arguments), arguments


def test_images(data_dir, count):
    """The first `count` test images of the slice, as the trainer feeds them (float32 in [0, 255])."""
    from train.data import fashion_mnist

    test = fashion_mnist("test", data_dir)
    images = np.stack([image for image, _ in test.dataset.take(count).as_numpy_iterator()])
    return images.astype("float32")


# ---- statistics and tables --------------------------------------------------------------------


def comparison(a, b):
    """`a` against `b` (`{seed: accuracy}` each), in points: difference of the means, spread, paired differences.

    The spread is the pooled standard deviation over seeds of the two arms
    (None with fewer than two seeds in either); `exceeds` says whether the
    difference is larger than it (None without a spread).
    """
    a_values, b_values = np.array(list(a.values()), "float64"), np.array(list(b.values()), "float64")
    difference = 100 * (a_values.mean() - b_values.mean())
    paired = [100 * (a[seed] - b[seed]) for seed in sorted(a) if seed in b]
    if min(len(a_values), len(b_values)) < 2:
        return {"difference": difference, "spread": None, "paired": paired, "exceeds": None}
    spread = 100 * float(np.sqrt((a_values.var(ddof=1) + b_values.var(ddof=1)) / 2))
    return {"difference": difference, "spread": spread, "paired": paired, "exceeds": difference > spread}


def mean_and_spread(values):
    """`"mean ± sd"` (sample standard deviation over seeds; the mean alone for one seed)."""
    values = np.asarray(values, "float64")
    if len(values) < 2:
        return f"{values.mean():.4f}"
    return f"{values.mean():.4f} ± {values.std(ddof=1):.4f}"


def per_seed(values, digits=4):
    return ", ".join(f"{v:.{digits}f}" for v in values)


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def table_rows(text):
    """The body rows of the Markdown tables in `text`, as lists of cells (the tests read them)."""
    rows, previous = [], ""
    for line in text.splitlines():
        if line.startswith("| ") and not previous.startswith("|"):
            previous = line  # a header
            continue
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        previous = line
    return rows


# ---- figures ----------------------------------------------------------------------------------


def pyplot():
    """matplotlib's pyplot, drawing off-screen (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def integer_ticks(ax):
    """Whole numbers only on the x axis (blocks, epochs)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def save_figure(figure, path):
    """Writes `figure` as a PNG (folders created) and closes it; returns `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    pyplot().close(figure)
    return path


def sibling_figure(path, suffix):
    """`a/b.png` -> `a/b_<suffix>.png`: a second figure beside the first."""
    stem, extension = os.path.splitext(path)
    return f"{stem}_{suffix}{extension or '.png'}"


# ---- the report -------------------------------------------------------------------------------


def versions():
    import keras

    backend = keras.backend.backend()
    text = f"Keras {keras.__version__}, backend `{backend}`"
    if backend == "tensorflow":
        import tensorflow as tf

        text += f" (TensorFlow {tf.__version__})"
    return text


def command_line(script, argv):
    return shlex.join(["python", f"experiments/{script}.py", *(sys.argv[1:] if argv is None else argv)])


def section(title, script, argv, notes, table, figures, markdown_path, minutes):
    """The section's Markdown: heading, command, machine and date, notes, table, figures."""
    base = os.path.dirname(os.path.abspath(markdown_path))
    links = [f"![{os.path.basename(p)}]({os.path.relpath(os.path.abspath(p), base)})" for p in figures]
    return "\n\n".join([
        f"## {title}",
        f"Command: `{command_line(script, argv)}`",
        f"Machine: {machine()}. Date: {time.strftime('%Y-%m-%d')}. {versions()}. Whole script: {minutes:.1f} min.",
        notes,
        table,
        "Figure" + ("s" if len(links) > 1 else "") + ": " + ", ".join(
            f"`{os.path.relpath(os.path.abspath(p), base)}`" for p in figures),
        "\n".join(links),
    ])


def write_section(path, title, body):
    """Replaces (or appends) the `## title` section of the Markdown file `path`, created with `HEADER` if absent."""
    text = HEADER + "\n"
    if os.path.isfile(path):
        with open(path) as f:
            text = f.read()
    write_atomic(path, replace_section(text, f"## {title}", body).rstrip("\n"))


def report(args, script, title, argv, notes, table, figures, started):
    """Prints the section; with `--write` puts it into `--experiments_md`. Returns its text."""
    minutes = (time.perf_counter() - started) / 60
    body = section(title, script, argv, notes, table, figures, args.experiments_md, minutes)
    print(body)
    if args.write:
        write_section(args.experiments_md, title, body)
        log(script, f"wrote the section to {args.experiments_md}")
    return body

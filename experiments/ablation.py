"""A paper's ablation table in miniature: the rows, their runs, the verdicts and the report.

`convit_ablations.py`, `swin_ablations.py` and `vit_position_embeddings.py`
describe their table as an `Ablation` (rows of builder arguments over one base
model, each beside the paper's number, and the orderings the paper reports);
`train` runs every row and seed through `train/main.py` (or reads them back
with `--resume`), `report` writes the tables, the verdicts and the figure.
`axial_vit.py` runs its two models with `train_rows` and reuses the verdicts.

An ordering "reproduces" when the difference of the two rows' means over seeds
has the paper's sign and exceeds the seed-to-seed spread, the pooled standard
deviation of the two rows (`common.comparison`).
"""

import argparse
import dataclasses
import json
import os
import time

import numpy as np

from experiments import common

# What a run's record keeps of the trainer's `summary.json`.
RECORD_KEYS = ("accuracy", "images_per_second", "timed_steps", "train_seconds", "wall_seconds")


@dataclasses.dataclass(frozen=True)
class Ablation:
    """One paper's ablation table in miniature: what `train` and `report` need besides the arguments.

    Attributes:
        name: the script's name (its section, figure and log prefix).
        title: the section's title.
        builder: the `train/main.py --model` of every row.
        rows: `{arm: (label, builder arguments over the base, the paper's number)}`.
        claims: `(ordering, arms above, arms below)` of the paper, checked on the means.
        metric: what the paper's number is (the table's column heading).
        image_size: the trainer's `--image_size` (None: the data's 28 px).
    """

    name: str
    title: str
    builder: str
    rows: dict
    claims: tuple
    metric: str
    image_size: int = None


# ---- arguments ----------------------------------------------------------------------------


def add_ablation_arguments(parser, rows, fraction, epochs):
    """`--arms`, `--fraction`, `--epochs`, `--steps`, `--test_size` and `--resume` of an ablation script."""
    parser.add_argument("--arms", type=common.choice_list("arms", tuple(rows)), default=list(rows),
                        help=f"comma-separated rows: {', '.join(rows)} (default all)")
    parser.add_argument("--fraction", type=float, default=fraction,
                        help="the class-balanced fraction of the training split, in (0, 1] (default %(default)s)")
    parser.add_argument("--epochs", type=common.positive("epochs"), default=epochs,
                        help="run length in full-data epochs (default %(default)s)")
    parser.add_argument("--steps", type=common.positive("steps"), default=None,
                        help="run length in steps (replaces --epochs)")
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--resume", action="store_true",
                        help="read back the runs already in --workdir (trained with the same settings) and train "
                        "only the missing ones, e.g. another seed or row")


def check_ablation_arguments(parser, args):
    """Errors (exit 2) for a bad `--fraction`, `--resume` without `--workdir`, or a used workdir."""
    args.arms = list(dict.fromkeys(args.arms))  # a row named twice runs once
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction must be in (0, 1]. Received: fraction={args.fraction}")
    if args.resume and args.workdir is None:
        parser.error("--resume needs --workdir (the folder of the earlier runs). Received: workdir=None")
    # A used workdir is refused unless its runs are meant to be read back.
    common.check_arguments(parser, argparse.Namespace(**{**vars(args), "workdir": None}) if args.resume else args)
    if args.workdir is not None:
        args.workdir = os.path.abspath(args.workdir)  # the trainer runs in the repository
    return args


# ---- the runs ---------------------------------------------------------------------------------


def write_data(args, work, batch_size):
    """Writes the class-balanced `--fraction` of the training split (repeated to its length) and the test images.

    Returns:
        `(data_dir, steps, images, full, test_size)`: the slice's folder, the
        run length (`--steps`, or `--epochs` full-data epochs), the unique
        training images, the full split's size and the test images written.
    """
    full = common.read_idx(os.path.join(args.source_dir, "train-labels-idx1-ubyte.gz")).shape[0]
    steps = args.steps or (4 if args.tiny else args.epochs * (full // batch_size))
    size = max(int(round(args.fraction * full)), batch_size)
    data_dir = os.path.join(work, "data")
    images, test_size = common.write_slice(args.source_dir, data_dir, size, args.test_size, repeat_to=full)
    return data_dir, steps, images, full, test_size


def run_row(args, name, label, work, data_dir, arm, seed, flags, settings):
    """The record of `arm` at `seed`: trained by `train/main.py`, or read back with `--resume`.

    The record keeps `RECORD_KEYS` of the run's summary and the 1-minute load
    average at its start and end (timings on a shared machine need it).
    """
    path = os.path.join(work, "runs", f"{arm}_seed_{seed}.json")
    record = common.read_run(f"{name}.py", path, settings) if args.resume else None
    if record is not None:
        common.log(name, f"{arm}, seed {seed}: read back from {path}")
        return dict(record, read_back=True)
    common.log(name, f"{label}, seed {seed}")
    load = os.getloadavg()[0]
    summary = common.train(os.path.join(work, f"{arm}_seed_{seed}"), data_dir, seed, flags)
    record = dict(arm=arm, seed=seed, flags=flags, settings=settings, load=[load, os.getloadavg()[0]],
                  **{key: summary[key] for key in RECORD_KEYS})
    common.log(name, f"  test accuracy {record['accuracy']:.4f}, {record['images_per_second']:.0f} images/s, "
               f"{record['wall_seconds']:.0f} s")
    common.write_atomic(path, json.dumps(record, indent=2))
    return record


def train_rows(args, name, models, base, image_size=None):
    """Trains (or reads back, `--resume`) every arm of `args.arms` at every seed.

    Args:
        args: the parsed arguments (`add_ablation_arguments` and `common.make_parser`'s).
        name: the script's name.
        models: `{arm: (label, builder, builder arguments)}`.
        base: the base model's builder arguments, kept in every run's settings:
            a run is read back only into an invocation with the same base.
        image_size: the trainer's `--image_size` (None: the data's 28 px).

    Returns:
        `(records, setup)`: one record per run (`run_row`), and the setup the
        notes describe (`steps`, `batch_size`, `images`, `full`, `test_size`,
        `read_back`).
    """
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    records = []
    with common.workdir(args.workdir, name) as work:
        os.makedirs(os.path.join(work, "runs"), exist_ok=True)
        data_dir, steps, images, full, test_size = write_data(args, work, batch_size)
        settings = dict(source_dir=args.source_dir, fraction=args.fraction, test_size=args.test_size,
                        steps=steps, batch_size=batch_size, base=base)
        shared = common.recipe_flags(steps, batch_size, args.tiny)
        if image_size is not None:
            shared.append(f"--image_size={image_size}")
        for seed in args.seeds:
            for arm in args.arms:
                label, builder, kwargs = models[arm]
                flags = [*common.model_flags(builder, kwargs), *shared]
                records.append(run_row(args, name, label, work, data_dir, arm, seed, flags, settings))
    setup = dict(steps=steps, batch_size=batch_size, images=images, full=full, test_size=test_size,
                 read_back=sum(bool(r.get("read_back")) for r in records))
    return records, setup


def train(args, ablation, base):
    """Every row of `ablation` over `base` at every seed: `(records, setup)`, setup with the base's size."""
    models = {arm: (label, ablation.builder, dict(base, **arguments))
              for arm, (label, arguments, _) in ablation.rows.items()}
    records, setup = train_rows(args, ablation.name, models, base, ablation.image_size)
    model = common.build(ablation.builder, base, image_size=ablation.image_size or common.IMAGE_SIZE)[0]
    return records, dict(setup, base=base, parameters=model.count_params())


# ---- the comparisons --------------------------------------------------------------------------


def values(records, arm, key="accuracy"):
    """`{seed: record[key]}` of `arm`."""
    return {r["seed"]: r[key] for r in records if r["arm"] == arm}


def mean(records, arm):
    """`arm`'s mean test accuracy over seeds."""
    return float(np.mean(list(values(records, arm).values())))


def verdict(c):
    """Whether an ordering reproduces, from `common.comparison(above, below)`: the sign against the spread."""
    if c["spread"] is None:
        return ("same direction" if c["difference"] > 0 else "no") + " (one seed: no spread)"
    if c["difference"] > c["spread"]:
        return "yes"
    if c["difference"] > 0:
        return "same direction, within the spread"
    return "no, within the spread" if -c["difference"] <= c["spread"] else "no"


def check_claim(records, arms, above, below):
    """`(measured text, comparison)` of one ordering on the rows run, or None when a side was not run.

    The weakest row of `above` (lowest mean over seeds) is compared with the
    strongest of `below`: "(a) is the most accurate" holds when (a) is above
    the best of the others.
    """
    above, below = [a for a in above if a in arms], [b for b in below if b in arms]
    if not above or not below:
        return None
    low = min(above, key=lambda arm: mean(records, arm))
    high = max(below, key=lambda arm: mean(records, arm))
    c = common.comparison(values(records, low), values(records, high))
    spread = "n/a (one seed)" if c["spread"] is None else f"{c['spread']:.2f}"
    return f"{low} - {high}: {c['difference']:+.2f} points, spread {spread}", c


def concordance(paper, measured):
    """`(agreeing pairs, pairs the paper orders, Kendall's tau over those pairs)` of two rankings.

    Pairs tied in the paper are left out; a pair tied in the measurement counts
    as disagreeing.
    """
    agree = ordered = 0
    for i in range(len(paper)):
        for j in range(i + 1, len(paper)):
            sign = np.sign(paper[i] - paper[j])
            if sign == 0:
                continue
            ordered += 1
            agree += int(np.sign(measured[i] - measured[j]) == sign)
    tau = (2 * agree - ordered) / ordered if ordered else float("nan")
    return agree, ordered, tau


def summary(found, agree, ordered, tau, seeds):
    """The sentence under the tables, from the orderings' verdicts and the pairwise concordance."""
    reproduced = [text for text, v in found if v == "yes"]
    same = [text for text, v in found if v.startswith("same direction")]
    against = [text for text, v in found if v.startswith("no")]
    if len(seeds) < 2:
        text = (f"One seed, so no spread: {len(same)} of {len(found)} orderings of the paper come out in its "
                f"direction and {len(against)} do not.")
    else:
        text = f"{len(reproduced)} of {len(found)} orderings of the paper reproduce beyond the seeds' spread"
        text += "".join(f"; {n} {kind}" for n, kind in ((len(same), "in its direction within the spread"),
                                                         (len(against), "not in its direction")) if n)
        text += "."
        if reproduced:
            text += " Reproduced: " + "; ".join(reproduced).rstrip(".") + "."
        if against:
            text += " Not reproduced: " + "; ".join(against).rstrip(".") + "."
    if ordered:
        text += (f" Over the rows run, the measured ranking agrees with the paper's on {agree} of the {ordered} "
                 f"pairs the paper orders (Kendall's tau {tau:+.2f}).")
    return text


# ---- the report -------------------------------------------------------------------------------


def percent(numbers):
    """`"mean ± sd"` in percent (the papers' unit; the mean alone for one seed)."""
    numbers = 100 * np.asarray(numbers, "float64")
    return f"{numbers.mean():.2f}" + (f" ± {numbers.std(ddof=1):.2f}" if len(numbers) > 1 else "")


def arguments_text(arguments):
    return ", ".join(f"`{k}={v!r}`" for k, v in arguments.items()) or "defaults"


def ranks(numbers):
    """1 for the largest; ties share the better rank."""
    return [1 + sum(other > number for other in numbers) for number in numbers]


def tables(ablation, records, arms, seeds):
    """The rows beside the paper's numbers, the orderings with their verdicts, and the summary sentence."""
    paper = [ablation.rows[arm][2] for arm in arms]
    measured = [mean(records, arm) for arm in arms]
    body = []
    for arm, paper_rank, rank in zip(arms, ranks(paper), ranks(measured)):
        label, arguments, number = ablation.rows[arm]
        accuracy = list(values(records, arm).values())
        body.append([label, arguments_text(arguments), f"{number:g}", paper_rank, percent(accuracy), rank,
                     common.per_seed(100 * np.array(accuracy), 2)])
    text = common.markdown_table(
        ["row", "arguments", ablation.metric, "paper: rank", "ours: test accuracy (%), mean ± sd over seeds",
         "ours: rank", f"ours per seed ({', '.join(map(str, seeds))})"], body)
    found, claim_rows = [], []
    for ordering, above, below in ablation.claims:
        checked = check_claim(records, arms, above, below)
        if checked is not None:
            found.append((ordering, verdict(checked[1])))
            claim_rows.append([ordering, checked[0], found[-1][1]])
    if claim_rows:
        text += "\n\n" + common.markdown_table(["the paper's ordering", "measured (points)", "reproduces"],
                                               claim_rows)
    return text + "\n\n" + summary(found, *concordance(paper, measured), seeds)


def figure(ablation, records, arms, path):
    """Left: each row's accuracy (bar: mean, dots: seeds); right: ours against the paper's number."""
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.5 * len(arms) + 2.5))
    y = np.arange(len(arms))[::-1]
    means = [100 * mean(records, arm) for arm in arms]
    left.barh(y, means, color="tab:blue", alpha=0.6)
    seeds = [100 * np.array(list(values(records, arm).values())) for arm in arms]
    for position, accuracy in zip(y, seeds):
        left.scatter(accuracy, [position] * len(accuracy), color="black", s=12, zorder=3)
    left.set_yticks(y)
    left.set_yticklabels([ablation.rows[arm][0] for arm in arms], fontsize=8)
    # Bars start near the lowest value: the rows differ by points, not tens of points.
    low, high = min(map(np.min, seeds)), max(map(np.max, seeds))
    margin = max(1.0, high - low)
    left.set_xlim(low - margin, high + 0.5 * margin)
    left.set_xlabel("Test accuracy (%), EMA weights (dots: seeds)")
    left.set_title("Ours, in miniature")
    paper = [ablation.rows[arm][2] for arm in arms]
    right.scatter(paper, means, color="tab:blue")
    for arm, x, value in zip(arms, paper, means):
        right.annotate(arm, (x, value), textcoords="offset points", xytext=(4, 4), fontsize=8)
    right.set_xlabel(ablation.metric.replace("paper: ", "The paper's "))
    right.set_ylabel("Ours: test accuracy (%), mean over seeds")
    right.set_title("Ours against the paper's (same order: a rising cloud)")
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, ablation, setup):
    """The section's notes: data, model, recipe, seeds and how to read the verdicts."""
    model = ", ".join(f"{k} {v}" for k, v in setup["base"].items())
    warmup, ema = common.scaled_schedule(setup["steps"])
    preset = common.PRESET
    passes = setup["steps"] * setup["batch_size"] / setup["images"]
    size = f", resized to {ablation.image_size} px" if ablation.image_size else ""
    text = (
        f"Data: a class-balanced {100 * args.fraction:g}% of the Fashion-MNIST training split ({setup['images']} "
        f"images, written repeated to {setup['full']} examples){size}; the first {setup['test_size']} test images. "
        f"Model: {ablation.builder}, {model} ({setup['parameters']:,} parameters); each row changes only the "
        f"arguments in its line. Recipe (every row): the `fashion_mnist_vit` preset's ({preset.optimizer} "
        f"{preset.learning_rate}, wd {preset.weight_decay}, clipping {preset.clip_norm}, label smoothing "
        f"{preset.label_smoothing}, augmentation `{preset.augmentation}`, drop path 0), batch {setup['batch_size']}, "
        f"{setup['steps']} steps (passes over the slice: {passes:.3g}), warmup {warmup}, EMA decay {ema}. Seeds "
        f"{', '.join(map(str, args.seeds))}, the same for every row (same batches). Accuracy: `summary.json` (EMA "
        "weights). The paper's numbers are its Table's, for models two orders of magnitude larger trained for "
        "hundreds of epochs: the orderings are what is compared, not the levels. An ordering reproduces when the "
        "difference of the two rows' means has the paper's sign and exceeds the seed-to-seed spread (the pooled "
        "standard deviation of the two rows).")
    return text + common.read_back_note(setup["read_back"])


def report(args, ablation, records, setup, argv, started, extra_table="", extra_notes=""):
    """Writes the figure and prints (with `--write`, writes) the section: tables, verdicts and notes."""
    path = figure(ablation, records, args.arms, args.figure)
    text = tables(ablation, records, args.arms, args.seeds) + extra_table
    common.report(args, ablation.name, ablation.title, argv, notes(args, ablation, setup) + extra_notes, text,
                  [path], started)
    return 0


def run(args, ablation, base, argv):
    """Trains (or reads back) every row and seed, and reports: the whole of an ablation script's `main`."""
    started = time.perf_counter()
    records, setup = train(args, ablation, base)
    return report(args, ablation, records, setup, argv, started)

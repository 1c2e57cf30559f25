"""ConViT Table 3 in miniature: which of GPSA's ingredients carry its accuracy?

    python experiments/convit_ablations.py --workdir=/tmp/exp/convit_ablations --write

The claim (d'Ascoli et al. 2021, Sec. 4.3, Table 3; ConViT-S+ trained 300 epochs
on the first 100 ImageNet classes): every ingredient of the gated positional
self-attention (GPSA) adds accuracy. Top-1 of the rows, as `docs/ablations.md`
lists them with the builder arguments that select each:

- (a) ConViT, 82.2; (b) gating frozen at lambda = 0 (`train_gating=False`), 82.0;
- (c) no convolutional initialisation (`locality_strength=0`), 81.4; (d) both, 81.6;
- (e) no GPSA, a DeiT (`num_gpsa_layers=0`), 79.1;
- (f) GPSA frozen at a random initialisation (`train_gpsa_attention=False,
  locality_strength=0`), 73.7; (g) GPSA frozen at the convolutional one
  (`train_gpsa_attention=False`), 78.6.

The orderings checked: (a) is the most accurate row; (e) the least accurate of
the trained rows (a)-(e); the convolutional initialisation helps ((a) above
(c)); frozen GPSA does better at the convolutional initialisation than at a
random one ((g) above (f)); and (f) is the least accurate row. Besides, the
measured ranking of all the rows run is compared with the paper's, pair by pair.

Setup. The model is the ConViT of `convit_sample_efficiency.py` (the
`fashion_mnist_vit` preset's sizes: 7x7 patches of the 28x28 images, width 96,
6 blocks, 4 heads, MLP 192; the first `--num_gpsa_layers`, default 5, blocks
GPSA; DeiT initialisation), each row changing only its builder arguments. The
paper ran this ablation on a tenth of ImageNet (100 of the 1,000 classes) for
cost, and in a regime where locality pays (its Table 2: ConViT's lead grows as
the data shrinks). Here the data is a class-balanced `--fraction` of the
Fashion-MNIST training split, default 5% (3,000 images): all 10 classes are
kept (Fashion-MNIST has only 10), and 5% is the largest fraction at which the
Table 2 rerun in EXPERIMENTS.md measured ConViT's lead over a same-width ViT
beyond the seeds' spread, so that the ingredients of GPSA have something to
show. The slice is written repeated to the full split's 60,000 examples and
trained for `--epochs` full-data epochs (default 2: 936 steps at batch 128, 40
passes over the slice; an estimated 2.5-4 minutes a run on a shared 2-core CPU), with the preset's
recipe (AdamW 1e-3, wd 0.05, clipping 1, label smoothing 0.1, flips; warmup
and EMA scaled to the run). Accuracy is each run's `summary.json` (EMA
weights) on the first `--test_size` test images.

Reading the result: each ordering compares two rows' means over seeds (for
"most accurate", the row against the best of the others); it reproduces when
the difference has the paper's sign and exceeds the seed-to-seed spread (the
pooled standard deviation of the two rows). The summary sentence under the
tables is computed from the measured numbers. The machinery here (running the
rows, the tables, the verdicts, the figure) is shared with `swin_ablations.py`.
"""

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402
from experiments.masked_patch_prediction import comparison  # noqa: E402

NAME = "convit_ablations"
TITLE = "ConViT Table 3: ablations of GPSA"
# arm -> (the paper's label, builder arguments over the base ConViT, the paper's top-1 (%)).
ROWS = {
    "a": ("(a) ConViT", {}, 82.2),
    "b": ("(b) gating frozen at 0", {"train_gating": False}, 82.0),
    "c": ("(c) no convolutional init.", {"locality_strength": 0.0}, 81.4),
    "d": ("(d) both (b) and (c)", {"train_gating": False, "locality_strength": 0.0}, 81.6),
    "e": ("(e) no GPSA (DeiT)", {"num_gpsa_layers": 0}, 79.1),
    "f": ("(f) GPSA frozen at random init.", {"train_gpsa_attention": False, "locality_strength": 0.0}, 73.7),
    "g": ("(g) GPSA frozen at conv. init.", {"train_gpsa_attention": False}, 78.6),
}
# (the paper's ordering, rows that should be above, rows that should be below).
CLAIMS = (
    ("(a), the full ConViT, is the most accurate row", ("a",), ("b", "c", "d", "e", "f", "g")),
    ("(e), no GPSA, is the least accurate of the trained rows (a)-(e)", ("a", "b", "c", "d"), ("e",)),
    ("the convolutional initialisation helps: (a) above (c)", ("a",), ("c",)),
    ("frozen GPSA: at the convolutional init. (g) above a random one (f)", ("g",), ("f",)),
    ("(f), GPSA frozen at random, is the least accurate row", ("a", "b", "c", "d", "e", "g"), ("f",)),
)


@dataclasses.dataclass(frozen=True)
class Ablation:
    """One paper's ablation table in miniature: what `run` needs besides the arguments.

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


CONVIT = Ablation(NAME, TITLE, "ConViT", ROWS, CLAIMS, "paper: top-1 (%), ImageNet-100")


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


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    add_ablation_arguments(parser, ROWS, fraction=0.05, epochs=2)
    common.add_vit_convit_arguments(parser)
    return check_ablation_arguments(parser, parser.parse_args(argv))


def base_kwargs(args):
    """The builder arguments of row (a): the ConViT of `convit_sample_efficiency.py`."""
    return common.vit_convit_kwargs(args)[1]


# ---- the runs ---------------------------------------------------------------------------------


def run_row(args, ablation, work, data_dir, arm, seed, flags, settings):
    """The record of `arm` at `seed`: trained by `train/main.py`, or read back with `--resume`."""
    path = os.path.join(work, "runs", f"{arm}_seed_{seed}.json")
    record = common.read_run(f"{ablation.name}.py", path, settings) if args.resume else None
    if record is not None:
        common.log(ablation.name, f"{arm}, seed {seed}: read back from {path}")
        return dict(record, read_back=True)
    common.log(ablation.name, f"{ablation.rows[arm][0]}, seed {seed}")
    summary = common.train(os.path.join(work, f"{arm}_seed_{seed}"), data_dir, seed, flags)
    record = dict(arm=arm, seed=seed, accuracy=summary["accuracy"], wall_seconds=summary["wall_seconds"],
                  flags=flags, settings=settings)
    common.log(ablation.name, f"  test accuracy {record['accuracy']:.4f}, {record['wall_seconds']:.0f} s")
    common.write_atomic(path, json.dumps(record, indent=2))
    return record


def run(args, ablation, base, argv):
    """Trains (or reads back) every row and seed, and reports: the whole of an ablation script's `main`."""
    started = time.perf_counter()
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    parameters = common.build(ablation.builder, base, image_size=ablation.image_size or common.IMAGE_SIZE)[0]
    parameters = parameters.count_params()
    records = []
    with common.workdir(args.workdir, ablation.name) as work:
        os.makedirs(os.path.join(work, "runs"), exist_ok=True)
        full = common.read_idx(os.path.join(args.source_dir, "train-labels-idx1-ubyte.gz")).shape[0]
        steps = args.steps or (4 if args.tiny else args.epochs * (full // batch_size))
        size = max(int(round(args.fraction * full)), batch_size)
        data_dir = os.path.join(work, "data")
        images, test_size = common.write_slice(args.source_dir, data_dir, size, args.test_size, repeat_to=full)
        settings = dict(source_dir=args.source_dir, fraction=args.fraction, test_size=args.test_size,
                        steps=steps, batch_size=batch_size, base=base)
        shared = [*common.recipe_flags(steps, batch_size, args.tiny)]
        if ablation.image_size is not None:
            shared.append(f"--image_size={ablation.image_size}")
        for seed in args.seeds:
            for arm in args.arms:
                kwargs = dict(base, **ablation.rows[arm][1])
                flags = [*common.model_flags(ablation.builder, kwargs), *shared]
                records.append(run_row(args, ablation, work, data_dir, arm, seed, flags, settings))
    setup = dict(base=base, parameters=parameters, steps=steps, batch_size=batch_size, images=images, full=full,
                 test_size=test_size, read_back=sum(bool(r.get("read_back")) for r in records))
    path = figure(ablation, records, args.arms, args.figure)
    common.report(args, ablation.name, ablation.title, argv, notes(args, ablation, setup),
                  tables(ablation, records, args.arms, args.seeds), [path], started)
    return 0


# ---- the comparisons --------------------------------------------------------------------------


def accuracies(records, arm):
    """`{seed: test accuracy}` of `arm`."""
    return {r["seed"]: r["accuracy"] for r in records if r["arm"] == arm}


def mean(records, arm):
    return float(np.mean(list(accuracies(records, arm).values())))


def verdict(c):
    """Whether an ordering reproduces, from `comparison(above, below)`: the sign against the spread."""
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
    c = comparison(accuracies(records, low), accuracies(records, high))
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
            text += " Reproduced: " + "; ".join(reproduced) + "."
        if against:
            text += " Not reproduced: " + "; ".join(against) + "."
    if ordered:
        text += (f" Over the rows run, the measured ranking agrees with the paper's on {agree} of the {ordered} "
                 f"pairs the paper orders (Kendall's tau {tau:+.2f}).")
    return text


# ---- the report -------------------------------------------------------------------------------


def percent(values):
    """`"mean ± sd"` in percent (the papers' unit; the mean alone for one seed)."""
    values = 100 * np.asarray(values, "float64")
    return f"{values.mean():.2f}" + (f" ± {values.std(ddof=1):.2f}" if len(values) > 1 else "")


def arguments_text(arguments):
    return ", ".join(f"`{k}={v!r}`" for k, v in arguments.items()) or "defaults"


def ranks(values):
    """1 for the largest; ties share the better rank."""
    return [1 + sum(other > value for other in values) for value in values]


def tables(ablation, records, arms, seeds):
    """The rows beside the paper's numbers, the orderings with their verdicts, and the summary sentence."""
    paper = [ablation.rows[arm][2] for arm in arms]
    measured = [mean(records, arm) for arm in arms]
    body = []
    for arm, paper_rank, rank in zip(arms, ranks(paper), ranks(measured)):
        label, arguments, number = ablation.rows[arm]
        values = list(accuracies(records, arm).values())
        body.append([label, arguments_text(arguments), f"{number:g}", paper_rank, percent(values), rank,
                     common.per_seed(100 * np.array(values), 2)])
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
    seeds = [100 * np.array(list(accuracies(records, arm).values())) for arm in arms]
    for position, values in zip(y, seeds):
        left.scatter(values, [position] * len(values), color="black", s=12, zorder=3)
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
    if setup["read_back"]:
        text += (f" {setup['read_back']} of the runs were trained by an earlier invocation with the same settings "
                 "and read back from the workdir (`--resume`); \"Whole script\" counts this invocation only.")
    return text


def main(argv=None):
    args = parse_args(argv)
    return run(args, CONVIT, base_kwargs(args), argv)


if __name__ == "__main__":
    sys.exit(main())

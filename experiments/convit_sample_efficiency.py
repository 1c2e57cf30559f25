"""ConViT Table 2 in miniature: does ConViT's lead over a same-width ViT grow as the data shrinks?

    python experiments/convit_sample_efficiency.py --write

The claim (d'Ascoli et al. 2021, Sec. 4.2, Table 2): trained on a fraction f of
the data with the same recipe, ConViT beats DeiT (a ViT) at every f, and its lead
grows as f shrinks, because the GPSA layers start as convolutions (Eq. 5) and
need not learn locality from the data.

Setup: a class-balanced fraction f of the Fashion-MNIST training split
(`--fractions`, default 2%, 5%, 10%, 100%; written as IDX files into
`--workdir`) and the whole test split. Two models of the same width, trained by
`train/main.py` with identical flags and seeds:

- ViT: the `fashion_mnist_vit` preset's (7x7 patches, width 96, 6 blocks, 4 heads, MLP 192);
- ConViT: the same sizes, its first `--num_gpsa_layers` (default 5 of 6, as
  ConViT-S's 10 of 12) blocks GPSA, the class token inserted after them.

Both use `--initialization` (default `deit`, the recipe ConViT and DeiT share)
and the ImageNet mean/std input scaling. The recipe is the preset's (AdamW 1e-3,
wd 0.05, clipping 1, label smoothing 0.1, flips, batch 128); as in the paper,
every fraction sees the same number of images: `--epochs` full-data epochs
(default 10: 4,680 steps), so a 2% slice runs 500 epochs. The warmup (10%) and
the EMA horizon (21% of the run) are the preset's, scaled to the run length.
A slice is written repeated to the full split's 60,000 examples, so that each
trainer epoch makes 1/f passes over it and every run is evaluated after each
of its 10 trainer epochs, not after each of 500 passes.
Accuracy is each run's `summary.json` (EMA weights) on the whole test split.

Reading the result: the "ConViT - ViT" column is the mean of the per-seed
(paired: same seed, same batches) differences, with its standard deviation over
seeds; the claim holds when it is positive and largest at the smallest
fraction. With two seeds, a difference smaller than about twice its spread is
seed noise. The figure plots both accuracies and the difference against f.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "convit_sample_efficiency"
TITLE = "ConViT Table 2: sample efficiency against a same-width ViT"
MODELS = ("ViT", "ConViT")


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    parser.add_argument("--fractions", default="0.02,0.05,0.1,1",
                        help="comma-separated fractions of the training split (default %(default)s)")
    parser.add_argument("--epochs", type=common.positive("epochs"), default=10,
                        help="run length in full-data epochs, the same for every fraction (default 10)")
    parser.add_argument("--steps", type=common.positive("steps"), default=None,
                        help="run length in steps (replaces --epochs)")
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    common.add_vit_convit_arguments(parser)
    args = parser.parse_args(argv)
    args.fractions = common.parse_fractions(parser, args.fractions)
    common.check_arguments(parser, args)
    return args


def model_kwargs(args):
    """`{name: (builder, builder arguments)}` of the two models."""
    vit, convit = common.vit_convit_kwargs(args)
    return {"ViT": ("VisionTransformer", vit), "ConViT": ("ConViT", convit)}


def table(rows, seeds):
    header = ["training fraction", "training images", "passes over them", "ViT test accuracy", "ConViT test accuracy",
              "ConViT - ViT, points", "relative gain", f"ViT per seed ({', '.join(map(str, seeds))})",
              "ConViT per seed"]
    body = []
    for row in rows:
        vit, convit = np.array(row["ViT"]), np.array(row["ConViT"])
        gap = 100 * (convit - vit)
        gap_text = f"{gap.mean():+.2f}" + (f" ± {gap.std(ddof=1):.2f}" if len(gap) > 1 else "")
        body.append([f"{100 * row['fraction']:g}%", row["images"], f"{row['epochs']:.3g}",
                     common.mean_and_spread(vit), common.mean_and_spread(convit), gap_text,
                     f"{100 * (convit.mean() / vit.mean() - 1):+.1f}%", common.per_seed(vit),
                     common.per_seed(convit)])
    return common.markdown_table(header, body)


def figure(rows, path):
    plt = common.pyplot()
    fractions = np.array([row["fraction"] for row in rows])
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in MODELS:
        values = [np.array(row[name]) for row in rows]
        spread = [v.std(ddof=1) if len(v) > 1 else 0.0 for v in values]
        left.errorbar(100 * fractions, [v.mean() for v in values], yerr=spread, marker="o", capsize=3, label=name)
    left.set_xscale("log")
    left.set_xlabel("Training data used (%)")
    left.set_ylabel("Test accuracy (EMA weights)")
    left.set_title("Accuracy against data")
    left.legend()
    gaps = [100 * (np.array(row["ConViT"]) - np.array(row["ViT"])) for row in rows]
    for fraction, gap in zip(fractions, gaps):
        right.scatter([100 * fraction] * len(gap), gap, color="gray", s=12)
    right.plot(100 * fractions, [g.mean() for g in gaps], marker="o", color="black", label="mean over seeds")
    right.axhline(0, color="gray", linewidth=0.8)
    right.set_xscale("log")
    right.set_xlabel("Training data used (%)")
    right.set_ylabel("ConViT - ViT (points)")
    right.set_title("ConViT's lead (dots: seeds)")
    right.legend()
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, kwargs, steps, batch_size, parameters, test_size):
    described = "; ".join(f"{name} ({builder}, {parameters[name]:,} parameters): "
                          + ", ".join(f"{k} {v}" for k, v in arguments.items())
                          for name, (builder, arguments) in kwargs.items())
    warmup, ema = common.scaled_schedule(steps)
    return (f"Data: class-balanced fractions of the Fashion-MNIST training split, the first {test_size} test images. "
            f"Models: {described}. Recipe: the `fashion_mnist_vit` preset's ({common.PRESET.optimizer} "
            f"{common.PRESET.learning_rate}, wd {common.PRESET.weight_decay}, clipping {common.PRESET.clip_norm}, "
            f"label smoothing {common.PRESET.label_smoothing}, augmentation `{common.PRESET.augmentation}`), batch "
            f"{batch_size}, {steps} steps at every fraction (the same images seen, as ConViT Sec. 4.2; each slice "
            f"written repeated to the full split's length, so one trainer epoch is 1/f passes), warmup "
            f"{warmup}, EMA decay {ema}; seeds {', '.join(map(str, args.seeds))}, the same for both models (paired). "
            "Accuracy: `summary.json` (EMA weights). ConViT - ViT: the mean of the per-seed differences, "
            "± their standard deviation.")


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    kwargs = model_kwargs(args)
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    parameters = {name: common.build(builder, arguments)[0].count_params()
                  for name, (builder, arguments) in kwargs.items()}
    rows = []
    with common.workdir(args.workdir, NAME) as work:
        full = common.read_idx(os.path.join(args.source_dir, "train-labels-idx1-ubyte.gz")).shape[0]
        steps = args.steps or (4 if args.tiny else args.epochs * (full // batch_size))
        for fraction in args.fractions:
            size = max(int(round(fraction * full)), batch_size)
            data_dir = os.path.join(work, f"data_{fraction:g}")
            train_size, test_size = common.write_slice(args.source_dir, data_dir, size, args.test_size, repeat_to=full)
            row = {"fraction": fraction, "images": train_size, "epochs": steps * batch_size / train_size}
            for name, (builder, arguments) in kwargs.items():
                row[name] = []
                for seed in args.seeds:
                    common.log(NAME, f"{name}, {100 * fraction:g}% ({train_size} images), seed {seed}: {steps} steps")
                    flags = [*common.model_flags(builder, arguments),
                             *common.recipe_flags(steps, batch_size, args.tiny)]
                    summary = common.train(os.path.join(work, f"{name.lower()}_{fraction:g}", f"seed_{seed}"),
                                           data_dir, seed, flags)
                    common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                    row[name].append(summary["accuracy"])
            rows.append(row)
    path = figure(rows, args.figure)
    common.report(args, NAME, TITLE, argv, notes(args, kwargs, steps, batch_size, parameters, test_size),
                  table(rows, args.seeds), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

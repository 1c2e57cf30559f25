"""ViT Fig. 5 / Sec. 4.4 in miniature: accuracy against training compute, ViT and hybrid, at a few sizes.

    python experiments/hybrid_compute.py --write

The claim (Dosovitskiy et al. 2021, Sec. 4.4, Fig. 5): for a given compute
budget a hybrid (a ResNet stem feeding the transformer) beats a plain ViT at
small model sizes; the gap vanishes for larger models.

Setup: Fashion-MNIST resized to 32x32 (`--image_size`) so that both families
see a 4x4 grid of 16 tokens: the ViT cuts 8x8-pixel patches; the hybrid runs
the BiT ResNet root (7x7 convolution of stride 2 and a stride-2 max-pool, 64
channels; plus the stages of `--hybrid_stages`, default none) and cuts the 8x8
feature map into 2x2 patches. The transformer sizes come from `SIZES`
(`--sizes`, default XS, S, M; M is the `fashion_mnist_vit` preset's: width 96, 6 blocks,
4 heads, MLP 192). Every run has the preset's recipe and length (`--epochs`,
default 10, on a class-balanced `--train_size`, default all 60,000), the same
flags and seeds.

Compute: training FLOPs = 6 x forward multiply-accumulates per image x images
seen (2 FLOPs per MAC, the backward pass twice the forward), with the forward
MACs counted analytically by `keras_vit.analysis.flops` (every matrix product and
convolution; not the norms, softmaxes and activations). The table also gives the
measured training seconds on this machine, which rank differently: a CPU runs a
7x7 convolution less efficiently than the same FLOPs of matrix products.

Reading the result: the figure plots test accuracy (EMA weights, whole test
split) against training FLOPs, one line per family; the claim holds when the
hybrid's line lies above the ViT's at the smallest budgets. Differences smaller
than about twice the seeds' spread are noise.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "hybrid_compute"
TITLE = "ViT Fig. 5 in miniature: accuracy against training compute, ViT and hybrid"
# Transformer sizes; M is the `fashion_mnist_vit` preset's.
SIZES = {
    "XS": dict(hidden_size=48, num_layers=3, num_heads=4, mlp_dim=96),
    "S": dict(hidden_size=64, num_layers=4, num_heads=4, mlp_dim=128),
    "M": dict(hidden_size=96, num_layers=6, num_heads=4, mlp_dim=192),
    "L": dict(hidden_size=128, num_layers=8, num_heads=4, mlp_dim=256),
}
TINY_SIZES = {"XS": dict(hidden_size=8, num_layers=1, num_heads=2, mlp_dim=16), "S": common.TINY_MODEL}
FAMILIES = ("ViT", "hybrid")


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    parser.add_argument("--sizes", type=common.choice_list("sizes", tuple(SIZES)), default=["XS", "S", "M"],
                        help=f"comma-separated transformer sizes of {', '.join(SIZES)} (default XS,S,M)")
    parser.add_argument("--families", type=common.choice_list("families", FAMILIES), default=list(FAMILIES),
                        help="comma-separated: ViT, hybrid (default both)")
    parser.add_argument("--hybrid_stages", default="[]",
                        help="JSON list: units of each BiT stage after the root (default [], the root alone)")
    parser.add_argument("--image_size", type=common.positive("image_size"), default=32)
    parser.add_argument("--train_size", type=common.positive("train_size"), default=common.FULL_TRAIN_SIZE)
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--epochs", type=common.positive("epochs"), default=10)
    parser.add_argument("--initialization", choices=("vit", "deit"), default="vit",
                        help="every model's initialization (default vit)")
    args = parser.parse_args(argv)
    try:
        args.hybrid_stages = json.loads(args.hybrid_stages)
    except ValueError:
        args.hybrid_stages = None
    if not isinstance(args.hybrid_stages, list) or not all(isinstance(s, int) and s > 0 for s in args.hybrid_stages):
        parser.error(f"--hybrid_stages must be a JSON list of positive integers, e.g. [] or [1]. "
                     f"Received: hybrid_stages={args.hybrid_stages!r}")
    common.check_arguments(parser, args)
    return args


def models(args):
    """`[(family, size, builder arguments)]`: 16 tokens for both families."""
    from keras_vit.models.vit import resnet_stride

    sizes = TINY_SIZES if args.tiny else SIZES
    stride = resnet_stride(args.hybrid_stages)
    grid = args.image_size // 8
    runs = []
    for size in args.sizes:
        transformer = dict(sizes.get(size, common.TINY_MODEL), initialization=args.initialization,
                           **(args.model_kwargs or {}))
        for family in args.families:
            if family == "ViT":
                kwargs = dict(transformer, patch_size=args.image_size // grid)
            else:
                kwargs = dict(transformer, resnet_stages=args.hybrid_stages,
                              patch_size=max(args.image_size // stride // grid, 1))
            runs.append((family, size, kwargs))
    return runs


def forward_macs(kwargs, image_size):
    from keras_vit.analysis.flops import forward_macs as count

    model, _ = common.build("VisionTransformer", kwargs, image_size)
    return count(model), model.count_params()


def table(rows, seeds):
    header = ["model", "size", "parameters", "forward MMACs/image", "training TFLOPs", "training s (mean)",
              "test accuracy", f"per seed ({', '.join(map(str, seeds))})"]
    body = [[row["family"], row["size"], f"{row['parameters']:,}", f"{row['macs'] / 1e6:.2f}",
             f"{row['flops'] / 1e12:.3g}", f"{np.mean(row['seconds']):.0f}", common.mean_and_spread(row["accuracy"]),
             common.per_seed(row["accuracy"])] for row in rows]
    return common.markdown_table(header, body)


def figure(rows, path):
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, label in ((axes[0], "flops", "Training FLOPs (analytic)"),
                           (axes[1], "seconds", "Training seconds (measured)")):
        for family, marker in zip(FAMILIES, "os"):
            mine = [row for row in rows if row["family"] == family]
            if not mine:
                continue
            x = [row["flops"] if key == "flops" else np.mean(row["seconds"]) for row in mine]
            y = [np.mean(row["accuracy"]) for row in mine]
            spread = [np.std(row["accuracy"], ddof=1) if len(row["accuracy"]) > 1 else 0.0 for row in mine]
            ax.errorbar(x, y, yerr=spread, marker=marker, capsize=3, label=family)
            for xi, yi, row in zip(x, y, mine):
                ax.annotate(row["size"], (xi, yi), textcoords="offset points", xytext=(4, -10), fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("Test accuracy (EMA weights)")
        ax.legend()
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, rows, steps, batch_size, train_size, test_size):
    described = "; ".join(f"{row['family']} {row['size']}: " + ", ".join(f"{k} {v}" for k, v in row["kwargs"].items())
                          for row in rows)
    warmup, ema = common.scaled_schedule(steps)
    return (f"Data: a class-balanced {train_size} of the Fashion-MNIST training images and the first {test_size} test "
            f"images, resized to {args.image_size}x{args.image_size}. Models (VisionTransformer): {described}. "
            f"Recipe: the `fashion_mnist_vit` preset's, batch {batch_size}, {steps} steps, warmup {warmup}, EMA decay {ema}; "
            f"seeds {', '.join(map(str, args.seeds))}, the same for every model. Training FLOPs: 6 x the analytic "
            "forward MACs per image (`keras_vit.analysis.flops`) x the images seen; training seconds: `summary.json`'s "
            "`train_seconds` (fit, compilation in the first epoch included).")


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    rows = []
    with common.workdir(args.workdir, NAME) as work:
        data_dir = os.path.join(work, "data")
        train_size, test_size = common.write_slice(args.source_dir, data_dir, args.train_size, args.test_size)
        steps = (1 if args.tiny else args.epochs) * (train_size // batch_size)
        for family, size, kwargs in models(args):
            macs, parameters = forward_macs(kwargs, args.image_size)
            row = {"family": family, "size": size, "kwargs": kwargs, "macs": macs, "parameters": parameters,
                   "flops": 6 * macs * steps * batch_size, "accuracy": [], "seconds": []}
            for seed in args.seeds:
                common.log(NAME, f"{family} {size}, seed {seed}: {steps} steps")
                flags = [*common.model_flags("VisionTransformer", kwargs),
                         *common.recipe_flags(steps, batch_size, args.tiny), f"--image_size={args.image_size}"]
                summary = common.train(os.path.join(work, f"{family.lower()}_{size}", f"seed_{seed}"), data_dir, seed,
                                       flags)
                common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                row["accuracy"].append(summary["accuracy"])
                row["seconds"].append(summary["train_seconds"])
            rows.append(row)
    path = figure(rows, args.figure)
    common.report(args, NAME, TITLE, argv, notes(args, rows, steps, batch_size, train_size, test_size),
                  table(rows, args.seeds), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

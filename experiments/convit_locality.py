"""ConViT Fig. 5-6 in miniature: the GPSA gates and the nonlocality (Eq. 8) of each layer over training.

    python experiments/convit_locality.py --write

The claims (d'Ascoli et al. 2021, Sec. 4.3): GPSA layers start local (the
convolutional initialization, Eq. 5) and the gates `sigma(lambda_h)` start at
`sigma(1) = 0.73` (mostly positional attention); during training the later
GPSA layers turn their gates down towards content attention and grow less local,
while the first layer stays the most positional (Fig. 6); a ViT (DeiT) instead
starts nonlocal and its early layers grow more local (Fig. 5).

Setup: the same ConViT and ViT as `convit_sample_efficiency.py` (the `fashion_mnist_vit`
preset's sizes: 7x7 patches, width 96, 6 blocks, 4 heads, MLP 192; ConViT with
`--num_gpsa_layers`, default 5, GPSA blocks), trained by `train/main.py` on a
class-balanced `--train_size` (default all 60,000) of Fashion-MNIST for
`--epochs` (default 10) with the preset's recipe and `--log_analysis`: the
trainer's callback (train/analysis_logging.py) computes the gates (GPSA layers x
heads) and the nonlocality (layers x heads, in patches, over the first
`--analysis_images` test images) before training and after every epoch, into
each run's `analysis.json`. These are the weights being trained, not their EMA.

Reading the result: the table gives, per block, the gate (mean over heads, and
the range over heads after training) and the nonlocality before and after
training; the figure draws them epoch by epoch (the shaded band: the heads'
range), and a second figure the final gate of every head
(`keras_vit.models.convit.plot_gpsa_gating`). With several seeds the values
are averaged over them, and the per-block numbers show their spread.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "convit_locality"
TITLE = "ConViT Fig. 5-6: GPSA gates and nonlocality over training"


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME, seeds="0")
    parser.add_argument("--models", type=common.choice_list("models", ("convit", "vit")), default=["convit", "vit"],
                        help="comma-separated: convit, vit (the baseline of Fig. 5) (default both)")
    parser.add_argument("--train_size", type=common.positive("train_size"), default=common.FULL_TRAIN_SIZE)
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--epochs", type=common.positive("epochs"), default=10)
    parser.add_argument("--analysis_images", type=common.positive("analysis_images"), default=256,
                        help="test images the nonlocality is averaged over (default 256)")
    common.add_vit_convit_arguments(parser)
    args = parser.parse_args(argv)
    common.check_arguments(parser, args)
    return args


def runs_of(args):
    """`[(name, builder, builder arguments, analyses)]` of the models asked for."""
    vit, convit = common.vit_convit_kwargs(args)
    runs = {"convit": ("ConViT", "ConViT", convit, "gates,nonlocality"),
            "vit": ("ViT", "VisionTransformer", vit, "nonlocality")}
    return [runs[name] for name in args.models]


def histories(summaries, key):
    """`(epochs, seeds, layers, heads)` of `key` from each seed's analysis history, and the epochs."""
    epochs = [entry["epoch"] for entry in summaries[0]["analysis"]]
    values = np.array([[np.array(entry[key], "float64") for entry in s["analysis"]] for s in summaries])
    return np.array(epochs), values.transpose(1, 0, 2, 3)


def table(results):
    header = ["model", "block", "kind", "gate sigma(lambda), start", "gate, end (mean over heads)",
              "gate, end: heads' range", "nonlocality (patches), start", "nonlocality, end", "nonlocality change"]
    rows = []
    for name, result in results.items():
        _, nonlocality = result["nonlocality"]  # (epochs, seeds, layers, heads)
        gates = result.get("gates")
        for block in range(nonlocality.shape[2]):
            start, end = nonlocality[0, :, block].mean(), nonlocality[-1, :, block].mean()
            if gates is not None and block < gates[1].shape[2]:
                g = gates[1][:, :, block]  # (epochs, seeds, heads)
                final = g[-1].mean(axis=0)
                gate = [f"{g[0].mean():.3f}", f"{g[-1].mean():.3f}", f"{final.min():.3f} - {final.max():.3f}"]
                kind = "GPSA"
            else:
                gate = ["", "", ""]
                kind = "SA"
            rows.append([name, block + 1, kind, *gate, f"{start:.3f}", f"{end:.3f}", f"{end - start:+.3f}"])
    return common.markdown_table(header, rows)


def figure(results, path):
    plt = common.pyplot()
    panels = [("ConViT", "gates", r"gate $\sigma(\lambda)$"), ("ConViT", "nonlocality", "nonlocality (patches)"),
              ("ViT", "nonlocality", "nonlocality (patches)")]
    panels = [p for p in panels if p[0] in results]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (name, key, label) in zip(axes[0], panels):
        epochs, values = results[name][key]
        values = values.mean(axis=1)  # over seeds: (epochs, layers, heads)
        colors = plt.cm.viridis(np.linspace(0, 0.9, values.shape[1]))
        for layer in range(values.shape[1]):
            ax.plot(epochs, values[:, layer].mean(axis=1), color=colors[layer], label=f"block {layer + 1}")
            ax.fill_between(epochs, values[:, layer].min(axis=1), values[:, layer].max(axis=1), color=colors[layer],
                            alpha=0.15)
        ax.set_xlabel("epoch")
        common.integer_ticks(ax)
        ax.set_ylabel(label)
        ax.set_title(f"{name}: {key}")
        if key == "gates":
            ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return common.save_figure(fig, path)


def gates_figure(results, path):
    from keras_vit.models.convit import plot_gpsa_gating

    _, gates = results["ConViT"]["gates"]
    fig = plot_gpsa_gating(gates[-1].mean(axis=0))
    fig.axes[0].set_title("ConViT: gates after training")
    return common.save_figure(fig, path)


def notes(args, runs, steps, batch_size, train_size, test_size, analysis_images):
    described = "; ".join(f"{name} ({builder}): " + ", ".join(f"{k} {v}" for k, v in arguments.items())
                          for name, builder, arguments, _ in runs)
    warmup, ema = common.scaled_schedule(steps)
    return (f"Data: a class-balanced {train_size} of the Fashion-MNIST training images; the analyses on the first "
            f"{analysis_images} of the first {test_size} test images. Models: {described}. Recipe: the `fashion_mnist_vit` "
            f"preset's, batch {batch_size}, {steps} steps, warmup {warmup}, EMA decay {ema}; seeds "
            f"{', '.join(map(str, args.seeds))} (values averaged over them). Logged by `--log_analysis` before "
            "training and after every epoch (the trained weights, not the EMA). Gate: `sigma(lambda_h)`, 1 is "
            "purely positional attention; nonlocality: ConViT Eq. 8, the attention-weighted distance between "
            "query and key patches, in patches (class token left out).")


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    runs = runs_of(args)
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    analysis_images = min(args.analysis_images, common.TINY_ANALYSIS_IMAGES) if args.tiny else args.analysis_images
    results = {}
    with common.workdir(args.workdir, NAME) as work:
        data_dir = os.path.join(work, "data")
        train_size, test_size = common.write_slice(args.source_dir, data_dir, args.train_size, args.test_size)
        steps = (2 if args.tiny else args.epochs) * (train_size // batch_size)
        for name, builder, arguments, analyses in runs:
            summaries = []
            for seed in args.seeds:
                common.log(NAME, f"{name}, seed {seed}: {steps} steps, logging {analyses}")
                flags = [*common.model_flags(builder, arguments), *common.recipe_flags(steps, batch_size, args.tiny),
                         f"--log_analysis={analyses}", f"--analysis_images={analysis_images}"]
                summary = common.train(os.path.join(work, name.lower(), f"seed_{seed}"), data_dir, seed, flags)
                common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                summaries.append(summary)
            results[name] = {key: histories(summaries, key) for key in analyses.split(",")}
    figures = [figure(results, args.figure)]
    if "ConViT" in results:
        figures.append(gates_figure(results, common.sibling_figure(args.figure, "final_gates")))
    common.report(args, NAME, TITLE, argv, notes(args, runs, steps, batch_size, train_size, test_size,
                                                  min(analysis_images, test_size)),
                  table(results), figures, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

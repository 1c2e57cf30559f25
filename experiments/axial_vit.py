"""ViT App. D.5 / Fig. 12 in miniature: Axial-ViT against a ViT of the same width and depth.

    python experiments/axial_vit.py --workdir=/tmp/exp/axial_vit --write

The claim (Dosovitskiy et al. 2021, App. D.5, Fig. 12): replacing each global
self-attention block by a row-attention block and a column-attention block,
each with its own MLP, makes a better model, "but it comes at the cost of more
compute": Axial-ViT-B/32 and B/16 are above ViT-B/32 and B/16 in ImageNet
5-shot linear accuracy, and to the right of them in compute. The figure gives
no table of numbers; the compute of the paper's models at 224 px is counted
here by `keras_vit.analysis.vit_forward_macs` and `keras_vit.models.axial.axial_vit_forward_macs`:
Axial-ViT-B/16 costs about 1.9 times ViT-B/16's forward MACs, the extra MLP
of every block.

The two findings checked: (1) Axial-ViT is more accurate: its mean test
accuracy over seeds is above the ViT's by more than the seeds' spread (the
pooled standard deviation of the two; the verdict of `ablation.py`); (2) it
costs more compute: more forward MACs per image (`keras_vit.analysis.forward_macs`
of the built models), and fewer training images per second on this machine at
every seed (measured by the trainer over the epochs after the first, which
compiles; the CPU is shared with other work, so the 1-minute load average at
each run's start and end is reported).

Setup. The ViT of `vit_position_embeddings.py` (width 64, 4 blocks, 4 heads,
MLP 128 on 4x4 patches: a 7x7 grid, so that a row and a column have 7 tokens
to attend over rather than the preset's 4) and an Axial-ViT of the same width,
depth (4 row and 4 column blocks), heads and MLP; each with its paper's head:
the ViT's class token, the Axial-ViT's average of the patch tokens (it has no
class token). The trainer builds the Axial-ViT as `--model=AxialViT_B16` with
every size overridden by `--model_kwargs` (`--model=AxialViT` builds the same
model). All of the Fashion-MNIST training split (`--fraction`, default
1) for `--epochs` full-data epochs (default 2: 936 steps at batch 128) with
the `fashion_mnist_vit` preset's recipe (AdamW 1e-3, wd 0.05, clipping 1, label
smoothing 0.1, flips; warmup and EMA scaled to the run), the same seeds (the
same batches) for both. Accuracy is each run's `summary.json` (EMA weights)
on the first `--test_size` test images.

Reading the result: the two models beside the paper's, the two findings with
their verdicts, and a summary sentence computed from the measured numbers.
The figure plots test accuracy against forward MACs and against measured
training images/s.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import ablation, common, vit_position_embeddings  # noqa: E402

NAME = "axial_vit"
TITLE = "ViT App. D.5: Axial-ViT against ViT, accuracy and compute"
# arm -> (label, `train/main.py --model`, builder arguments over the shared sizes, the paper's model at 224 px).
MODELS = {
    "vit": ("ViT", "VisionTransformer", {}, "ViT-B/16"),
    "axial": ("Axial-ViT", "AxialViT_B16", {"pooling": "gap"}, "Axial-ViT-B/16"),
}
CLAIM_ACCURACY = "Axial-ViT is more accurate than the same-width ViT"
CLAIM_COMPUTE = "Axial-ViT costs more compute"


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    ablation.add_ablation_arguments(parser, MODELS, fraction=1.0, epochs=2)
    return ablation.check_ablation_arguments(parser, parser.parse_args(argv))


def model_kwargs(args):
    """`{arm: (`--model`, builder arguments)}` of the two models, at the same width and depth."""
    base = vit_position_embeddings.base_kwargs(args)
    return {arm: (builder, dict(base, **extra)) for arm, (_, builder, extra, _) in MODELS.items()}


def compute(kwargs):
    """`{arm: (forward MACs per image, parameters)}` of the built models (`keras_vit.analysis.forward_macs`)."""
    from keras_vit.analysis import forward_macs

    counted = {}
    for arm, (builder, arguments) in kwargs.items():
        model = common.build(builder, arguments)[0]
        counted[arm] = (forward_macs(model), model.count_params())
    return counted


def paper_compute():
    """`{arm: forward MACs per image}` of the paper's ViT-B/16 and Axial-ViT-B/16 at 224 px, from their sizes."""
    import keras_vit
    from keras_vit.analysis import vit_forward_macs
    from keras_vit.models.axial import axial_vit_forward_macs

    sizes = keras_vit.VARIANTS["AxialViT_B16"][1]  # ViT-B's sizes at 16 px patches, as ViT-B/16's
    return {"vit": vit_forward_macs(**sizes), "axial": axial_vit_forward_macs(**sizes)}


# ---- the runs ---------------------------------------------------------------------------------


def train_models(args, kwargs):
    """Trains (or reads back) both models at every seed: `(records, setup)` for the report."""
    models = {arm: (MODELS[arm][0], *kwargs[arm]) for arm in MODELS}
    return ablation.train_rows(args, NAME, models, vit_position_embeddings.base_kwargs(args))


# ---- the comparisons --------------------------------------------------------------------------


def spread_text(numbers):
    """`"mean ± sd"` of any quantity (the mean alone for one seed), at 0 decimals."""
    numbers = np.asarray(numbers, "float64")
    return f"{numbers.mean():.0f}" + (f" ± {numbers.std(ddof=1):.0f}" if len(numbers) > 1 else "")


def throughput_ratios(records):
    """Axial-ViT's training images/s over the ViT's, per seed run for both (paired: the same batches)."""
    vit, axial = (ablation.values(records, arm, "images_per_second") for arm in ("vit", "axial"))
    return [axial[seed] / vit[seed] for seed in sorted(vit) if seed in axial]


def compute_verdict(macs_ratio, ratios):
    """Finding (2): more forward MACs, and fewer training images/s at every seed."""
    if macs_ratio <= 1:
        return "no (fewer forward MACs)"
    if not all(r < 1 for r in ratios):
        return "more MACs, but not slower at every seed"
    return "yes" + (" (one seed)" if len(ratios) < 2 else "")


def outcome(verdict):
    """A verdict (`ablation.verdict`) as the rest of a sentence: "The finding ..."."""
    if verdict == "yes":
        return "reproduces"
    if verdict.startswith("same direction"):
        return "comes out in its direction" + verdict[len("same direction"):]
    return "does not reproduce" + verdict[len("no"):]


def summary(accuracy, macs_ratio, paper_ratio, ratios, accuracy_verdict, cost_verdict):
    """The sentence under the tables, from the measured numbers."""
    direction = "above" if accuracy["difference"] > 0 else "below"
    text = f"Axial-ViT is {abs(accuracy['difference']):.2f} points {direction} the same-width ViT"
    if accuracy["spread"] is None:
        text += " (one seed: no spread)"
    else:
        beyond = "beyond" if abs(accuracy["difference"]) > accuracy["spread"] else "within"
        text += f", {beyond} the seeds' spread ({accuracy['spread']:.2f})"
    text += (f", at {macs_ratio:.2f} times its forward MACs per image (the paper's B/16 at 224 px: "
             f"{paper_ratio:.2f}) and {np.mean(ratios):.2f} times its training images/s "
             f"(per seed: {', '.join(f'{r:.2f}' for r in ratios)}). ")
    compute_text = "reproduces" if cost_verdict.startswith("yes") else f"does not ({cost_verdict})"
    return text + (f"The paper's accuracy finding {outcome(accuracy_verdict)}; its compute finding "
                   f"{compute_text}.")


# ---- the report -------------------------------------------------------------------------------


def tables(records, kwargs, counted, paper, arms, seeds):
    """The two models beside the paper's, the two findings with their verdicts, and the summary sentence."""
    body = []
    for arm in arms:
        label, _, _, paper_model = MODELS[arm]
        accuracy = list(ablation.values(records, arm).values())
        macs, parameters = counted[arm]
        body.append([label, f"`{kwargs[arm][0]}`", f"{parameters:,}", f"{macs / 1e6:.2f}",
                     spread_text(list(ablation.values(records, arm, "images_per_second").values())),
                     ablation.percent(accuracy), common.per_seed(100 * np.array(accuracy), 2),
                     paper_model, f"{paper[arm] / 1e9:.2f}"])
    text = common.markdown_table(
        ["model", "`--model`", "parameters", "forward MMACs/image", "training images/s, mean ± sd",
         "test accuracy (%), mean ± sd", f"per seed ({', '.join(map(str, seeds))})", "paper's model",
         "paper: forward GMACs/image (224 px)"], body)
    if not {"vit", "axial"} <= set(arms):
        return text
    accuracy = common.comparison(ablation.values(records, "axial"), ablation.values(records, "vit"))
    accuracy_verdict = ablation.verdict(accuracy)
    macs_ratio, paper_ratio = counted["axial"][0] / counted["vit"][0], paper["axial"] / paper["vit"]
    ratios = throughput_ratios(records)
    verdict = compute_verdict(macs_ratio, ratios)
    spread = "n/a (one seed)" if accuracy["spread"] is None else f"{accuracy['spread']:.2f}"
    text += "\n\n" + common.markdown_table(
        ["the paper's finding", "measured", "reproduces"],
        [[CLAIM_ACCURACY, f"Axial-ViT - ViT: {accuracy['difference']:+.2f} points, spread {spread}",
          accuracy_verdict],
         [CLAIM_COMPUTE, f"forward MACs x{macs_ratio:.2f} (paper's B/16: x{paper_ratio:.2f}); training images/s "
                         f"x{np.mean(ratios):.2f}", verdict]])
    return text + "\n\n" + summary(accuracy, macs_ratio, paper_ratio, ratios, accuracy_verdict, verdict)


def figure(records, counted, arms, path):
    """Test accuracy against forward MACs (left) and against measured training images/s (right)."""
    plt = common.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for arm, colour in zip(arms, ("tab:blue", "tab:orange")):
        accuracy = 100 * np.array(list(ablation.values(records, arm).values()))
        speed = np.array(list(ablation.values(records, arm, "images_per_second").values()))
        error = accuracy.std(ddof=1) if len(accuracy) > 1 else 0.0
        for ax, x in ((axes[0], counted[arm][0] / 1e6), (axes[1], speed.mean())):
            ax.errorbar([x], [accuracy.mean()], yerr=[error], marker="o", capsize=3, color=colour,
                        label=MODELS[arm][0])
        axes[1].scatter(speed, accuracy, color=colour, s=12, alpha=0.6)
    axes[0].set_xlabel("Forward MMACs per image (analytic)")
    axes[1].set_xlabel("Training images/s (measured; dots: seeds)")
    for ax in axes:
        ax.set_ylabel("Test accuracy (%), EMA weights")
        ax.legend()
    axes[0].set_title("Accuracy against compute")
    axes[1].set_title("Accuracy against speed (faster: right)")
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, kwargs, counted, setup, records):
    described = "; ".join(f"{MODELS[arm][0]} (`--model={builder}`, {counted[arm][1]:,} parameters): "
                          + ", ".join(f"{k} {v}" for k, v in arguments.items())
                          for arm, (builder, arguments) in kwargs.items() if arm in args.arms)
    warmup, ema = common.scaled_schedule(setup["steps"])
    preset = common.PRESET
    loads = [value for r in records for value in r["load"]]
    text = (
        f"Data: a class-balanced {100 * args.fraction:g}% of the Fashion-MNIST training split ({setup['images']} "
        f"images, written repeated to {setup['full']} examples); the first {setup['test_size']} test images. "
        f"Models: {described}. Recipe (both): the `fashion_mnist_vit` preset's ({preset.optimizer} "
        f"{preset.learning_rate}, wd {preset.weight_decay}, clipping {preset.clip_norm}, label smoothing "
        f"{preset.label_smoothing}, augmentation `{preset.augmentation}`), batch {setup['batch_size']}, "
        f"{setup['steps']} steps, warmup {warmup}, EMA decay {ema}. Seeds {', '.join(map(str, args.seeds))}, the "
        "same for both models (same batches). Accuracy: `summary.json` (EMA weights). Forward MACs: "
        "`keras_vit.analysis.forward_macs` of the built models (every matrix product; not the norms, softmaxes "
        "and activations); the paper's, `vit_forward_macs` and `axial_vit_forward_macs` of ViT-B/16's sizes at 224 "
        "px. Training images/s: the trainer's (`summary.json`), timed over the epochs after the first (which "
        "compiles) when there are two or more. Load average (1 min) at the runs' starts and ends: "
        f"{min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} cores (a run's own training threads count "
        "about 2 of it). An accuracy finding reproduces when the difference of the means exceeds the seed-to-seed "
        "spread (the pooled standard deviation of the two models); Fig. 12 gives no numbers, only the ordering.")
    return text + common.read_back_note(setup["read_back"])


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    kwargs = model_kwargs(args)
    counted, paper = compute(kwargs), paper_compute()
    records, setup = train_models(args, kwargs)
    path = figure(records, counted, args.arms, args.figure)
    common.report(args, NAME, TITLE, argv, notes(args, kwargs, counted, setup, records),
                  tables(records, kwargs, counted, paper, args.arms, args.seeds), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

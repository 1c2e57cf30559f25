"""ViT App. B.1.2 in miniature: does masked patch prediction on unlabelled images help with few labels?

    python experiments/masked_patch_prediction.py --workdir=/tmp/exp/mpp --write

The claim (Dosovitskiy et al. 2021, Sec. 4.6 and App. B.1.2): a ViT pretrained
by masked patch prediction (BERT's masked language modelling with patches:
corrupt 50% of the patch embeddings, 80% of those replaced by a learned
[mask] embedding, 10% by another patch's, 10% kept, and predict each corrupted
patch) fine-tunes to a higher accuracy than the same ViT trained from scratch;
and predicting the 3-bit mean colour of a patch (512 classes for RGB) works at
least as well as predicting a 4x4 downsized patch or regressing its pixels
with L2 (App. B.1.2: "all worked quite well, though L2 was slightly worse").
BERT's 15% corruption rate was also tried; 50% is the paper's.

Setup. Pretraining (`train/main.py --objective=masked_patch_prediction`): all
Fashion-MNIST training images, their labels unused, for `--pretrain_epochs`;
the exported `model.keras` is the encoder. Fine-tuning (`--pretrained=<it>`)
and training from scratch: class-balanced fractions of the labelled training
images (`--fractions`, default 2% and 10%), each written repeated to the full
split's 60,000 examples, for `--finetune_epochs` full-data epochs, so that
every fraction and arm sees the same number of images (as
`convit_sample_efficiency.py`). Arms (`--arms`):

- `scratch`: the model trained on the slice alone;
- `mean_color_50`, `downsized_50`, `pixels_50`: pretrained with each target
  at 50% corruption;
- `mean_color_15`: the mean colour at BERT's 15%.

Each pretraining run (target, rate, seed) is shared by every fraction:
pretrained once, fine-tuned once per fraction, with the same seed.

The model is the `fashion_mnist_vit` preset's ViT (width 96, 6 blocks, 4
heads, MLP 192) and recipe (AdamW 1e-3, wd 0.05, clipping 1, label smoothing
0.1, flips, batch 128; warmup and EMA scaled to each run's length), for every
run, pretraining included, with one change: the images are resized to 32 px
and cut into 8x8 patches (the same 4x4 grid of 16 tokens as the preset's 7x7
patches of 28 px), because the downsized target averages a patch down to 4x4
cells, which a 7 px side cannot be divided into. Accuracy is each run's
`summary.json` (EMA weights) on the first `--test_size` test images.

Reading the result: "pretrained - scratch" is the difference of the means over
seeds, with the per-seed (paired: same seed) differences and the seed-to-seed
spread (the pooled standard deviation of the two arms); a difference larger
than the spread is taken as real. The paper's ordering reproduces when (a)
every pretrained arm beats scratch by more than the spread at a fraction, and
(b) the mean colour (50%) is at least as accurate as pixels with L2 (50%).
The figure plots test accuracy against the label fraction per arm, and each
pretrained arm's difference from scratch.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "masked_patch_prediction"
TITLE = "ViT App. B.1.2: masked patch prediction pretraining against training from scratch"
# arm -> (target, corruption rate) of its pretraining; None: trained from scratch.
ARMS = {
    "scratch": None,
    "mean_color_50": ("mean_color", 0.5),
    "downsized_50": ("downsized", 0.5),
    "pixels_50": ("pixels", 0.5),
    "mean_color_15": ("mean_color", 0.15),
}
IMAGE_SIZE = 32
# 8x8 patches of 32 px: the preset's 4x4 grid, and patches the downsized target's 4x4 cells divide.
PATCH_SIZE = 8
BUILDER = "VisionTransformer"


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    parser.add_argument("--arms", type=common.choice_list("arms", tuple(ARMS)), default=list(ARMS),
                        help=f"comma-separated: {', '.join(ARMS)} (default all)")
    parser.add_argument("--fractions", default="0.02,0.1",
                        help="comma-separated fractions of the labelled training split (default %(default)s)")
    parser.add_argument("--pretrain_epochs", type=common.positive("pretrain_epochs"), default=2,
                        help="pretraining length in epochs over all training images (default 2)")
    parser.add_argument("--finetune_epochs", type=common.positive("finetune_epochs"), default=1,
                        help="fine-tuning (and scratch) length in full-data epochs, the same for every fraction "
                        "(default 1)")
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--resume", action="store_true",
                        help="read back the runs already in --workdir (trained with the same settings) and train "
                        "only the missing ones, e.g. another seed or arm")
    args = parser.parse_args(argv)
    args.arms = list(dict.fromkeys(args.arms))  # an arm named twice runs once
    args.fractions = common.parse_fractions(parser, args.fractions)
    if args.resume and args.workdir is None:
        parser.error("--resume needs --workdir (the folder of the earlier runs). Received: workdir=None")
    # A used workdir is refused unless its runs are meant to be read back.
    common.check_arguments(parser, argparse.Namespace(**{**vars(args), "workdir": None}) if args.resume else args)
    if args.workdir is not None:
        # The trainer runs with the repository as its working folder; the fine-tuning runs get the model's path.
        args.workdir = os.path.abspath(args.workdir)
    return args


def model_kwargs(args):
    return dict(common.PRESET_MODEL, **(common.TINY_MODEL if args.tiny else {}), patch_size=PATCH_SIZE,
                **(args.model_kwargs or {}))


def run_settings(args):
    """What a run's result depends on besides its arm, fraction and seed: `--resume` reads back only these."""
    return {key: getattr(args, key) for key in ("source_dir", "test_size", "pretrain_epochs", "finetune_epochs",
                                                 "model_kwargs", "tiny")}


def write_run(path, record):
    common.write_atomic(path, json.dumps(record, indent=2))


# ---- the runs ---------------------------------------------------------------------------------


def pretrain(args, work, data_dir, arm, seed, flags, settings):
    """The pretraining record of `arm`'s (target, rate) and `seed`: trained, or read back with `--resume`."""
    target, rate = ARMS[arm]
    key = f"pretrain_{target}_{round(100 * rate)}_seed_{seed}"
    path = os.path.join(work, "runs", f"{key}.json")
    record = common.read_run("masked_patch_prediction.py", path, settings) if args.resume else None
    if record is not None:
        common.log(NAME, f"pretraining {target} {100 * rate:g}%, seed {seed}: read back from {path}")
        return dict(record, read_back=True)
    flags = [*flags, "--objective=masked_patch_prediction", f"--mpp_target={target}",
             f"--mpp_corruption_rate={rate}"]
    common.log(NAME, f"pretraining {target} {100 * rate:g}%, seed {seed}")
    summary = common.train(os.path.join(work, key), data_dir, seed, flags)
    record = dict(target=target, corruption_rate=rate, seed=seed, loss=summary["loss"],
                  model_path=summary["model_path"], wall_seconds=summary["wall_seconds"], flags=flags,
                  settings=settings)
    common.log(NAME, f"  pretraining loss {record['loss']:.4f} (test images), {record['wall_seconds']:.0f} s")
    write_run(path, record)
    return record


def finetune(args, work, data_dir, arm, fraction, images, seed, flags, pretraining, settings):
    """The record of `arm` at `fraction` and `seed`: fine-tuned from `pretraining` (or from scratch when None)."""
    key = f"{arm}_{fraction:g}_seed_{seed}"
    path = os.path.join(work, "runs", f"{key}.json")
    record = common.read_run("masked_patch_prediction.py", path, settings) if args.resume else None
    if record is not None:
        common.log(NAME, f"{arm}, {100 * fraction:g}%, seed {seed}: read back from {path}")
        return dict(record, read_back=True)
    if pretraining is not None:
        flags = [*flags, f"--pretrained={pretraining['model_path']}"]
        pretraining = {k: pretraining[k] for k in ("target", "corruption_rate", "seed", "loss", "model_path")}
    common.log(NAME, f"{arm}, {100 * fraction:g}% ({images} images), seed {seed}")
    summary = common.train(os.path.join(work, key), data_dir, seed, flags)
    record = dict(arm=arm, fraction=fraction, images=images, seed=seed, accuracy=summary["accuracy"],
                  pretraining=pretraining, load_report=summary["load_report"], wall_seconds=summary["wall_seconds"],
                  flags=flags, settings=settings)
    common.log(NAME, f"  test accuracy {record['accuracy']:.4f}, {record['wall_seconds']:.0f} s")
    write_run(path, record)
    return record


# ---- the comparisons --------------------------------------------------------------------------


def accuracies(records, arm, fraction):
    """`{seed: test accuracy}` of `arm` at `fraction`."""
    return {r["seed"]: r["accuracy"] for r in records if r["arm"] == arm and r["fraction"] == fraction}


def helps_verdict(comparisons):
    """Claim (a) at one fraction from the pretrained arms' comparisons with scratch: `(summary, reproduces)`."""
    above = sum(c["difference"] > 0 for c in comparisons)
    text = f"{above} of {len(comparisons)} pretrained arms above scratch"
    if any(c["spread"] is None for c in comparisons):
        return text + " (one seed: no spread)", "n/a (one seed)"
    beyond = sum(bool(c["exceeds"]) for c in comparisons)
    text += f", {beyond} by more than the spread"
    if beyond == len(comparisons):
        return text, "yes"
    return text, "within the spread" if above == len(comparisons) else "no"


def colour_verdict(c):
    """Claim (b) from mean colour's comparison with pixels (L2): reproduces when it is at least as accurate."""
    if c["difference"] >= 0:
        return "yes"
    if c["spread"] is None:
        return "no (one seed: no spread)"
    return "no, within the spread" if -c["difference"] <= c["spread"] else "no"


# ---- the report -------------------------------------------------------------------------------


def label(arm):
    if ARMS[arm] is None:
        return "scratch"
    target, rate = ARMS[arm]
    return f"{target} {100 * rate:g}%"


def points(value):
    return "n/a (one seed)" if value is None else f"{value:.2f}"


def tables(records, pretrainings, arms, fractions, seeds):
    body = []
    for arm in arms:
        for fraction in fractions:
            values = list(accuracies(records, arm, fraction).values())
            images = next(r["images"] for r in records if r["arm"] == arm and r["fraction"] == fraction)
            body.append([label(arm), f"{100 * fraction:g}%", images, common.mean_and_spread(values),
                         common.per_seed(values)])
    text = common.markdown_table(
        ["arm", "label fraction", "labelled images", "test accuracy, mean ± sd over seeds",
         f"per seed ({', '.join(map(str, seeds))})"], body)
    text += "\n\n" + common.markdown_table(
        ["pretraining", "seed", "pretraining loss (test images)", "wall s"],
        [[f"{p['target']} {100 * p['corruption_rate']:g}%", p["seed"], f"{p['loss']:.4f}",
          f"{p['wall_seconds']:.0f}"] for p in pretrainings])
    pretrained = [arm for arm in arms if ARMS[arm] is not None]
    if "scratch" not in arms or not pretrained:
        return text
    rows, ordering = [], []
    for fraction in fractions:
        scratch = accuracies(records, "scratch", fraction)
        found = []
        for arm in pretrained:
            c = common.comparison(accuracies(records, arm, fraction), scratch)
            found.append(c)
            rows.append([label(arm), f"{100 * fraction:g}%", f"{c['difference']:+.2f}", points(c["spread"]),
                         ", ".join(f"{p:+.2f}" for p in c["paired"]),
                         "n/a (one seed)" if c["exceeds"] is None else ("yes" if c["exceeds"] else "no")])
        summary, reproduces = helps_verdict(found)
        ordering.append(["(a) pretraining helps", f"{100 * fraction:g}%", summary, reproduces])
        if "mean_color_50" in arms and "pixels_50" in arms:
            c = common.comparison(accuracies(records, "mean_color_50", fraction),
                                  accuracies(records, "pixels_50", fraction))
            ordering.append(["(b) mean colour at least as good as pixels (L2), both 50%", f"{100 * fraction:g}%",
                             f"mean colour - pixels {c['difference']:+.2f} points, spread {points(c['spread'])}",
                             colour_verdict(c)])
    text += "\n\n" + common.markdown_table(
        ["pretrained arm", "label fraction", "pretrained - scratch, difference of the means (points)",
         "seed-to-seed spread: pooled sd (points)", "paired differences per seed (points)",
         "exceeds the spread"], rows)
    text += "\n\n" + common.markdown_table(["the paper's claim", "label fraction", "measured", "reproduces"],
                                           ordering)
    return text


def figure(records, arms, fractions, path):
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    from matplotlib.ticker import NullLocator

    x = 100 * np.array(fractions)
    colours = dict(zip(ARMS, ("black", "tab:blue", "tab:orange", "tab:green", "tab:purple")))
    for arm in arms:
        values = [np.array(list(accuracies(records, arm, f).values())) for f in fractions]
        spread = [v.std(ddof=1) if len(v) > 1 else 0.0 for v in values]
        left.errorbar(x, [v.mean() for v in values], yerr=spread, marker="o", capsize=3, color=colours[arm],
                      label=label(arm))
        if "scratch" in arms and arm != "scratch":
            gaps = [common.comparison(accuracies(records, arm, f), accuracies(records, "scratch", f))["difference"]
                    for f in fractions]
            right.plot(x, gaps, marker="o", color=colours[arm], label=label(arm))
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([f"{v:g}%" for v in x])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("Labelled training data used")
    left.set_ylabel("Test accuracy (EMA weights; bars: sd over seeds)")
    left.set_title("Fine-tuned after pretraining, and from scratch")
    left.legend(fontsize=8)
    right.axhline(0, color="gray", linewidth=0.8)
    right.set_ylabel("Pretrained - scratch (points, mean over seeds)")
    right.set_title("What pretraining adds")
    if right.lines[1:]:
        right.legend(fontsize=8)
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, kwargs, parameters, pretrain_steps, finetune_steps, batch_size, full, test_size, read_back):
    model = ", ".join(f"{k} {v}" for k, v in kwargs.items())
    warmup, ema = common.scaled_schedule(finetune_steps)
    pretrain_warmup, pretrain_ema = common.scaled_schedule(pretrain_steps)
    preset = common.PRESET
    text = (
        f"Data: pretraining on all {full} Fashion-MNIST training images (labels unused), fine-tuning on "
        f"class-balanced fractions of them with their labels, each slice written repeated to {full} examples; "
        f"the first {test_size} test images; every image resized to {IMAGE_SIZE} px (8x8 patches, so that the "
        f"downsized target's 4x4 cells divide a patch). Model: {BUILDER}, {model} ({parameters:,} parameters). "
        f"Recipe (every run): the `fashion_mnist_vit` preset's ({preset.optimizer} {preset.learning_rate}, wd "
        f"{preset.weight_decay}, clipping {preset.clip_norm}, label smoothing {preset.label_smoothing} when "
        f"classifying, augmentation `{preset.augmentation}`), batch {batch_size}. Pretraining: "
        f"`--objective=masked_patch_prediction`, {pretrain_steps} steps (warmup {pretrain_warmup}, EMA decay "
        f"{pretrain_ema}), corruption 80% [mask] / 10% another patch / 10% kept, targets the 3-bit mean colour "
        f"(8 classes for gray images), a 4x4 downsized patch at 3 bits, or the patch's pixels (L2); its exported "
        f"encoder (EMA weights) is fine-tuned with `--pretrained`. Fine-tuning and scratch: {finetune_steps} steps "
        f"at every fraction (warmup {warmup}, EMA decay {ema}). Seeds {', '.join(map(str, args.seeds))}: a seed's "
        "pretraining serves every fraction, and each arm at a seed fine-tunes with that seed (paired with "
        "scratch). Accuracy: `summary.json` (EMA weights). Pretrained - scratch: the difference of the means over "
        "seeds; spread: the pooled standard deviation of the two arms over seeds. The pretraining losses differ "
        "in kind between targets (cross-entropy, or mean squared error of pixels in [0, 1]) and are not "
        "comparable across them.")
    return text + common.read_back_note(read_back)


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    kwargs = model_kwargs(args)
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    parameters = common.build(BUILDER, kwargs, image_size=IMAGE_SIZE)[0].count_params()
    settings = run_settings(args)
    records, pretrainings = [], []
    with common.workdir(args.workdir, NAME) as work:
        os.makedirs(os.path.join(work, "runs"), exist_ok=True)
        full = common.read_idx(os.path.join(args.source_dir, "train-labels-idx1-ubyte.gz")).shape[0]
        pretrain_steps = 4 if args.tiny else args.pretrain_epochs * (full // batch_size)
        finetune_steps = 4 if args.tiny else args.finetune_epochs * (full // batch_size)
        shared = [*common.model_flags(BUILDER, kwargs), f"--image_size={IMAGE_SIZE}"]
        pretrain_dir = os.path.join(work, "data_all")
        slices = {}
        if any(ARMS[arm] is not None for arm in args.arms):
            common.write_slice(args.source_dir, pretrain_dir, full, args.test_size)
        for fraction in args.fractions:
            size = max(int(round(fraction * full)), batch_size)
            directory = os.path.join(work, f"data_{fraction:g}")
            slices[fraction] = (directory, *common.write_slice(args.source_dir, directory, size, args.test_size,
                                                               repeat_to=full))
        test_size = slices[args.fractions[0]][2]
        for seed in args.seeds:
            for arm in args.arms:
                pretraining = None
                if ARMS[arm] is not None:
                    # One pretraining per arm and seed, fine-tuned at every fraction.
                    pretraining = pretrain(args, work, pretrain_dir, arm, seed,
                                           [*shared, *common.recipe_flags(pretrain_steps, batch_size, args.tiny)],
                                           settings)
                    pretrainings.append(pretraining)
                for fraction in args.fractions:
                    directory, images, _ = slices[fraction]
                    record = finetune(args, work, directory, arm, fraction, images, seed,
                                      [*shared, *common.recipe_flags(finetune_steps, batch_size, args.tiny)],
                                      pretraining, settings)
                    records.append(record)
    read_back = sum(bool(r.get("read_back")) for r in records + pretrainings)
    path = figure(records, args.arms, args.fractions, args.figure)
    common.report(args, NAME, TITLE, argv,
                  notes(args, kwargs, parameters, pretrain_steps, finetune_steps, batch_size, full, test_size,
                        read_back),
                  tables(records, pretrainings, args.arms, args.fractions, args.seeds), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real transfer: the main job's model, pre-trained on Fashion-MNIST, fine-tuned on a folder of digits.

    python experiments/transfer_digits.py --write

The claim (ViT Sec. 4, and every pre-train-then-fine-tune result since): a model
pre-trained on one dataset and fine-tuned on a small other one beats the same
model trained on the small one from scratch with the same recipe and steps, and
the more so the fewer the examples.

Setup: the main job (`python train/main.py`, the `default` preset: the hybrid
ViT on 32x32 Fashion-MNIST, 12 epochs) is run first, unless `--encoder` names
its `model.keras`. Its head is set to zero, as ViT fine-tunes (App. B.1.1).
scikit-learn's digits (1,797 8x8 gray images of 10 digits, installed with
scikit-learn; no download) are written as PNG files into an image folder
(`digits/{train,test}/<digit>/*.png`, a stratified 75/25 split), read by the
trainer as any folder of photos (`--dataset=folder:... --image_channels=1`) and
resized to 32x32. Each training size (`--train_sizes`, class-balanced subsets
of the training split) is trained twice with the same flags and seeds: from
the pre-trained model (`--pretrained`) and from scratch. The recipe is the
`default` preset's for `--steps` steps (its warmup and EMA fitted to them by
the trainer) with no flips (`--augmentation=none --eval_flip=false`: a mirrored
digit is another shape).

Reading the result: test accuracy on the 450 test digits (EMA weights), mean
and spread over seeds, and the training seconds of each run
(`summary.json`'s `train_seconds`: fit, compilation included).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "transfer_digits"
TITLE = "Transfer: the main job's model fine-tuned on a folder of digits, against training from scratch"
IMAGE_SIZE = 32  # the main job's
STARTS = ("pre-trained", "scratch")
TRAIN_DIGITS = 1347  # the stratified 75% of scikit-learn's 1,797 digits; the other 450 are the test split


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    parser.add_argument("--encoder", default=None,
                        help="the main job's model.keras (default: run the main job first, into the workdir)")
    parser.add_argument("--train_sizes", type=common.int_list("train_sizes"), default=[100, TRAIN_DIGITS],
                        help="comma-separated training-set sizes, class-balanced (default 100,1347: 1347 is all)")
    parser.add_argument("--steps", type=common.positive("steps"), default=300)
    parser.add_argument("--batch_size", type=common.positive("batch_size"), default=32)
    args = parser.parse_args(argv)
    common.check_arguments(parser, args)
    if min(args.train_sizes) < 10 or max(args.train_sizes) > TRAIN_DIGITS:
        parser.error(f"--train_sizes must be from 10 (one of each digit) to the {TRAIN_DIGITS} training digits. "
                     f"Received: train_sizes={','.join(map(str, args.train_sizes))}")
    if args.batch_size > min(args.train_sizes):
        parser.error(f"--batch_size must be at most the smallest of --train_sizes ({min(args.train_sizes)}): every "
                     f"batch is whole. Received: batch_size={args.batch_size}")
    if args.encoder is not None and not os.path.isfile(args.encoder):
        parser.error(f"--encoder must be the main job's model.keras (python train/main.py writes "
                     f"workdir/model.keras). Received: encoder={args.encoder!r}")
    try:
        import sklearn  # noqa: F401
    except ModuleNotFoundError:
        parser.error("the digits come with scikit-learn: pip install -e \".[experiments]\" (or scikit-learn)")
    return args


def write_digits(root, train_sizes, seed=0):
    """The digits as PNG files: `root/test/<digit>/` and `root/train_<n>/<digit>/` per training size.

    Returns the number of test images.
    """
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    # 0..16 ink levels to 0..255: bright strokes on black, as Fashion-MNIST's objects.
    images = np.round(digits.images * 255 / 16).astype(np.uint8)
    train_images, test_images, train_labels, test_labels = train_test_split(
        images, digits.target, test_size=0.25, stratify=digits.target, random_state=seed)
    splits = {"test": (test_images, test_labels)}
    for size in train_sizes:
        chosen = common.balanced_indices(train_labels, size)
        splits[f"train_{size}"] = (train_images[chosen], train_labels[chosen])
    for split, (split_images, labels) in splits.items():
        for index, (image, label) in enumerate(zip(split_images, labels)):
            folder = os.path.join(root, split, str(label))
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(image, mode="L").save(os.path.join(folder, f"{index}.png"))
    return len(test_labels)


def main_job(args, work):
    """The main job's `model.keras`: `--encoder`, or a run of `python train/main.py` into the workdir."""
    if args.encoder is not None:
        return args.encoder
    from runs.students import run_student

    folder = os.path.join(work, "main_job")
    # The main job as README runs it (the `default` preset), on `--source_dir`'s Fashion-MNIST.
    flags = ["--config=default"]
    if args.tiny:
        flags += [f"--model_kwargs={json.dumps(dict(common.TINY_MODEL, resnet_stages=[], patch_size=2))}",
                  "--steps=8", f"--batch_size={common.TINY_BATCH}", "--jit_compile=false"]
    common.log(NAME, "the main job (python train/main.py)")
    summary = run_student(folder, args.source_dir, 0, flags)
    common.log(NAME, f"  Fashion-MNIST test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
    return os.path.join(folder, "model.keras")


def zero_head(encoder, path):
    """`encoder` with its head's kernel and bias at zero, saved to `path` (ViT App. B.1.1)."""
    import keras

    import keras_vit  # noqa: F401  (registers the layers for loading)

    model = keras.saving.load_model(encoder, compile=False)
    for weight in model.get_layer("head").weights:
        weight.assign(np.zeros(weight.shape, weight.dtype))
    model.save(path)
    return path, model


def run_flags(args, data_root, size, pretrained, model):
    flags = ["--config=default", f"--dataset=folder:{data_root}", f"--train_split=train_{size}", "--eval_split=test",
             "--image_channels=1", f"--image_size={IMAGE_SIZE}", f"--steps={args.steps}",
             f"--batch_size={args.batch_size}", "--augmentation=none", "--eval_flip=false"]
    if args.tiny:
        flags += [f"--model_kwargs={json.dumps(model)}", "--jit_compile=false"]
    if pretrained is not None:
        flags.append(f"--pretrained={pretrained}")
    return flags


def train_on_digits(workdir, seed, flags):
    """Runs `train/main.py` with `flags` to completion; returns its `summary.json` (with `wall_seconds`)."""
    import subprocess

    from runs.students import finished_summary

    command = [sys.executable, os.path.join(common.ROOT, "train", "main.py"), f"--workdir={workdir}",
               f"--seed={seed}", *flags]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=common.ROOT)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return finished_summary(workdir, start)


def table(rows, seeds):
    header = ["training digits", "start", "test accuracy", f"per seed ({', '.join(map(str, seeds))})",
              "training s (mean)", "difference, points"]
    body = []
    for size in sorted({row["size"] for row in rows}):
        pair = {row["start"]: row for row in rows if row["size"] == size}
        difference = 100 * (np.mean(pair["pre-trained"]["accuracy"]) - np.mean(pair["scratch"]["accuracy"]))
        for start in STARTS:
            row = pair[start]
            body.append([str(size), start, common.mean_and_spread(row["accuracy"]), common.per_seed(row["accuracy"]),
                         f"{np.mean(row['seconds']):.0f}", f"{difference:+.2f}" if start == "pre-trained" else ""])
    return common.markdown_table(header, body)


def figure(rows, path):
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    sizes = sorted({row["size"] for row in rows})
    for offset, start in zip((-0.2, 0.2), STARTS):
        mine = [next(r for r in rows if r["size"] == size and r["start"] == start) for size in sizes]
        means = [np.mean(r["accuracy"]) for r in mine]
        spread = [np.std(r["accuracy"], ddof=1) if len(r["accuracy"]) > 1 else 0.0 for r in mine]
        ax.bar(np.arange(len(sizes)) + offset, means, width=0.4, yerr=spread, capsize=3, label=start)
    ax.set_xticks(np.arange(len(sizes)), [str(s) for s in sizes])
    ax.set_xlabel("Training digits")
    ax.set_ylabel("Test accuracy (EMA weights)")
    ax.set_ylim(0, 1)
    ax.legend()
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, encoder, test_size):
    return (f"Pre-trained model: {encoder} (the main job's `model.keras`, head set to zero). Data: scikit-learn's "
            f"digits as PNG files, {test_size} test images, class-balanced training subsets of "
            f"{', '.join(map(str, args.train_sizes))}, resized to {IMAGE_SIZE}x{IMAGE_SIZE}, read as one channel. "
            f"Recipe: the `default` preset's (AdamW, cosine decay, label smoothing 0.1, EMA; warmup and EMA fitted "
            f"to the run by the trainer), batch {args.batch_size}, {args.steps} steps, no flips; seeds "
            f"{', '.join(map(str, args.seeds))}, the same for both starts.")


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    tiny_model = dict(common.TINY_MODEL, resnet_stages=[], patch_size=2)
    rows = []
    with common.workdir(args.workdir, NAME) as work:
        encoder = main_job(args, work)
        pretrained, _ = zero_head(encoder, os.path.join(work, "pretrained_zero_head.keras"))
        data_root = os.path.join(work, "digits")
        test_size = write_digits(data_root, args.train_sizes)
        for size in args.train_sizes:
            for start in STARTS:
                row = {"size": size, "start": start, "accuracy": [], "seconds": []}
                for seed in args.seeds:
                    common.log(NAME, f"{size} digits, {start}, seed {seed}: {args.steps} steps")
                    flags = run_flags(args, data_root, size, pretrained if start == "pre-trained" else None,
                                      tiny_model)
                    summary = train_on_digits(os.path.join(work, f"{start}_{size}", f"seed_{seed}"), seed, flags)
                    common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                    row["accuracy"].append(summary["accuracy"])
                    row["seconds"].append(summary["train_seconds"])
                rows.append(row)
    path = figure(rows, args.figure)
    encoder_name = args.encoder or "`python train/main.py` run by the script"
    common.report(args, NAME, TITLE, argv, notes(args, encoder_name, test_size), table(rows, args.seeds), [path],
                  started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

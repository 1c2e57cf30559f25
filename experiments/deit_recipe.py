"""DeiT's training recipe in miniature: keras_vit's input pipeline against timm's, everything else shared.

(Over 400 lines: the two arms' input pipelines (keras_vit's and timm's, on the same
images) must be written out side by side for the comparison to be read.)

Issue #27, item 8: the recipe as a whole, end to end. One small DeiT (a ViT with
DeiT's initialization, ImageNet normalisation and stochastic depth) trains on a
slice of Fashion-MNIST made RGB and 32 px, twice per seed:

- arm `keras_vit`: batches from `train/pipeline.py`'s `make_train_dataset`, the
  trainer's DeiT path (random resized crop, flip, RandAugment
  `rand-m9-mstd0.5-inc1`, random erasing 0.25, repeated augmentation, MixUp 0.8 /
  CutMix 1.0, every draw stateless, `keras_vit.preprocessing`);
- arm `timm`: the same images through timm's `create_transform(is_training=True,
  ...)` per PIL image, its `RepeatAugSampler`, a PyTorch `DataLoader` and its
  `Mixup` per batch, as DeiT's `main.py` runs them; its normalised tensors
  mapped back to [0, 255] (our models normalise inside).

Only the training pixels and targets differ. The model (built with the seed,
so both arms start from the same weights), the optimizer (the trainer's
`make_optimizer`: AdamW, warmup and cosine decay, no decay on biases, norms,
tokens and position embeddings), the loss, the seed and the Keras `fit` loop
are the same, and both arms are evaluated on the same test images with DeiT's
evaluation transform (shorter side to size / 0.875, bicubic, centre crop).
Label smoothing reaches both arms' targets the same way: timm's `Mixup`
smooths its targets (DeiT passes it `label_smoothing`), and keras_vit's mixed
one-hot labels are smoothed with Keras' formula, `y (1 - e) + e / K`, what the
trainer's `CategoricalCrossentropy(label_smoothing=e)` does inside; the loss
itself smooths nothing. The two agree when the difference of the arms' mean
test accuracies is within the seed-to-seed spread (the pooled standard
deviation over seeds).

Usage:
    python experiments/deit_recipe.py --workdir=/tmp/exp/deit_recipe --write
"""

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "deit_recipe"
TITLE = "DeiT's training recipe in miniature: keras_vit's pipeline against timm's"
ARMS = ("keras_vit", "timm")
IMAGE_SIZE = 32
# The experiments' transformer (`fashion_mnist_vit`'s width and depth) as a DeiT:
# 8x8 patches of the 32 px images, 16 tokens and the class token.
MODEL = dict(patch_size=8, hidden_size=96, num_layers=6, num_heads=4, mlp_dim=192, initialization="deit",
             preprocessing="imagenet")
# timm's `RepeatAugSampler` draws its permutation from the epoch alone (DeiT's
# `RASampler` too), the same in every run; each seed here gets its own epochs.
SEED_EPOCH_STRIDE = 10_000


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME, seeds="0,1,2")
    parser.add_argument("--arms", type=common.choice_list("arms", ARMS), default=list(ARMS),
                        help="comma-separated: keras_vit, timm (default both)")
    parser.add_argument("--train_size", type=common.positive("train_size"), default=10000,
                        help="class-balanced training images (default 10000)")
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--epochs", type=common.positive("epochs"), default=8,
                        help="default 8: about 3 minutes a run on 2 busy cores")
    parser.add_argument("--batch_size", type=common.positive("batch_size"), default=None,
                        help="default 128 (32 with --tiny); must be even (MixUp pairs the batch)")
    parser.add_argument("--learning_rate", type=float, default=1e-3,
                        help="AdamW's peak rate (default 1e-3, the small presets'; DeiT's rule 5e-4 x batch / 512 "
                        "is tuned for 300 ImageNet epochs)")
    parser.add_argument("--warmup_epochs", type=float, default=1.0)
    parser.add_argument("--repeated_augmentation", type=common.positive("repeated_augmentation"), default=3,
                        help="copies of each image per epoch (DeiT: 3; 1 turns it off)")
    parser.add_argument("--eval_crop", type=float, default=0.875,
                        help="evaluation: shorter side to size / eval_crop (bicubic), centre crop (DeiT: 0.875)")
    parser.add_argument("--loader_workers", type=int, default=None,
                        help="the timm arm's DataLoader workers (default 1; 0 with --tiny)")
    parser.add_argument("--torch_threads", type=common.positive("torch_threads"), default=1,
                        help="PyTorch's intra-op threads in the main process (MixUp only; default 1)")
    parser.add_argument("--resume", action="store_true",
                        help="read back the runs already in --workdir (trained with the same settings) and train "
                        "only the missing ones, e.g. another seed")
    args = parser.parse_args(argv)
    if args.resume and args.workdir is None:
        parser.error("--resume needs --workdir (the folder of the earlier runs). Received: workdir=None")
    # A used workdir is refused unless its runs are meant to be read back.
    common.check_arguments(parser, argparse.Namespace(**{**vars(args), "workdir": None})
                           if args.resume else args)
    args.batch_size = args.batch_size or (common.TINY_BATCH if args.tiny else 128)
    if args.batch_size % 2:
        parser.error(f"--batch_size must be even (MixUp and CutMix pair each image with the reversed batch's). "
                     f"Received: batch_size={args.batch_size}")
    if not 0 < args.eval_crop <= 1:
        parser.error(f"--eval_crop must be in (0, 1]. Received: eval_crop={args.eval_crop}")
    if args.loader_workers is None:
        args.loader_workers = 0 if args.tiny else 1
    if "timm" in args.arms:
        common.import_reference("deit_recipe.py")
    return args


# ---- data -------------------------------------------------------------------------------------


def rgb_images(images, size):
    """Grayscale uint8 `(n, h, w)` -> RGB uint8 `(n, size, size, 3)`: PIL's bicubic resize, the channel repeated."""
    from PIL import Image

    resized = np.stack([np.asarray(Image.fromarray(image).resize((size, size), Image.BICUBIC)) for image in images])
    return np.repeat(resized[..., None], 3, axis=-1)


def load_slice(source_dir, train_size, test_size, size):
    """`(train images, train labels, test images, test labels, classes)`, the images RGB at `size` px."""
    from train.data import read_idx

    arrays = []
    for prefix, count, balanced in (("train", train_size, True), ("t10k", test_size, False)):
        images = read_idx(os.path.join(source_dir, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(source_dir, f"{prefix}-labels-idx1-ubyte.gz")).astype("int64")
        keep = common.balanced_indices(labels, count) if balanced else np.arange(min(count, len(labels)))
        arrays += [rgb_images(images[keep], size), labels[keep]]
    classes = int(max(arrays[1].max(), arrays[3].max())) + 1
    return (*arrays, classes)


def smooth_labels(labels, smoothing):
    """Keras' label smoothing, `y (1 - e) + e / K`: timm's `mixup_target` for the same mix."""
    return labels * (1.0 - smoothing) + smoothing / labels.shape[-1]


class ArrayImages:
    """A map-style dataset for PyTorch's `DataLoader`: `(transform(PIL image), label)` of uint8 arrays."""

    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        from PIL import Image

        return self.transform(Image.fromarray(self.images[index])), int(self.labels[index])


def seed_loader_worker(worker_id):
    """Seeds `random` and NumPy in a DataLoader worker from its torch seed (timm's `_worker_init`)."""
    import torch

    seed = torch.initial_seed() % 2**32
    random.seed(seed)
    np.random.seed(seed)


# ---- the two arms' batches --------------------------------------------------------------------


def keras_vit_batches(config, images, labels, classes, epochs):
    """The trainer's DeiT batches, `(float32 NHWC in [0, 255], smoothed mixed targets)`, epoch after epoch."""
    from train import data, pipeline

    source = data.array_source(images, labels, classes, [str(c) for c in range(classes)])
    stream = pipeline.make_train_dataset(
        source, (IMAGE_SIZE, IMAGE_SIZE), config.batch_size, config.seed, config.augmentation,
        end_epoch=epochs, randaugment=config.randaugment, mixup=config.mixup, cutmix=config.cutmix,
        random_erasing=config.random_erasing, repeated_augmentation=config.repeated_augmentation,
        mixing_group=config.mixing_group)
    for batch_images, batch_labels in stream.as_numpy_iterator():
        yield batch_images, smooth_labels(batch_labels, config.label_smoothing).astype("float32")


def timm_pipeline(timm, torch, config, images, labels, classes, workers):
    """timm's DeiT training input as DeiT's `main.py` builds it: `(loader, sampler, mixup)`."""
    from keras_vit.models.common import IMAGENET_MEAN, IMAGENET_STD

    transform = timm.data.create_transform(
        IMAGE_SIZE, is_training=True, auto_augment=config.randaugment, interpolation="bicubic",
        re_prob=config.random_erasing, re_mode="pixel", re_count=1, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    dataset = ArrayImages(images, labels, transform)
    # One replica; the epoch keeps whole batches, as the keras_vit arm's (DeiT: whole 256s).
    sampler = timm.data.distributed_sampler.RepeatAugSampler(
        dataset, num_replicas=1, rank=0, shuffle=True, num_repeats=config.repeated_augmentation,
        selected_round=config.batch_size)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=config.batch_size, sampler=sampler, num_workers=workers, drop_last=True,
        worker_init_fn=seed_loader_worker,
        generator=torch.Generator().manual_seed(config.seed))
    mixup = timm.data.Mixup(mixup_alpha=config.mixup, cutmix_alpha=config.cutmix, prob=1.0, switch_prob=0.5,
                            mode="batch", label_smoothing=config.label_smoothing, num_classes=classes)
    return loader, sampler, mixup


def timm_batches(timm, torch, config, images, labels, classes, epochs, workers):
    """timm's DeiT batches mapped to the model's input: `(float32 NHWC in [0, 255], mixed smoothed targets)`."""
    from keras_vit.models.common import IMAGENET_MEAN, IMAGENET_STD

    random.seed(config.seed)
    np.random.seed(config.seed)  # timm's Mixup draws from NumPy's global generator
    torch.manual_seed(config.seed)
    loader, sampler, mixup = timm_pipeline(timm, torch, config, images, labels, classes, workers)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    from runs.reference import posterize_as_earlier_pillows

    with posterize_as_earlier_pillows():
        for epoch in range(epochs):
            sampler.set_epoch(SEED_EPOCH_STRIDE * config.seed + epoch)
            for batch_images, batch_labels in loader:
                batch_images, targets = mixup(batch_images, batch_labels)
                pixels = (batch_images * std + mean) * 255.0  # ToTensor's 1/255 and Normalize, undone
                yield (np.ascontiguousarray(pixels.permute(0, 2, 3, 1).numpy(), dtype="float32"),
                       targets.numpy().astype("float32"))


# ---- the shared model, optimizer and loop -----------------------------------------------------


def recipe(args, seed, steps_per_epoch):
    """The `deit` preset scaled to the miniature: a `TrainConfig` (model, optimizer, augmentation)."""
    from train.configs import get_config

    model_kwargs = dict(MODEL, **(common.TINY_MODEL if args.tiny else {}), **(args.model_kwargs or {}))
    return dataclasses.replace(
        get_config("deit"), model="VisionTransformer", model_kwargs=model_kwargs, dataset="fashion_mnist",
        image_size=IMAGE_SIZE, batch_size=args.batch_size, epochs=args.epochs, learning_rate=args.learning_rate,
        warmup_steps=round(args.warmup_epochs * steps_per_epoch), end_learning_rate=1e-5,
        repeated_augmentation=args.repeated_augmentation, mixing_group=None, eval_crop=args.eval_crop,
        precision="float32", jit_compile=not args.tiny, seed=seed)


def train_and_evaluate(config, classes, batches, steps_per_epoch, eval_dataset):
    """Trains the configured model on `batches` with the shared loop; returns its result (a dict)."""
    import keras

    from train.modeling import build_model
    from train.optimization import make_optimizer

    keras.backend.clear_session()
    keras.utils.set_random_seed(config.seed)  # the same initial weights and drop-path draws in both arms
    model, _ = build_model(config, classes, (IMAGE_SIZE, IMAGE_SIZE), 3)
    model.compile(optimizer=make_optimizer(config, config.epochs * steps_per_epoch),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True),  # targets come smoothed
                  metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")], jit_compile=config.jit_compile)
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    history = model.fit(batches, epochs=config.epochs, steps_per_epoch=steps_per_epoch, shuffle=False,
                        verbose=0).history
    seconds = time.perf_counter() - start
    load.append(os.getloadavg()[0])
    results = model.evaluate(eval_dataset, verbose=0, return_dict=True)
    return {"accuracy": float(results["accuracy"]), "loss": [float(v) for v in history["loss"]],
            "train_seconds": seconds, "load": load, "steps": int(model.optimizer.iterations.numpy()),
            "parameters": model.count_params()}


def evaluation_dataset(images, labels, classes, batch_size, eval_crop):
    from train import data, pipeline

    source = data.array_source(images, labels, classes, [str(c) for c in range(classes)])
    transform = pipeline.evaluation_transform((IMAGE_SIZE, IMAGE_SIZE), eval_crop=eval_crop)
    return pipeline.make_eval_dataset(source, (IMAGE_SIZE, IMAGE_SIZE), batch_size, transform=transform)


def run_settings(args):
    """What a run's result depends on besides its arm and seed: `--resume` reads back only runs that match."""
    return {key: getattr(args, key) for key in ("source_dir", "train_size", "test_size", "epochs", "batch_size",
                                                 "learning_rate", "warmup_epochs", "repeated_augmentation",
                                                 "eval_crop", "loader_workers", "model_kwargs", "tiny")}


# ---- the report -------------------------------------------------------------------------------


def comparison(rows, arms=ARMS):
    """The two arms' agreement: a dict of the difference of the means, the spread and the verdict (points)."""
    a, b = (np.array([r["accuracy"] for r in rows if r["arm"] == arm], "float64") for arm in arms)
    difference = 100 * (a.mean() - b.mean())
    paired = {r["seed"]: r["accuracy"] for r in rows if r["arm"] == arms[0]}
    pairs = [100 * (paired[r["seed"]] - r["accuracy"]) for r in rows if r["arm"] == arms[1] and r["seed"] in paired]
    if min(len(a), len(b)) < 2:
        return {"difference": difference, "spread": None, "ratio": None, "paired": pairs, "agree": None}
    spread = 100 * math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    error = 100 * math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return {"difference": difference, "spread": spread, "ratio": difference / error if error else None,
            "paired": pairs, "agree": abs(difference) <= spread}


def tables(rows, arms):
    runs = common.markdown_table(
        ["arm", "seed", "test accuracy", "final training loss", "training s", "load average (1 min), start / end"],
        [[r["arm"], r["seed"], f"{r['accuracy']:.4f}", f"{r['loss'][-1]:.4f}", f"{r['train_seconds']:.0f}",
          f"{r['load'][0]:.1f} / {r['load'][1]:.1f}"] for r in rows])
    summary = []
    for arm in arms:
        values = [r["accuracy"] for r in rows if r["arm"] == arm]
        summary.append([arm, len(values), common.mean_and_spread(values), common.per_seed(values)])
    text = runs + "\n\n" + common.markdown_table(
        ["arm", "runs", "test accuracy, mean ± sd over seeds", "per seed"], summary)
    if len(arms) == 2:
        c = comparison(rows, arms)
        spread = "n/a (one seed)" if c["spread"] is None else f"{c['spread']:.2f}"
        ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:+.1f}"
        verdict = "n/a (one seed)" if c["agree"] is None else ("yes" if c["agree"] else "no")
        text += "\n\n" + common.markdown_table(
            [f"{arms[0]} - {arms[1]}, difference of the means (points)", "seed-to-seed spread: pooled sd (points)",
             "difference / its s.e.", "paired differences per seed (points)", "agree (difference within the spread)"],
            [[f"{c['difference']:+.2f}", spread, ratio, ", ".join(f"{p:+.2f}" for p in c["paired"]), verdict]])
    return text


def figure(rows, arms, path):
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    colours = dict(zip(ARMS, ("tab:blue", "tab:orange")))
    for i, arm in enumerate(arms):
        values = [r["accuracy"] for r in rows if r["arm"] == arm]
        left.bar(i, np.mean(values), 0.6, color=colours[arm], alpha=0.6, label=arm)
        left.scatter([i] * len(values), values, color="black", s=12, zorder=3)
        for r in (r for r in rows if r["arm"] == arm):
            right.plot(np.arange(1, len(r["loss"]) + 1), r["loss"], color=colours[arm], alpha=0.8,
                       label=f"{arm}, seed {r['seed']}")
    values = [r["accuracy"] for r in rows]
    left.set_ylim(max(0.0, min(values) - 0.05), min(1.0, max(values) + 0.02))
    left.set_xticks(range(len(arms)))
    left.set_xticklabels(arms)
    left.set_ylabel("Test accuracy (dots: seeds)")
    left.set_title("Same DeiT, model and loop; training pixels from each")
    right.set_xlabel("Epoch")
    right.set_ylabel("Training loss (mixed, smoothed targets)")
    right.set_title("Training loss")
    common.integer_ticks(right)
    right.legend(fontsize=7)
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, config, train_size, test_size, classes, steps_per_epoch, parameters, versions, loads,
          read_back=0):
    m = config.model_kwargs
    model = ", ".join(f"{k} {v}" for k, v in m.items())
    text = (
        f"Data: a class-balanced {train_size} of the Fashion-MNIST training images and the first {test_size} test "
        f"images ({classes} classes), resized to {IMAGE_SIZE} px (PIL bicubic) and made RGB by repeating the gray "
        f"channel, so RandAugment's colour operations act on gray images as in the trainer. Model: "
        f"VisionTransformer, {model}, drop path {config.drop_path_rate} ({parameters:,} parameters). Recipe (both "
        f"arms; the `deit` preset scaled down): AdamW lr {config.learning_rate:g} (batch {config.batch_size}), "
        f"betas {config.adam_beta1}/{config.adam_beta2}, eps {config.adam_epsilon:g}, weight decay "
        f"{config.weight_decay} (not on biases, norms, tokens, position embeddings), {config.epochs} epochs of "
        f"{steps_per_epoch} steps, warmup {config.warmup_steps} steps, cosine to {config.end_learning_rate:g}, no "
        f"clipping, no EMA, label smoothing {config.label_smoothing}; augmentation: random resized crop (8-100%, "
        f"bicubic), flip, RandAugment `{config.randaugment}`, random erasing {config.random_erasing} (pixel), "
        f"repeated augmentation x{config.repeated_augmentation}, MixUp {config.mixup} / CutMix {config.cutmix} "
        f"(switch 0.5, one lambda per batch); evaluation: shorter side to {IMAGE_SIZE} / {config.eval_crop} "
        f"(bicubic), centre crop, the same transform and test images for both arms. keras_vit arm: "
        f"`train/pipeline.py`'s `make_train_dataset` (`keras_vit.preprocessing`); timm arm: timm "
        f"`create_transform(is_training=True)` per PIL image, `RepeatAugSampler` (its permutation seeded with "
        f"{SEED_EPOCH_STRIDE} x seed + epoch), `DataLoader` (workers: {args.loader_workers}), `Mixup` with the "
        f"label smoothing, tensors mapped back to [0, 255]. The same seed gives both arms the same initial weights "
        f"(seeds {', '.join(map(str, args.seeds))}). {versions}.")
    if loads:
        text += (f" Load average (1 min) at the runs' starts and ends: {min(loads):.1f} to {max(loads):.1f} on "
                 f"{os.cpu_count()} cores (this script's own training threads count about 2 of it).")
    return text + common.read_back_note(read_back)


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    timm = torch = None
    if "timm" in args.arms:
        timm, torch = common.import_reference("deit_recipe.py")
        torch.set_num_threads(args.torch_threads)
    train_images, train_labels, test_images, test_labels, classes = load_slice(
        args.source_dir, args.train_size, args.test_size, IMAGE_SIZE)
    steps_per_epoch = len(train_labels) // args.batch_size
    if steps_per_epoch == 0:
        sys.exit(f"deit_recipe.py: the training slice ({len(train_labels)} images) holds no whole batch of "
                 f"{args.batch_size}")
    eval_dataset = evaluation_dataset(test_images, test_labels, classes, 256, args.eval_crop)
    epochs = 1 if args.tiny else args.epochs
    rows, config, settings, read_back = [], None, run_settings(args), 0
    with common.workdir(args.workdir, NAME) as work:
        for seed in args.seeds:
            for arm in args.arms:
                config = dataclasses.replace(recipe(args, seed, steps_per_epoch), epochs=epochs)
                path = os.path.join(work, f"{arm}_seed_{seed}.json")
                result = common.read_run("deit_recipe.py", path, settings) if args.resume else None
                if result is not None:
                    common.log(NAME, f"{arm}, seed {seed}: read back from {path}")
                    rows.append(result)
                    read_back += 1
                    continue
                common.log(NAME, f"{arm}, seed {seed}: {epochs} epochs of {steps_per_epoch} steps")
                if arm == "keras_vit":
                    batches = keras_vit_batches(config, train_images, train_labels, classes, epochs)
                else:
                    batches = timm_batches(timm, torch, config, train_images, train_labels, classes, epochs,
                                           args.loader_workers)
                result = dict(arm=arm, seed=seed, settings=settings,
                              **train_and_evaluate(config, classes, batches, steps_per_epoch, eval_dataset))
                common.log(NAME, f"  test accuracy {result['accuracy']:.4f}, {result['train_seconds']:.0f} s")
                with open(path, "w") as f:
                    json.dump(result, f, indent=2)
                rows.append(result)
    versions = common.versions()
    if timm is not None:
        versions += f"; timm {timm.__version__}, PyTorch {torch.__version__} (CPU)"
    loads = [value for r in rows for value in r["load"]]
    path = figure(rows, args.arms, args.figure)
    common.report(args, NAME, TITLE, argv,
                  notes(args, config, len(train_labels), len(test_labels), classes, steps_per_epoch,
                        rows[0]["parameters"], versions, loads, read_back),
                  tables(rows, args.arms), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Hard distillation (DeiT) from a small CNN into the default ViT, on a Fashion-MNIST slice.

    python benchmarks/distillation.py --write

Touvron et al. 2021, Sec. 4 and 5.2: a convnet teacher's hard decisions (Eq. 3)
help a ViT trained on little data. On the first `--train_size` training images of
Fashion-MNIST (the Debian package's IDX files, or `--source_dir`) and the first
`--test_size` test images, written as IDX files into `--workdir` and read back by
`train/main.py --data_dir`, this script

1. trains a small CNN teacher with a plain Keras `fit` (3 convolutions; it takes
   the trainer's float images in [0, 255] and rescales them itself, as the
   keras_vit models do; the same flips, batch size and seed) and saves it as
   `teacher.keras`;
2. trains the `fashion_mnist_vit` preset's ViT (7x7 patches, width 96, 6 blocks, 4 heads)
   through `train/main.py` with identical flags and seeds: without distillation,
   with `--teacher=teacher.keras --distillation=hard` (one head: both terms of
   Eq. 3 on it), and, when `keras_vit.VisionTransformer` takes
   `distillation=True`, DeiT's two-head student (class and distillation tokens)
   with hard distillation;
3. reads each run's test accuracy from its `summary.json` (EMA weights, as the
   trainer exports them) and the teacher's from `evaluate`, and each student's
   mean attention distance (ViT App. D.6; `keras_vit.analysis`) over the first
   `--attention_images` test images, averaged over heads and blocks, and per block;
4. prints a Markdown table; with `--write` it also replaces (or appends) the
   "Distillation (DeiT, hard) on a Fashion-MNIST slice" section of BENCHMARKS.md
   with the command, machine, date and table.

The preset's schedule is scaled to the shorter run: warmup is 10% of the steps
(the preset's 470 of 4,680) and the EMA decay keeps the preset's averaging
horizon of about 21% of the run (`1 / (1 - 0.999)` = 1,000 of 4,680 steps); the
preset's 0.999 would leave most of the weight on the first steps of a 470-step run.

Run time, measured: 10.1 minutes on an idle 2-core CPU with `--teacher_epochs=20`
(the command in BENCHMARKS.md: one teacher and six student runs of 72-98 s each).
The teacher trains 20 epochs (89%); at 10 it reached only about 76% here, weaker
than the students.
"""

import argparse
import inspect
import json
import math
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

from runs import reporting  # noqa: E402
from runs.reporting import write_atomic  # noqa: E402
from runs.students import (  # noqa: E402
    STUDENT_PRESET, check_source_and_workdir, machine, run_student, scaled_schedule, write_slice,
)
from train.configs import get_config  # noqa: E402
from train.data import FASHION_MNIST_DIR  # noqa: E402

SECTION = "## Distillation (DeiT, hard) on a Fashion-MNIST slice"
IMAGE_SIZE = 28
TEACHER_DESCRIPTION = ("CNN teacher: Rescaling(1/255), conv3x3-32, BN, ReLU, max-pool, conv3x3-64, BN, ReLU, "
                       "max-pool, conv3x3-64, BN, ReLU, flatten, dense 128, dropout 0.3, dense 10")


def log(message):
    print(f"[distillation] {message}", file=sys.stderr, flush=True)


# ---- data ------------------------------------------------------------------------------


# ---- the teacher -------------------------------------------------------------------------


def build_teacher(num_classes):
    """The CNN of `TEACHER_DESCRIPTION`: [0, 255] images in, logits out."""
    import keras
    from keras import layers

    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 1), name="images")
    x = layers.Rescaling(1 / 255)(inputs)
    for filters, pool in ((32, True), (64, True), (64, False)):
        x = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        if pool:
            x = layers.MaxPooling2D()(x)
    x = layers.Flatten()(x)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dropout(0.3)(x)
    outputs = layers.Dense(num_classes, name="logits")(x)
    return keras.Model(inputs, outputs, name="cnn_teacher")


def train_teacher(data_dir, path, *, batch_size, epochs, steps, seed, augmentation):
    """Trains the CNN on the slice with the trainer's input pipeline; saves it to `path`.

    Returns:
        dict: test accuracy, steps, training seconds and parameter count.
    """
    import keras

    from train import data, pipeline

    keras.utils.set_random_seed(seed)
    train_source = data.fashion_mnist("train", data_dir)
    test_source = data.fashion_mnist("test", data_dir)
    steps_per_epoch = train_source.size // batch_size
    total_steps = steps or epochs * steps_per_epoch
    stream = pipeline.make_train_dataset(train_source, (IMAGE_SIZE, IMAGE_SIZE), batch_size, seed, augmentation,
                                         end_epoch=math.ceil(total_steps / steps_per_epoch))
    model = build_teacher(train_source.num_classes)
    model.compile(optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(1e-3, total_steps)),
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")])
    start = time.perf_counter()
    # The pipeline shuffles by seed; Keras' own `shuffle` does not apply to a dataset and would only warn.
    model.fit(stream.take(total_steps), epochs=1, steps_per_epoch=total_steps, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    results = model.evaluate(pipeline.make_eval_dataset(test_source, (IMAGE_SIZE, IMAGE_SIZE), batch_size),
                             verbose=0, return_dict=True)
    model.save(path)
    return {"accuracy": float(results["accuracy"]), "steps": total_steps, "train_seconds": seconds,
            "parameters": model.count_params()}


# ---- the students ---------------------------------------------------------------------------


def supports_distillation_token():
    import keras_vit

    return "distillation" in inspect.signature(keras_vit.VisionTransformer).parameters


def attention_distance(model_path, images):
    """Mean attention distance in pixels (ViT App. D.6): `(layers,)`, averaged over heads and images."""
    import keras

    import keras_vit  # noqa: F401  (registers the layers for loading)
    from keras_vit import analysis

    model = keras.saving.load_model(model_path, compile=False)
    grid = analysis.grid_size(model)
    # attention_maps runs the layers up to the last block, before a distilled model's two heads.
    maps = analysis.attention_maps(model, images)
    return analysis.mean_attention_distance(maps, grid, IMAGE_SIZE / grid[0]).mean(axis=1)


# ---- the report ----------------------------------------------------------------------------


def table(teacher, rows, seeds):
    lines = [
        "| model | distillation | seeds | test accuracy (mean) | per seed | vs. no distillation "
        "| mean attention distance, px | per block, px | training s/run |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| CNN teacher ({teacher['parameters']:,} parameters) | none | {seeds[0]} | {teacher['accuracy']:.4f} "
        f"| {teacher['accuracy']:.4f} |  |  |  | {teacher['train_seconds']:.0f} |",
    ]
    baseline = None
    for row in rows:
        accuracies = [run["accuracy"] for run in row["runs"]]
        mean = float(np.mean(accuracies))
        baseline = mean if baseline is None else baseline
        delta = "" if row is rows[0] else f"{100 * (mean - baseline):+.2f} points"
        blocks = np.mean([run["distance"] for run in row["runs"]], axis=0)
        lines.append(
            f"| {row['model']} | {row['distillation']} | {', '.join(str(s) for s in seeds)} | {mean:.4f} "
            f"| {', '.join(f'{a:.4f}' for a in accuracies)} | {delta} | {blocks.mean():.2f} "
            f"| {', '.join(f'{d:.1f}' for d in blocks)} "
            f"| {np.mean([run['train_seconds'] for run in row['runs']]):.0f} |"
        )
    return "\n".join(lines)


def replace_section(text, section):
    """`text` (BENCHMARKS.md) with its `SECTION` replaced by `section`, or `section` appended."""
    return reporting.replace_section(text, SECTION, section)


def describe(argv, seeds, preset, model_kwargs, teacher, token_row, **run):
    """The section's text above the table: command, machine, date, versions and the settings."""
    import keras

    backend = keras.backend.backend()
    versions = f"Keras {keras.__version__}, backend `{backend}`"
    if backend == "tensorflow":
        import tensorflow as tf

        versions += f" (TensorFlow {tf.__version__})"
    command = shlex.join(["python", "benchmarks/distillation.py", *(sys.argv[1:] if argv is None else argv)])
    student = ", ".join(f"{k} {v}" for k, v in model_kwargs.items())
    lines = [
        f"Command: `{command}`",
        f"Machine: {machine()}. Date: {time.strftime('%Y-%m-%d')}. {versions}.",
        "",
        f"Data: the first {run['train_size']} training and first {run['test_size']} test images of Fashion-MNIST. "
        f"{TEACHER_DESCRIPTION}; Adam 1e-3, cosine decay, {teacher['steps']} steps of batch {preset.batch_size}, "
        f"augmentation `{preset.augmentation}`, trained once (seed {seeds[0]}). Students: `train/main.py` with the "
        f"`{STUDENT_PRESET}` preset ({student}; {preset.optimizer} {preset.learning_rate}, weight decay "
        f"{preset.weight_decay}, clipping {preset.clip_norm}, label smoothing {preset.label_smoothing}, "
        f"augmentation `{preset.augmentation}`), {run['steps']} steps of batch {preset.batch_size}, warmup "
        f"{run['warmup']} and EMA decay {run['ema_decay']} (the preset's schedule scaled to the run), the same "
        "flags and seeds in every row. Hard distillation is DeiT Eq. 3 (alpha 0.5): a one-head student takes "
        "the true-label and the teacher-label terms on its one head; the two-head student the first on its class "
        "head, the second on its distillation head, and predicts with their average. Accuracy: each run's "
        "`summary.json` (EMA weights); attention distance: ViT App. D.6 over the first "
        f"{run['attention_images']} test images, averaged over heads (then blocks), then over seeds.",
    ]
    if not token_row:
        lines += ["", "The distillation-token row needs `keras_vit.VisionTransformer(distillation=True)`, "
                  "which this version does not take."]
    return "\n".join(lines)


# ---- main ----------------------------------------------------------------------------------


def positive(name):
    def parse(text):
        value = int(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"--{name} must be a positive integer. Received: {name}={text}")
        return value

    return parse


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_size", type=positive("train_size"), default=6000, help="training images used")
    parser.add_argument("--test_size", type=positive("test_size"), default=10000, help="test images used")
    parser.add_argument("--epochs", type=positive("epochs"), default=10, help="student epochs")
    parser.add_argument("--steps", type=positive("steps"), default=None, help="student steps (replaces --epochs)")
    parser.add_argument("--teacher_epochs", type=positive("teacher_epochs"), default=20)
    parser.add_argument("--teacher_steps", type=positive("teacher_steps"), default=None,
                        help="teacher steps (replaces --teacher_epochs)")
    parser.add_argument("--seeds", default="0,1", help="comma-separated; one student run per seed and row "
                        "(the teacher is trained once, with the first)")
    parser.add_argument("--attention_images", type=positive("attention_images"), default=500,
                        help="test images for the attention distance")
    parser.add_argument("--model_kwargs", default=None,
                        help="JSON builder arguments merged into the fashion_mnist_vit preset's student (tests: a tiny ViT)")
    parser.add_argument("--source_dir", default=FASHION_MNIST_DIR,
                        help="Fashion-MNIST IDX files (train-images-idx3-ubyte.gz, t10k-..., labels)")
    parser.add_argument("--workdir", default=None, help="an empty or new folder for the slice, teacher and runs "
                        "(kept); default: a temporary folder, deleted at the end")
    parser.add_argument("--write", action="store_true", help=f"replace or append '{SECTION[3:]}' in BENCHMARKS.md")
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be comma-separated integers. Received: seeds={args.seeds!r}")
    if args.model_kwargs is not None:
        try:
            args.model_kwargs = json.loads(args.model_kwargs)
        except ValueError:
            args.model_kwargs = None
        if not isinstance(args.model_kwargs, dict):
            parser.error("--model_kwargs must be a JSON object.")
    check_source_and_workdir(parser, args)
    return args


def student_rows(model_kwargs, teacher_path, name):
    """`(model, distillation, folder, builder arguments, trainer flags)` of every student row."""
    hard = [f"--teacher={teacher_path}", "--distillation=hard"]
    rows = [(name, "none", "vit_none", model_kwargs, []),
            (name, "hard, one head", "vit_hard", model_kwargs, hard)]
    if supports_distillation_token():
        rows.append((f"{name} + distillation token (DeiT)", "hard, distillation head", "deit_hard",
                     {**model_kwargs, "distillation": True}, hard))
    return rows


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    preset = get_config(STUDENT_PRESET)
    model_kwargs = {**preset.model_kwargs, **(args.model_kwargs or {})}
    temporary = None
    if args.workdir is None:
        temporary = tempfile.TemporaryDirectory(prefix="keras_vit-distillation-")
        args.workdir = temporary.name
    try:
        data_dir = os.path.join(args.workdir, "data")
        train_size, test_size = write_slice(args.source_dir, data_dir, args.train_size, args.test_size)
        steps_per_epoch = train_size // preset.batch_size
        total_steps = args.steps or args.epochs * steps_per_epoch
        warmup, ema_decay = scaled_schedule(total_steps)

        teacher_path = os.path.join(args.workdir, "teacher.keras")
        log(f"training the CNN teacher on {train_size} images")
        teacher = train_teacher(data_dir, teacher_path, batch_size=preset.batch_size, epochs=args.teacher_epochs,
                                steps=args.teacher_steps, seed=args.seeds[0], augmentation=preset.augmentation)
        log(f"teacher: test accuracy {teacher['accuracy']:.4f}")

        from train.data import fashion_mnist

        test = fashion_mnist("test", data_dir)
        images = np.stack([image for image, _ in test.dataset.take(args.attention_images).as_numpy_iterator()])
        images = images.astype("float32")  # the trainer's input: [0, 255]

        name = f"ViT, {STUDENT_PRESET} preset" if not args.model_kwargs else "ViT, preset with --model_kwargs"
        rows = []
        token_row = supports_distillation_token()
        for model, distillation, folder, kwargs, extra in student_rows(model_kwargs, teacher_path, name):
            flags = [f"--steps={total_steps}", f"--warmup_steps={warmup}", f"--ema_decay={ema_decay}",
                     f"--model_kwargs={json.dumps(kwargs)}", *extra]
            runs = []
            for seed in args.seeds:
                log(f"{model}, distillation {distillation}, seed {seed}: {total_steps} steps")
                summary = run_student(os.path.join(args.workdir, folder, f"seed_{seed}"), data_dir, seed, flags)
                summary["distance"] = attention_distance(summary["model_path"], images)
                log(f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                runs.append(summary)
            rows.append({"model": model, "distillation": distillation, "runs": runs})
        minutes = (time.perf_counter() - started) / 60
    finally:
        if temporary is not None:
            temporary.cleanup()

    notes = describe(argv, args.seeds, preset, model_kwargs, teacher, token_row, train_size=train_size,
                     test_size=test_size, steps=total_steps, warmup=warmup, ema_decay=ema_decay,
                     attention_images=len(images))
    body = f"{notes}\n\n{table(teacher, rows, args.seeds)}\n\nWhole script: {minutes:.1f} min."
    print(body)
    if args.write:
        path = os.path.join(ROOT, "BENCHMARKS.md")
        with open(path) as f:
            text = f.read()
        write_atomic(path, replace_section(text, SECTION + "\n\n" + body).rstrip("\n"))
        log(f"wrote the section to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

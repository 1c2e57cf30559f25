"""From-scratch parity with timm: the same small ViT and ConViT trained by keras_vit and by timm.

    python experiments/timm_parity.py --write

The claim: keras_vit's models and trainer train as well as the reference
implementation. timm's ViT and ConViT (PyTorch, CPU; a test-only dependency,
imported from `runs/reference.py`) and keras_vit's, built with the same
sizes, trained with the same recipe on the same data in the same order with
the same seeds, should reach the same test accuracy within seed noise.

Setup: a class-balanced `--train_size` (default 6,000) of the Fashion-MNIST
training split, the first `--test_size` (default 10,000) test images; the
`fashion_mnist_vit` preset's sizes (7x7 patches, width 96, 6 blocks, 4 heads, MLP 192;
ConViT: `--num_gpsa_layers`, default 5, GPSA blocks, timm's
`local_up_to_layer`) and recipe: AdamW 1e-3 (decoupled weight decay 0.05
multiplied by the learning rate, as both frameworks do; not on biases, norms,
position embeddings, tokens and gates), warmup then cosine decay per step,
global-norm clipping at 1, label smoothing 0.1, flips, batch 128, `--epochs`
(default 10), warmup and EMA decay scaled to the run as in
`benchmarks/distillation.py`, and evaluation with the EMA weights.

- keras_vit: `train/main.py` in a subprocess, with `initialization` in
  `--model_kwargs`.
- timm: `timm.models.vision_transformer.VisionTransformer` and
  `timm.models.convit.ConVit` trained by a plain PyTorch loop here, fed the
  trainer's own batches (`train.pipeline.make_train_dataset`: the same order and
  flips for a seed) scaled as the keras_vit model's preprocessing layer scales
  them (ViT: [-1, 1]; ConViT: ImageNet mean/std); the learning rate of every
  step from the same `keras_vit.schedules.WarmupDecay`; `torch.optim.AdamW`
  (epsilon 1e-7, Keras'); the EMA as Keras' (the first step copies the weights).
  The initial weights differ (each framework draws its own).

`--initialization` (default both): keras_vit's `"vit"` (the ViT authors':
LeCun-normal patch kernel, Xavier-uniform kernels, zero head) is compared with
timm's ViT under `weight_init="jax"` (the same scheme), keras_vit's `"deit"`
(truncated normal 0.02) with timm's default (the same). timm's ConViT has one
initialization (DeiT's); it is trained once per seed and stands in both ConViT
rows.

Reading the result: "difference" is keras_vit's mean minus timm's, in points;
"/ s.e." divides it by its standard error from the seeds' spread. Parity holds
when the difference is within about two standard errors; two seeds give a
rough standard error, so a borderline row needs more seeds.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402

NAME = "timm_parity"
TITLE = "From-scratch parity with timm (ViT and ConViT)"
MODELS = ("vit", "convit")
INITIALIZATIONS = ("vit", "deit")
# timm's ViT initialization matching each of keras_vit's.
TIMM_VIT_INIT = {"vit": "jax", "deit": ""}
KERAS_EPSILON = 1e-7  # keras.optimizers.AdamW's default


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME)
    parser.add_argument("--models", type=common.choice_list("models", MODELS), default=list(MODELS),
                        help="comma-separated: vit, convit (default both)")
    parser.add_argument("--initialization", type=common.choice_list("initialization", INITIALIZATIONS),
                        default=list(INITIALIZATIONS),
                        help="comma-separated keras_vit initializations, vit and/or deit (default both)")
    parser.add_argument("--train_size", type=common.positive("train_size"), default=6000)
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--epochs", type=common.positive("epochs"), default=10)
    parser.add_argument("--num_gpsa_layers", type=int, default=None,
                        help="ConViT's GPSA blocks (default: all but the last block)")
    parser.add_argument("--torch_threads", type=common.positive("torch_threads"), default=1,
                        help="PyTorch's intra-op threads (default 1: on a busy 2-core machine two spinning "
                        "OpenMP threads ran 30 times slower than one)")
    args = parser.parse_args(argv)
    common.check_arguments(parser, args)
    common.import_reference("timm_parity.py")
    return args


# ---- the models -----------------------------------------------------------------------------


def keras_kwargs(args, model, initialization):
    base = dict(common.PRESET_MODEL, **(common.TINY_MODEL if args.tiny else {}), **(args.model_kwargs or {}))
    if model == "vit":
        return "VisionTransformer", dict(base, initialization=initialization)
    gpsa = args.num_gpsa_layers if args.num_gpsa_layers is not None else base["num_layers"] - 1
    return "ConViT", dict(base, initialization=initialization, num_gpsa_layers=gpsa)


def timm_model(timm, model, kwargs, initialization, num_classes):
    """timm's model of the keras_vit builder arguments `kwargs`, and its initialization's name."""
    common_args = dict(img_size=common.IMAGE_SIZE, patch_size=kwargs["patch_size"], in_chans=1,
                       num_classes=num_classes, depth=kwargs["num_layers"], num_heads=kwargs["num_heads"],
                       mlp_ratio=kwargs["mlp_dim"] / kwargs["hidden_size"])
    if model == "vit":
        init = TIMM_VIT_INIT[initialization]
        return (timm.models.vision_transformer.VisionTransformer(
            embed_dim=kwargs["hidden_size"], weight_init=init, **common_args), f"weight_init={init!r}")
    # timm's ConViT multiplies embed_dim by num_heads.
    return (timm.models.convit.ConVit(embed_dim=kwargs["hidden_size"] // kwargs["num_heads"],
                                      local_up_to_layer=kwargs["num_gpsa_layers"], **common_args),
            "DeiT's (timm's only)")


def input_scaling(builder, kwargs):
    """`(scale, offset)` of the keras_vit model's preprocessing layer: timm gets `x * scale + offset`."""
    model, _ = common.build(builder, kwargs)
    layer = model.get_layer("preprocessing")
    return (np.asarray(layer.scale, "float32").reshape(-1), np.asarray(layer.offset, "float32").reshape(-1),
            model.count_params())


# ---- the PyTorch loop -----------------------------------------------------------------------


def decay_groups(model, weight_decay):
    """AdamW's parameter groups: no decay for biases, norms, position embeddings, tokens and gates.

    The same set as the trainer's `train.optimization.NO_DECAY`: every 1-D
    parameter, `pos_embed` and `cls_token`.
    """
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim <= 1 or name in ("pos_embed", "cls_token") else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train_timm(torch, model, data_dir, seed, steps, batch_size, scaling, recipe):
    """Trains `model` with the trainer's batches and recipe; returns `(test accuracy with EMA weights, seconds)`."""
    from keras_vit.schedules import WarmupDecay
    from train import data, pipeline

    scale, offset = scaling
    train_source, test_source = data.fashion_mnist("train", data_dir), data.fashion_mnist("test", data_dir)
    steps_per_epoch = train_source.size // batch_size
    stream = pipeline.make_train_dataset(train_source, (common.IMAGE_SIZE,) * 2, batch_size, seed,
                                         common.PRESET.augmentation, end_epoch=math.ceil(steps / steps_per_epoch))
    schedule = WarmupDecay(common.PRESET.learning_rate, steps, min(recipe["warmup"], steps - 1),
                           common.PRESET.decay, common.PRESET.end_learning_rate)
    rates = np.asarray(schedule(np.arange(steps, dtype="float32")), "float64")
    optimizer = torch.optim.AdamW(decay_groups(model, common.PRESET.weight_decay), lr=rates[0],
                                  betas=(common.PRESET.adam_beta1, common.PRESET.adam_beta2), eps=KERAS_EPSILON)
    loss_function = torch.nn.CrossEntropyLoss(label_smoothing=common.PRESET.label_smoothing)
    parameters = list(model.parameters())
    average = [p.detach().clone() for p in parameters]

    def to_torch(images):
        return torch.from_numpy(np.ascontiguousarray((images * scale + offset).transpose(0, 3, 1, 2)))

    model.train()
    start = time.perf_counter()
    for step, (images, labels) in enumerate(stream.take(steps).as_numpy_iterator()):
        for group in optimizer.param_groups:
            group["lr"] = rates[step]
        loss = loss_function(model(to_torch(images)), torch.from_numpy(np.array(labels)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, common.PRESET.clip_norm)
        optimizer.step()
        with torch.no_grad():
            # Keras' EMA: the first step copies the weights, then a moving average.
            momentum = recipe["ema_decay"] if step else 0.0
            for mean, parameter in zip(average, parameters):
                mean.mul_(momentum).add_(parameter.detach(), alpha=1 - momentum)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        for mean, parameter in zip(average, parameters):
            parameter.copy_(mean)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        test = pipeline.make_eval_dataset(test_source, (common.IMAGE_SIZE,) * 2, batch_size)
        for images, labels in test.as_numpy_iterator():
            predictions = model(to_torch(images)).argmax(-1).numpy()
            correct += int((predictions == labels.argmax(-1)).sum())
            total += len(labels)
    return correct / total, seconds


# ---- the report -----------------------------------------------------------------------------


def table(rows, seeds):
    header = ["model", "keras_vit initialization", "timm initialization", "parameters (keras_vit / timm)",
              "keras_vit test accuracy", "timm test accuracy", "difference, points", "/ s.e.",
              f"keras_vit per seed ({', '.join(map(str, seeds))})", "timm per seed",
              "training s/run (keras_vit / timm)"]
    body = []
    for row in rows:
        ours, theirs = np.array(row["keras_vit"]), np.array(row["timm"])
        difference = 100 * (ours.mean() - theirs.mean())
        if len(seeds) > 1:
            error = 100 * math.sqrt(ours.var(ddof=1) / len(ours) + theirs.var(ddof=1) / len(theirs))
            ratio = f"{difference / error:+.1f}" if error > 0 else "n/a"
        else:
            ratio = "n/a (one seed)"
        body.append([row["model"], row["initialization"], row["timm_initialization"],
                     f"{row['parameters'][0]:,} / {row['parameters'][1]:,}", common.mean_and_spread(ours),
                     common.mean_and_spread(theirs), f"{difference:+.2f}", ratio, common.per_seed(ours),
                     common.per_seed(theirs), f"{np.mean(row['seconds'][0]):.0f} / {np.mean(row['seconds'][1]):.0f}"])
    return common.markdown_table(header, body)


def figure(rows, path):
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(1.8 * len(rows) + 2, 4))
    width = 0.35
    for offset, (key, label) in zip((-width / 2, width / 2), (("keras_vit", "keras_vit"), ("timm", "timm"))):
        x = np.arange(len(rows)) + offset
        ax.bar(x, [np.mean(row[key]) for row in rows], width, label=label, alpha=0.7)
        for xi, row in zip(x, rows):
            ax.scatter([xi] * len(row[key]), row[key], color="black", s=10, zorder=3)
    ax.set_xticks(np.arange(len(rows)))
    ax.set_xticklabels([f"{row['model']}\ninit {row['initialization']}" for row in rows])
    low = min(min(row["keras_vit"] + row["timm"]) for row in rows)
    ax.set_ylim(max(low - 0.05, 0), min(1.0, max(max(row["keras_vit"] + row["timm"]) for row in rows) + 0.02))
    ax.set_ylabel("Test accuracy (EMA weights; dots: seeds)")
    ax.set_title("keras_vit against timm, trained from scratch")
    ax.legend()
    fig.tight_layout()
    return common.save_figure(fig, path)


def notes(args, steps, batch_size, train_size, test_size, described, torch, timm):
    warmup, ema = common.scaled_schedule(steps)
    return (f"Data: a class-balanced {train_size} of the Fashion-MNIST training images, the first {test_size} test "
            f"images. Models: {described}. Recipe (both frameworks): the `fashion_mnist_vit` preset's "
            f"({common.PRESET.optimizer} {common.PRESET.learning_rate}, wd {common.PRESET.weight_decay}, clipping "
            f"{common.PRESET.clip_norm}, label smoothing {common.PRESET.label_smoothing}, augmentation "
            f"`{common.PRESET.augmentation}`), batch {batch_size}, {steps} steps, warmup {warmup}, EMA decay {ema}; "
            f"the same batches for a seed (seeds {', '.join(map(str, args.seeds))}). timm {timm.__version__}, "
            f"PyTorch {torch.__version__} (CPU, {torch.get_num_threads()} threads). Accuracy with the EMA weights.")


def main(argv=None):
    args = parse_args(argv)
    timm, torch = common.import_reference("timm_parity.py")
    torch.set_num_threads(args.torch_threads)
    started = time.perf_counter()
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    rows, timm_convit, described = [], {}, []
    with common.workdir(args.workdir, NAME) as work:
        data_dir = os.path.join(work, "data")
        train_size, test_size = common.write_slice(args.source_dir, data_dir, args.train_size, args.test_size)
        steps = (1 if args.tiny else args.epochs) * (train_size // batch_size)
        warmup, ema_decay = common.scaled_schedule(steps)
        recipe = {"warmup": warmup, "ema_decay": ema_decay}
        for model in args.models:
            for initialization in args.initialization:
                builder, kwargs = keras_kwargs(args, model, initialization)
                scale, offset, keras_parameters = input_scaling(builder, kwargs)
                described.append(f"{builder} " + ", ".join(f"{k} {v}" for k, v in kwargs.items()))
                row = {"model": "ViT" if model == "vit" else "ConViT", "initialization": initialization,
                       "keras_vit": [], "timm": [], "seconds": ([], [])}
                for seed in args.seeds:
                    common.log(NAME, f"keras_vit {builder} ({initialization}), seed {seed}: {steps} steps")
                    flags = [*common.model_flags(builder, kwargs), *common.recipe_flags(steps, batch_size, args.tiny)]
                    summary = common.train(os.path.join(work, f"keras_{model}_{initialization}", f"seed_{seed}"),
                                           data_dir, seed, flags)
                    common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
                    row["keras_vit"].append(summary["accuracy"])
                    row["seconds"][0].append(summary["train_seconds"])
                    if model == "convit" and seed in timm_convit:
                        accuracy, seconds, timm_init, timm_parameters = timm_convit[seed]
                    else:
                        torch.manual_seed(seed)
                        reference, timm_init = timm_model(timm, model, kwargs, initialization, 10)
                        timm_parameters = sum(p.numel() for p in reference.parameters())
                        common.log(NAME, f"timm {type(reference).__name__} ({timm_init}), seed {seed}: {steps} steps")
                        accuracy, seconds = train_timm(torch, reference, data_dir, seed, steps, batch_size,
                                                       (scale, offset), recipe)
                        common.log(NAME, f"  test accuracy {accuracy:.4f}, {seconds:.0f} s")
                        if model == "convit":
                            timm_convit[seed] = accuracy, seconds, timm_init, timm_parameters
                    row["timm"].append(accuracy)
                    row["seconds"][1].append(seconds)
                row["timm_initialization"] = timm_init
                row["parameters"] = (keras_parameters, timm_parameters)
                rows.append(row)
    path = figure(rows, args.figure)
    common.report(args, NAME, TITLE, argv,
                  notes(args, steps, batch_size, train_size, test_size, "; ".join(described), torch, timm),
                  table(rows, args.seeds), [path], started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

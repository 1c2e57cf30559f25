"""The training run: model, optimizer, data, fit with checkpoints, evaluation, export."""

import contextlib
import dataclasses
import json
import math
import os
import time

import keras

import keras_vit
from train import data as data_lib
from train.checkpoints import CheckpointManager, PreemptionCheckpoint, write_text_atomically
from train.export import export_saved_model, save_keras_atomically
from keras_vit.schedules import WarmupDecay

OPTIMIZERS = ("adamw", "sgd")
PRECISIONS = ("float32", "bfloat16")
GENERAL_BUILDERS = ("VisionTransformer", "ConViT")
# Not decayed: biases, normalization parameters, position embeddings, the class
# token and GPSA gates (the DeiT/timm convention; the ViT paper does not say).
NO_DECAY = ["bias", "gamma", "beta", "position_embedding", "token", "gating"]


class Throughput(keras.callbacks.Callback):
    """Training images per second, leaving out the first epoch (tracing and compilation).

    Steps are read from the optimizer's counter, so that `steps_per_execution`
    (one callback call per several steps) is counted right.
    """

    def __init__(self, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.epochs = []  # (steps, seconds) per epoch

    def _iterations(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._start_step = self._iterations()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append((self._iterations() - self._start_step, time.perf_counter() - self._start))

    @property
    def timed_steps(self):
        return sum(s for s, _ in (self.epochs[1:] or self.epochs))

    @property
    def images_per_second(self):
        seconds = sum(t for _, t in (self.epochs[1:] or self.epochs))
        return self.timed_steps * self.batch_size / seconds if seconds else float("nan")


def check_config(config):
    """Validates the settings a typo could break; raises ValueError naming the field."""
    choices = {"optimizer": OPTIMIZERS, "precision": PRECISIONS, "decay": ("linear", "cosine", "constant"),
               "augmentation": data_lib.AUGMENTATIONS}
    for field, accepted in choices.items():
        if getattr(config, field) not in accepted:
            raise ValueError(f"`{field}` must be one of {accepted}. Received: {field}={getattr(config, field)!r}")
    if config.model not in keras_vit.VARIANTS and config.model not in GENERAL_BUILDERS:
        raise ValueError(
            f"`model` must be a builder name, one of {sorted(keras_vit.VARIANTS) + list(GENERAL_BUILDERS)}. "
            f"Received: model={config.model!r}"
        )
    for field in ("batch_size", "epochs", "steps_per_execution"):
        value = getattr(config, field)
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"`{field}` must be a positive integer. Received: {field}={value!r}")


def build_model(config, num_classes, image_size, channels):
    """The configured model, with pretrained weights loaded (and resampled) if asked."""
    kwargs = dict(config.model_kwargs)
    kwargs.update(image_size=image_size, num_classes=num_classes, num_channels=channels)
    if config.dropout_rate:
        kwargs["dropout_rate"] = config.dropout_rate
    if config.drop_path_rate:
        kwargs["drop_path_rate"] = config.drop_path_rate
    if config.precision == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    if config.remat:
        kwargs["remat"] = True
    if config.model in GENERAL_BUILDERS:
        model = getattr(keras_vit, config.model)(**kwargs)
    else:
        model = keras_vit.build_variant(config.model, **kwargs)
    report = None
    if config.pretrained:
        report = keras_vit.load_weights(model, config.pretrained)
    return model, report


def make_optimizer(config, total_steps):
    schedule = WarmupDecay(
        peak=config.learning_rate,
        total_steps=total_steps,
        warmup_steps=min(config.warmup_steps, total_steps - 1),
        decay=config.decay,
        end=config.end_learning_rate,
    )
    common = dict(
        learning_rate=schedule,
        global_clipnorm=config.clip_norm,
        use_ema=config.ema_decay is not None,
        ema_momentum=config.ema_decay if config.ema_decay is not None else 0.99,
    )
    if config.optimizer == "adamw":
        optimizer = keras.optimizers.AdamW(
            weight_decay=config.weight_decay, beta_1=config.adam_beta1, beta_2=config.adam_beta2, **common
        )
    else:
        optimizer = keras.optimizers.SGD(
            momentum=config.momentum, weight_decay=config.weight_decay or None, **common
        )
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    return optimizer


def train(config, workdir, strategy=None, verbose="auto"):
    """Runs (or resumes) the configured training in `workdir`.

    Returns:
        A dict summary: accuracy, images/s, steps, whether the run was
        preempted, and the paths written.
    """
    check_config(config)
    os.makedirs(workdir, exist_ok=True)
    write_text_atomically(os.path.join(workdir, "config.json"), json.dumps(dataclasses.asdict(config), indent=2))
    keras.utils.set_random_seed(config.seed)

    train_source = data_lib.load_source(config.dataset, config.train_split, config.data_dir)
    eval_source = data_lib.load_source(config.dataset, config.eval_split, config.data_dir)
    image_size = config.image_size or train_source.native_size or 224
    image_size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    if config.batch_size % replicas:
        raise ValueError(
            f"`batch_size` (global) must be divisible by the {replicas} replicas. "
            f"Received: batch_size={config.batch_size}"
        )
    steps_per_epoch = train_source.size // config.batch_size
    total_steps = config.steps or config.epochs * steps_per_epoch

    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model, report = build_model(config, train_source.num_classes, image_size, train_source.channels)
        model.compile(
            optimizer=make_optimizer(config, total_steps),
            loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=config.label_smoothing),
            metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")],
            jit_compile=config.jit_compile,
            steps_per_execution=config.steps_per_execution,
        )
        manager = CheckpointManager(os.path.join(workdir, "checkpoints"))
        start_step = manager.restore(model)

    tpu = strategy is not None and "TPU" in type(strategy).__name__
    eval_batch = config.eval_batch_size or config.batch_size
    eval_ds = data_lib.make_eval_dataset(eval_source, image_size, eval_batch, drop_remainder=tpu)
    checkpointing = PreemptionCheckpoint(manager, config.checkpoint_every_steps, total_steps)
    checkpointing.install_signal_handler()
    throughput = Throughput(config.batch_size)
    start = time.perf_counter()
    history = {}
    if start_step < total_steps:
        start_epoch, skip = divmod(start_step, steps_per_epoch)
        train_ds = data_lib.make_train_dataset(
            train_source, image_size, config.batch_size, config.seed, config.augmentation,
            start_epoch=start_epoch, skip_batches=skip,
            end_epoch=math.ceil(total_steps / steps_per_epoch) + 1, randaugment=config.randaugment,
            mixup=config.mixup, cutmix=config.cutmix,
        )
        callbacks = [checkpointing, throughput, keras.callbacks.TensorBoard(os.path.join(workdir, "logs"))]
        if config.ema_decay is not None:
            callbacks.append(keras.callbacks.SwapEMAWeights(swap_on_epoch=False))
        history = model.fit(
            train_ds,
            epochs=math.ceil(total_steps / steps_per_epoch),
            initial_epoch=start_step // steps_per_epoch,
            steps_per_epoch=steps_per_epoch,
            validation_data=eval_ds,
            callbacks=callbacks,
            verbose=verbose,
        ).history
    step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    summary = {
        "history": {key: [float(v) for v in values] for key, values in history.items()},
        "workdir": os.path.abspath(workdir),
        "resumed_from_step": start_step,
        "step": step,
        "total_steps": total_steps,
        "preempted": checkpointing.preempted,
        "images_per_second": throughput.images_per_second,
        "timed_steps": throughput.timed_steps,
        "train_seconds": time.perf_counter() - start,
        "skipped_images": train_source.skipped.count if train_source.skipped else 0,
        "load_report": None if report is None else report.table(),
    }
    if checkpointing.preempted:
        return summary
    # fit() has assigned the EMA weights to the model if EMA is on: evaluation
    # and export use the averaged weights.
    results = model.evaluate(eval_ds, verbose=0, return_dict=True)
    summary["accuracy"] = float(results["accuracy"])
    summary["loss"] = float(results["loss"])
    summary["model_path"] = os.path.join(workdir, "model.keras")
    summary["saved_model_path"] = os.path.join(workdir, "saved_model")
    save_keras_atomically(model, summary["model_path"])
    export_saved_model(model, summary["saved_model_path"])
    write_text_atomically(os.path.join(workdir, "summary.json"), json.dumps(summary, indent=2))
    return summary

"""The training run: model, optimizer, data, fit with checkpoints, evaluation, export."""

import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import time

import keras

import keras_vit
from keras_vit import export
from keras_vit.files import exists, open_file, write_text_atomically
from keras_vit.layers import attention_kernels, code_path
from train import data as data_lib
from train import files
from train import pipeline
from train.analysis_logging import AnalysisLogger, check_model_supports, parse_analyses
from train.callbacks import SynchronousBatchEnds, Throughput, needs_synchronous_batch_ends
from train.checkpoints import CheckpointManager, PreemptionCheckpoint
from train.checks import check_batch_fits, check_config
from train.modeling import build_model, mirror_averaged
from train.optimization import fit_to_run, make_optimizer
from train.strategy import JaxDistribution, barrier, is_chief
from train.workdir import check_workdir, check_workdir_lock, prepare_workdir

def use_average_weights(model):
    """Replaces the model's trainable weights by the optimizer's EMA (Polyak) averages.

    Evaluation and export then use the averaged weights. Each weight gets a
    buffer of its own: `finalize_variable_values` assigns the average's own
    array, and on JAX a later jitted call that donates one of the two variables
    would delete the array under the other (the "Array has been deleted" error
    of saving after training).
    """
    model.optimizer.finalize_variable_values(model.trainable_variables)
    for variable in model.trainable_variables:
        variable.assign(keras.ops.convert_to_numpy(variable))


def _train_dataset(strategy, config, source, image_size, steps_per_epoch, total_steps, start_step):
    """The training batches from `start_step` on; under a `tf.distribute` strategy, one pipeline per host.

    Each input pipeline (worker, TPU host) reads only its slice of every global
    batch (`distribute_datasets_from_function`); batch sizes stay global.
    """
    start_epoch, skip = divmod(start_step, steps_per_epoch)

    def make(input_context=None):
        return pipeline.make_train_dataset(
            source, image_size, config.batch_size, config.seed, config.augmentation,
            start_epoch=start_epoch, skip_batches=skip,
            end_epoch=math.ceil(total_steps / steps_per_epoch) + 1, randaugment=config.randaugment,
            mixup=config.mixup, cutmix=config.cutmix, input_context=input_context,
            random_erasing=config.random_erasing, repeated_augmentation=config.repeated_augmentation,
            mixing_group=config.mixing_group,
        )

    if strategy is None or isinstance(strategy, JaxDistribution):
        return make()  # keras.distribution shards the global batches over the devices
    if strategy.num_replicas_in_sync == 1 and not uses_tpu(strategy):
        return make()
    return strategy.distribute_datasets_from_function(make)


def _first_images(source, image_size, count):
    """The first `count` evaluation images, as the model takes them (numpy)."""
    dataset = pipeline.make_eval_dataset(source, image_size, count, drop_remainder=False)
    images, _ = next(iter(dataset))
    return images.numpy()


@contextlib.contextmanager
def _failed_writes_named(manager, workdir):
    """A failed write (a full or read-only disk) stops the run as an `OSError` naming the file and the reason.

    Whoever failed (h5py, Orbax's TensorStore, TensorFlow's SavedModel
    writer) the error reads the same (`files.os_errors`), and the user
    learns which checkpoint the next run resumes from. A permission error
    counts as a failed write only on a file under `workdir` (made read-only
    under the run), so that a failed read of the data keeps its own error.
    """
    try:
        with files.os_errors(writes_under=workdir):
            yield
    except OSError as error:
        if error.errno in files.WRITE_FAILURES or (
                error.errno in files.PERMISSION_FAILURES and files.as_os_error(error, writes_under=workdir)):
            try:
                kept = manager.checkpoints()
            except Exception:  # noqa: BLE001 - the disk's own error is the one to report
                kept = None
            if kept is not None:
                where = (f"its newest complete checkpoint, {kept[-1][1]!r}, is kept" if kept
                         else "no checkpoint had been written yet")
                print(f"The run stopped on a failed write; {where}. Make room (or make the workdir writable) and "
                      "run the same command to resume.", file=sys.stderr, flush=True)
        raise


def _finished_runs_history(workdir):
    """The per-epoch history that a finished run recorded in its `summary.json`, or `{}`.

    Run again on a finished workdir (a notebook's "Run all" twice), the trainer
    restores the last step and trains nothing; its summary then carries the
    finished run's history, so that whatever plots it still has its curves.
    """
    path = os.path.join(workdir, "summary.json")
    if not exists(path):
        return {}  # killed before the end: no summary, no curves to give
    try:
        with open_file(path) as f:
            history = json.load(f)["history"]
        return {str(key): [float(v) for v in values] for key, values in history.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # not a summary of ours: no curves to give


def checkpoint_manager(directory, chief):
    """Orbax-written checkpoints on JAX (sharded, multi-host, asynchronous); Keras' files on TensorFlow."""
    if keras.backend.backend() == "jax":
        from train.orbax_checkpoints import OrbaxCheckpointManager

        return OrbaxCheckpointManager(directory)
    return CheckpointManager(directory, writer=chief)


def uses_tpu(strategy):
    return strategy is not None and "TPU" in type(strategy).__name__


def _activate(strategy, config, source, image_size):
    """Sets the `keras.distribution` of a JAX run (FSDP reads its layouts off a template model)."""
    if not isinstance(strategy, JaxDistribution):
        return
    template = None
    if strategy.kind == "fsdp":
        template, _ = build_model(dataclasses.replace(config, pretrained=None), source.num_classes, image_size,
                                  source.channels)
        # The template drew initial weights: seed again, so that the model trained
        # starts from the weights an unsharded run starts from.
        keras.utils.set_random_seed(config.seed)
    strategy.activate(template)


def train(config, workdir, strategy=None, verbose="auto", break_lock=False):
    """Runs (or resumes) the configured training in `workdir`.

    The run holds the workdir's lock (`train.workdir.WorkdirLock`) from its
    first write until it returns or raises. If another run takes the lock
    over meanwhile, this one raises `WorkdirLockLostError` before its next
    checkpoint or export, leaving the workdir to that run.

    Args:
        config: `TrainConfig`.
        workdir: str. A local folder or a remote one (`gs://...`).
        strategy: a `tf.distribute` strategy, a `JaxDistribution`, or None.
        verbose: `model.fit`'s verbosity. Defaults to `"auto"`.
        break_lock: bool. Take over the workdir's lock even if another host
            may still hold it (`--break_workdir_lock`). Defaults to `False`.

    Returns:
        A dict summary: accuracy, images/s, steps, whether the run was
        preempted, the layers' code path and attention kernels, and the
        paths written.

    Raises:
        ValueError: for a configuration `check_config` refuses, before
            anything is built or written.
    """
    check_config(config)
    return train_checked(config, workdir, strategy, verbose, break_lock)


def train_checked(config, workdir, strategy=None, verbose="auto", break_lock=False):
    """`train` for a configuration that `check_config` has already passed.

    `train/main.py` checks every flag before it builds the strategy (a TPU or a
    multi-worker job takes a while to start), and runs through here so that the
    configuration is checked once.
    """
    with contextlib.ExitStack() as held:
        return _train(config, workdir, strategy, verbose, break_lock, held)


def _train(config, workdir, strategy, verbose, break_lock, held):
    # In a multi-worker job only the chief writes the workdir (and holds its lock);
    # the others read its checkpoints (the workdir is shared) once it has tidied
    # them. Nothing is written before everything that can refuse the run has run
    # (lock, data, model, teacher, analyses), so a refused run leaves the workdir
    # as it found it.
    chief = is_chief(strategy)
    # The attention kernels this run's traces take (the count is the process's).
    kernels_before = attention_kernels()
    check_workdir(workdir, config)
    if chief:
        check_workdir_lock(workdir, break_lock)
    keras.utils.set_random_seed(config.seed)

    train_source = data_lib.load_source(config.dataset, config.train_split, config.data_dir, config.image_channels)
    eval_source = data_lib.load_source(config.dataset, config.eval_split, config.data_dir, config.image_channels)
    image_size = config.image_size or train_source.native_size or 224
    image_size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    if config.batch_size % replicas:
        raise ValueError(
            f"`batch_size` (global) must be divisible by the {replicas} replicas. "
            f"Received: batch_size={config.batch_size}"
        )
    check_batch_fits(config, train_source.size)
    steps_per_epoch = train_source.size // config.batch_size
    total_steps = config.steps or config.epochs * steps_per_epoch
    _, _, fitted = fit_to_run(config, total_steps)
    if chief:
        for note in fitted:
            print(f"note: {note}", flush=True)
    _activate(strategy, config, train_source, image_size)

    def scope():
        return strategy.scope() if strategy is not None else contextlib.nullcontext()

    with scope():
        model, report = build_model(config, train_source.num_classes, image_size, train_source.channels)
        student = model
        if config.objective == "classification" and tuple(model.output_shape) != (None, train_source.num_classes):
            # Before the first write: a model of features, not logits, would fail in the first step.
            raise ValueError(
                f"--model={config.model} returns {tuple(model.output_shape)}, not the logits of the dataset's "
                f"{train_source.num_classes} classes (None, {train_source.num_classes}): drop include_top=False "
                f"from --model_kwargs. Received: model_kwargs={config.model_kwargs!r}"
            )
        if config.teacher is not None:
            from train.distillation import Distiller
            from train.teachers import load_teacher

            # Inside the strategy scope: the teacher's variables are placed like the student's.
            teacher = load_teacher(config.teacher, config.teacher_weights, num_classes=train_source.num_classes,
                                   image_size=image_size, channels=train_source.channels)
            # Checkpoints hold the Distiller (student, optimizer, and the frozen teacher);
            # evaluation and the exports are the student's alone.
            model = Distiller(student, teacher, config.distillation, tau=config.distillation_tau,
                              alpha=config.distillation_alpha)
        if config.objective == "masked_patch_prediction":
            # Checkpoints hold the pretrainer (encoder, [mask] embedding, prediction head);
            # the exports are the encoder alone, to fine-tune. Labels are ignored.
            model = keras_vit.MaskedPatchPrediction(student, target=config.mpp_target,
                                                    corruption_rate=config.mpp_corruption_rate, seed=config.seed)
            supervision = {}
        else:
            supervision = dict(
                loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=config.label_smoothing),
                metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")],
            )
        model.compile(
            optimizer=make_optimizer(config, total_steps),
            jit_compile=config.jit_compile,
            steps_per_execution=config.steps_per_execution,
            **supervision,
        )
        # The optimizer's variables (moments, EMA averages) made here, eagerly. Left to Keras, on
        # TensorFlow without a strategy it makes them while tracing the first step, each with a
        # guard `tf.cond` whose two branch functions stay registered in the process for good
        # (about 130 per run of a tiny ViT; later tracing and SavedModel exports in the same
        # process slow down with them).
        model.optimizer.build(model.trainable_variables)
        analyses = parse_analyses(config.log_analysis)
        if analyses:
            check_model_supports(student, analyses)
        eval_transform = pipeline.evaluation_transform(image_size, config.pretrained, config.eval_crop,
                                                       eval_source.channels, model=config.model)
        per_replica = config.batch_size // replicas
        if config.mixing_group and config.mixing_group < per_replica and per_replica % config.mixing_group:
            raise ValueError(f"--mixing_group must divide the batch of each of the {replicas} replicas "
                             f"({per_replica}). Received: mixing_group={config.mixing_group}")
        # The first write: every check above has passed.
        lock = None
        if chief:
            lock = prepare_workdir(workdir, config, break_lock)
            held.callback(lock.release)
        manager = checkpoint_manager(os.path.join(workdir, "checkpoints"), chief)
        # Once another run has taken the workdir over, no checkpoint is saved or committed.
        manager.check_held = lock.check_held if lock is not None else None
        if chief:
            manager.set_aside_damaged()
        barrier(strategy)
        start_step = manager.restore(model)

        # TPUs and a batch split over devices need every batch whole (static shapes).
        whole_batches = replicas > 1 or uses_tpu(strategy)
        eval_batch = config.eval_batch_size or config.batch_size
        eval_ds = pipeline.make_eval_dataset(eval_source, image_size, eval_batch, drop_remainder=whole_batches,
                                             transform=eval_transform)
        checkpointing = PreemptionCheckpoint(manager, config.checkpoint_every_steps, total_steps)
        throughput = Throughput(config.batch_size)
        # The final evaluation below needs it too.
        synchronous = [SynchronousBatchEnds()] if needs_synchronous_batch_ends(strategy) else []
        callbacks = [checkpointing, throughput, *synchronous]
        if chief:
            callbacks.append(keras.callbacks.TensorBoard(os.path.join(workdir, "logs")))
        if analyses and chief:
            callbacks.append(AnalysisLogger(
                student, analyses, _first_images(eval_source, image_size, config.analysis_images),
                logdir=os.path.join(workdir, "logs", "analysis"),
                history_path=os.path.join(workdir, "analysis.json"),
            ))
        start = time.perf_counter()
        history = {}
        if start_step < total_steps:
            train_ds = _train_dataset(strategy, config, train_source, image_size, steps_per_epoch, total_steps,
                                      start_step)
            checkpointing.install_signal_handler()
            try:
                with _failed_writes_named(manager, workdir):
                    try:
                        history = model.fit(
                            train_ds,
                            epochs=math.ceil(total_steps / steps_per_epoch),
                            initial_epoch=start_step // steps_per_epoch,
                            steps_per_epoch=steps_per_epoch,
                            validation_data=eval_ds,
                            callbacks=callbacks,
                            verbose=verbose,
                            # The tf.data pipeline shuffles (by seed and step, so resume is exact);
                            # Keras' own shuffle does not apply to a dataset and would only warn.
                            shuffle=False,
                        ).history
                    finally:
                        manager.finish()  # the last save in flight (JAX: Orbax writes in the background)
            finally:
                checkpointing.restore_signal_handler()
        else:
            history = _finished_runs_history(workdir)
    summary = {
        "history": {key: [float(v) for v in values] for key, values in history.items()},
        "workdir": files.absolute(workdir),
        "resumed_from_step": start_step,
        "resumed_from": manager.restored_from,
        "step": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "total_steps": total_steps,
        "preempted": checkpointing.preempted,
        "images_per_second": throughput.images_per_second,
        "timed_steps": throughput.timed_steps,
        "train_seconds": time.perf_counter() - start,
        "skipped_images": train_source.skipped.count if train_source.skipped else 0,
        "load_report": None if report is None else report.table(),
        "eval_images": eval_source.size - (eval_source.size % eval_batch if whole_batches else 0),
        # Which path the layers took in training (the lean backward on a GPU or TPU), and
        # the attention kernel of each step this run traced: "cudnn" on a GPU, or a
        # fallback whose warning said why.
        "code_path": code_path(),
        # The preset's warmup or EMA fitted to a run shorter than them (`fit_to_run`), one line each.
        "fitted_to_run": fitted,
        "attention_kernels": {kernel: count - kernels_before.get(kernel, 0)
                              for kernel, count in attention_kernels().items()
                              if count > kernels_before.get(kernel, 0)},
    }
    if checkpointing.preempted:
        return summary
    if model.optimizer.use_ema:
        use_average_weights(model)
    served = student
    with scope():
        results = model.evaluate(eval_ds, verbose=0, return_dict=True, callbacks=synchronous)
        if config.eval_flip:
            summary["one_view_accuracy"] = float(results["accuracy"])
            served = mirror_averaged(student)
            served.compile(loss=supervision["loss"], metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")],
                           jit_compile=config.jit_compile)
            results = served.evaluate(eval_ds, verbose=0, return_dict=True, callbacks=synchronous)
    # Masked patch prediction has no accuracy: its loss is the pretraining objective's.
    summary["accuracy"] = float(results["accuracy"]) if "accuracy" in results else None
    summary["objective"], summary["chief"] = config.objective, chief
    # Label k's name is the k-th (an image folder's: its sorted subfolder names); labels.txt too.
    classified = config.objective == "classification"
    summary["class_names"] = [str(name) for name in train_source.class_names or ()] if classified else None
    # What the SavedModel applies to each photo (1 or 3 channels), for EvalTransform in train/export.py.
    summary["eval_transform"] = dataclasses.asdict(eval_transform.config) if eval_transform.config else None
    summary["channels"], summary["loss"] = eval_source.channels, float(results["loss"])
    # Every worker saves (under MultiWorkerMirroredStrategy saving runs collective ops that all must
    # join); only the chief's files are kept, each written only while the workdir is still this run's.
    check_held = lock.check_held if lock is not None else (lambda: None)
    with contextlib.ExitStack() as stack, _failed_writes_named(manager, workdir):
        folder = workdir if chief else stack.enter_context(tempfile.TemporaryDirectory(prefix="keras_vit-scratch-"))
        model_path, saved_model_path = os.path.join(folder, "model.keras"), os.path.join(folder, "saved_model")
        check_held()
        export.keras_file(student, model_path)
        check_held()
        export.saved_model(served, saved_model_path, image_transform=eval_transform)  # photos of any size
        if chief:
            summary["model_path"], summary["saved_model_path"] = model_path, saved_model_path
            summary["labels_path"] = os.path.join(workdir, "labels.txt") if summary["class_names"] else None
            if summary["labels_path"]:
                check_held()
                write_text_atomically(summary["labels_path"], "".join(f"{name}\n" for name in summary["class_names"]))
            check_held()
            write_text_atomically(os.path.join(workdir, "summary.json"), json.dumps(summary, indent=2))
    return summary

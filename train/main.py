"""Train a keras_vit model: `python train/main.py [--tpu] [--config=NAME] [flags]`.

With no flags it trains the `default` preset on Fashion-MNIST on the CPU: the hybrid
of the ViT paper (Sec. 3.1) in miniature, BiT's ResNet root feeding a small ViT
(width 96, 6 blocks, 4 heads) with the 2x2 patches of its 8x8 map.
Every field of `train.configs.TrainConfig` is a flag that overrides the preset;
`--model_kwargs` takes JSON (e.g. '{"num_layers": 4}'), merged into the preset's.
"""

import time

# The summary's wall time counts from here: process start, before TensorFlow and Keras load.
_START = time.monotonic()

import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

# `python train/main.py` puts train/ on sys.path; the trainer's modules import
# as `train.*`, so the repository root goes there too.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the TPU path; JAX works too
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from train.cpu_allocator import use_bfc_cpu_allocator  # noqa: E402

# Before anything imports TensorFlow, which reads the variable once.
use_bfc_cpu_allocator()

from absl import app, flags  # noqa: E402

from train.configs import PRESETS, TrainConfig, get_config  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("config", "default", f"Preset, one of {sorted(PRESETS)}.")
flags.DEFINE_string("workdir", "workdir", "Checkpoints, TensorBoard logs, model.keras, saved_model.")
flags.DEFINE_bool("break_workdir_lock", False, "Take over the workdir's lock.json although the run on another host "
                  "that it names may still be alive (do so only once sure that run is gone: two runs writing one "
                  "workdir corrupt its checkpoints). A lock of this host's gone process, or one unrefreshed for 15 "
                  "minutes, is taken over without it.")
flags.DEFINE_bool("tpu", False, "Train on the TPU of this Colab runtime or TPU VM (TPUStrategy).")
flags.DEFINE_string("tpu_name", None, "Train on a named or remote TPU (name or grpc://host:port; TensorFlow).")
flags.DEFINE_string("strategy", "auto", "TensorFlow: 'multi_worker' (MultiWorkerMirroredStrategy over the workers of "
                    "TF_CONFIG; run the same command on each), 'mirrored' (every local GPU), or 'auto' (TPUStrategy "
                    "with --tpu, MirroredStrategy over several GPUs, else one device).")
flags.DEFINE_bool("multihost", False, "JAX: join the other hosts of the job first (keras.distribution.initialize: "
                  "found by itself on a TPU pod slice, else from KERAS_DISTRIBUTION_JOB_ADDRESSES, _NUM_PROCESSES and "
                  "_PROCESS_ID); run the same command on every host.")
flags.DEFINE_string("distribution", "auto", "JAX: 'data' (DataParallel), 'fsdp' (ModelParallel, large kernels "
                    "sharded over the model axis) or 'auto' (data parallel over every device).")
flags.DEFINE_bool("dry_run", False, "Check every flag and the workdir as a run would, print the resolved "
                  "configuration and exit (status 0, or 2 with the first error) without touching a device, the data "
                  "or the workdir.")
flags.DEFINE_string("jax_compilation_cache", os.path.join("~", ".cache", "keras_vit", "jax"),
                    "JAX: the folder where compiled steps are kept between runs, so that a resumed or repeated run "
                    "skips their compilation; '' turns it off. Unless given, JAX_COMPILATION_CACHE_DIR is used if set.")
flags.DEFINE_string("mesh", None, "JAX: the device mesh, 'batch:N,model:M' (default: every device on the batch axis; "
                    "for fsdp, every device on the model axis).")

_FLAG_TYPES = {int: flags.DEFINE_integer, float: flags.DEFINE_float, bool: flags.DEFINE_bool, str: flags.DEFINE_string}
# What --help says of the flags whose values need more than the field's name.
_HELP = {
    "model_kwargs": "JSON dict of builder arguments, merged into the preset's.",
    "dataset": "Overrides the preset's dataset: 'fashion_mnist', 'synthetic', a TFDS name (with --data_dir), or "
               "an image folder 'folder:/path' holding <split>/<class name>/<image files> (any size, JPEG, PNG, "
               "BMP, GIF or WebP; unreadable files are skipped and counted), e.g. photos/train/cat/1.jpg and "
               "photos/validation/cat/2.jpg. Classes are the sorted folder names, recorded in the workdir.",
    "image_channels": "An image folder's channels: 3 (RGB, the default) or 1 (grayscale, Pillow's luma), e.g. to "
                      "fine-tune the main job's model of gray Fashion-MNIST images on a folder of photos.",
    "train_split": "Overrides the preset's train_split: a TFDS split, or the image folder's training subfolder.",
    "eval_split": "Overrides the preset's eval_split: a TFDS split, or the image folder's evaluation subfolder (by "
                  "default the first of validation, val and test that it has).",
    "ema_decay": "Overrides the preset's ema_decay: the weights' moving average used for evaluation and export; 0 "
                 "turns it off. A run shorter than its horizon 1 / (1 - decay) averages over a tenth of the run.",
}
for _field in dataclasses.fields(TrainConfig):
    _type = {"int": int, "float": float, "bool": bool, "str": str}.get(str(_field.type), _field.type)
    if _field.name == "model_kwargs":
        _type = str
    _FLAG_TYPES.get(_type, flags.DEFINE_string)(
        _field.name, None, _HELP.get(_field.name, f"Overrides the preset's {_field.name}.")
    )


def parse_model_kwargs(text):
    """`--model_kwargs` as a dict; a one-line `ValueError` for anything but a JSON object."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(
            f"--model_kwargs must be a JSON object, e.g. '{{\"patch_size\": 4}}' ({error}). "
            f"Received: model_kwargs={text!r}"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"--model_kwargs must be a JSON object, e.g. '{{\"patch_size\": 4}}'. "
                         f"Received: model_kwargs={text!r}")
    return value


def config_from_flags():
    """The preset named by `--config`, with every flag that was given applied to it."""
    config = get_config(FLAGS.config)
    if FLAGS.model is not None and FLAGS.model != config.model:
        # The preset's builder arguments belong to its model (a ViT's hidden_size means
        # nothing to Swin_T, and would silently resize ViT_B16): another model starts from its own.
        config.model_kwargs = {}
    for field in dataclasses.fields(TrainConfig):
        value = getattr(FLAGS, field.name)
        if value is None:
            continue
        if field.name == "model_kwargs":
            value = {**config.model_kwargs, **parse_model_kwargs(value)}
        setattr(config, field.name, value)
    return config


def format_duration(seconds):
    """`seconds` as "9 min 41 s" (or "41 s")."""
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def describe_os_error(error, workdir):
    """One line for a file-system error: what failed, where, and the system's reason."""
    where = f" {error.filename!r}" if error.filename else ""
    inside = ""
    root = os.path.abspath(workdir)
    if error.filename and os.path.commonpath([os.path.abspath(str(error.filename)), root]) == root:
        inside = f" (in --workdir {workdir!r}: is it read-only or full?)"
    reason = error.strerror or str(error) or type(error).__name__
    return f"cannot read or write{where}: {reason}{inside}"


def use_jax_compilation_cache(folder, given):
    """Keeps JAX's compiled programs in `folder` ('' keeps none); unless `given`, JAX_COMPILATION_CACHE_DIR wins.

    A compiled training step is keyed by its program, the compiler options and
    the JAX version, so a run resumed after preemption, or the same model
    trained again, loads it instead of compiling it (XLA:CPU's and XLA:TPU's
    compilations take seconds to minutes). Programs that compile in under a
    second are not kept (JAX's default threshold).
    """
    import jax

    if not given:
        folder = os.environ.get("JAX_COMPILATION_CACHE_DIR", folder)
    if folder:
        jax.config.update("jax_compilation_cache_dir", os.path.expanduser(folder))


def main(argv):
    del argv
    import keras

    from keras_vit.weights import CheckpointDownloadError
    from train.checks import check_config
    from train.data import DataUnavailableError
    from train.strategy import TPUUnavailableError, check_strategy_flags, get_strategy, worker_failure
    from train.trainer import train_checked
    from train.workdir import check_workdir

    try:
        # Every flag and the workdir are checked before anything runs or is written.
        config = config_from_flags()
        check_config(config)
        check_strategy_flags(FLAGS.tpu, FLAGS.tpu_name, FLAGS.distribution, FLAGS.mesh, FLAGS.strategy,
                             FLAGS.multihost)
        check_workdir(FLAGS.workdir, config)
        if FLAGS.dry_run:
            print(json.dumps(dataclasses.asdict(config), indent=2, sort_keys=True))
            print(f"Dry run: the flags and --workdir={FLAGS.workdir} are valid on the {keras.backend.backend()} "
                  "backend; nothing was trained or written.", flush=True)
            return 0
        if keras.backend.backend() == "jax":
            use_jax_compilation_cache(FLAGS.jax_compilation_cache, FLAGS["jax_compilation_cache"].present)
        strategy = get_strategy(FLAGS.tpu, FLAGS.tpu_name, FLAGS.distribution, FLAGS.mesh, FLAGS.strategy,
                                FLAGS.multihost)
        where = (strategy.describe() if hasattr(strategy, "describe")
                 else f"{type(strategy).__name__} with {strategy.num_replicas_in_sync} replica(s)")
        print(f"keras_vit training: model={config.model} dataset={config.dataset} "
              f"backend={keras.backend.backend()} on {where}, workdir={FLAGS.workdir}", flush=True)
        summary = train_checked(config, FLAGS.workdir, strategy, break_lock=FLAGS.break_workdir_lock)
    except (ValueError, TPUUnavailableError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (DataUnavailableError, CheckpointDownloadError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"error: {describe_os_error(error, FLAGS.workdir)}", file=sys.stderr)
        return 1
    except Exception as error:  # noqa: BLE001 - TensorFlow's errors have no common import here
        failure = worker_failure(error)
        if failure is None and "://" in str(FLAGS.workdir) and type(error).__module__.startswith("tensorflow"):
            # tf.io.gfile's errors on gs:// and the like (permission, missing bucket).
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            print(f"error: cannot read or write in --workdir {FLAGS.workdir!r}: {first_line}", file=sys.stderr)
            return 1
        if failure is None:
            raise
        checkpoints = os.path.join(FLAGS.workdir, "checkpoints")
        print(f"error: {failure}; this worker stops too. Run the same command on every worker again to resume "
              f"from the last checkpoint in {checkpoints}.", file=sys.stderr)
        return 1
    if summary["resumed_from"]:
        print(f"Resumed from {summary['resumed_from']} (step {summary['resumed_from_step']}).", flush=True)
    if summary["load_report"]:
        print(summary["load_report"])
    if summary["preempted"]:
        print(f"Preempted: checkpoint written at step {summary['step']} of {summary['total_steps']}. "
              "Run the same command to resume.", flush=True)
        return 143
    speed = (f"{summary['images_per_second']:.0f} images/s" if summary["timed_steps"]
             else "n/a (the workdir's run was already complete)")
    if summary["accuracy"] is None:  # masked patch prediction: no labels, no accuracy
        result = f"  pretraining loss  {summary['loss']:.4f} (masked patch prediction, on the test images)\n"
        serves = "(the encoder; its head is untrained: fine-tune before serving)"
    elif "one_view_accuracy" in summary:  # --eval_flip
        result = (f"  test accuracy     {summary['accuracy']:.4f} (each image and its mirror image averaged, "
                  f"--eval_flip; one view: {summary['one_view_accuracy']:.4f})\n")
        serves = ("(serve: uint8 photos of any size -> probabilities of each image's and its mirror image's logits "
                  "averaged)")
    else:
        result = f"  test accuracy     {summary['accuracy']:.4f}\n"
        serves = "(serve: uint8 photos of any size -> probabilities)"
    if not summary["chief"]:
        print(f"\nDone (a non-chief worker: the chief writes checkpoints, logs and the exported model).\n"
              f"{result}"
              f"  steps             {summary['step']} (resumed from {summary['resumed_from_step']})", flush=True)
        return 0
    print(
        "\nDone.\n"
        f"{result}"
        f"  training speed    {speed}\n"
        f"  steps             {summary['step']} (resumed from {summary['resumed_from_step']})\n"
        f"  wall time         {format_duration(time.monotonic() - _START)} (process start to exported SavedModel)\n"
        f"  skipped images    {summary['skipped_images']}\n"
        f"{_layers_line(summary)}"
        f"  model             {summary['model_path']}"
        f"{' (the pretrained encoder: fine-tune it with --pretrained)' if summary['accuracy'] is None else ''}\n"
        f"  SavedModel        {summary['saved_model_path']} "
        f"{serves}\n"
        f"{_labels_line(summary)}"
        f"  TensorBoard logs  {os.path.join(summary['workdir'], 'logs')}\n"
        f"  checkpoints       {os.path.join(summary['workdir'], 'checkpoints')}",
        flush=True,
    )
    return 0


def _labels_line(summary):
    """Where the class names are, in label order; nothing for a run without labels."""
    if not summary.get("labels_path"):
        return ""
    workdir = summary["workdir"]
    return (f"  labels            {summary['labels_path']} ({len(summary['class_names'])} classes, in label order)\n"
            f"  classify a photo  python train/classify.py --workdir={workdir} photo.jpg   (LiteRT, OpenVINO: "
            f"python train/export.py --workdir={workdir} --format=litert)\n")


def _layers_line(summary):
    """The summary's line on the accelerator path's layers, or nothing on the CPU path."""
    if summary["code_path"] != "accelerator":
        return ""
    kernels = ", ".join(f"{kernel} ({count} traces)" for kernel, count in summary["attention_kernels"].items())
    return (f"  layers            accelerator path (lean layer norm and MLP backward); attention: "
            f"{kernels or 'no step traced'}\n")


def parse_flags(argv):
    """absl's parsing, with a bad or unknown flag as one line and exit status 2."""
    try:
        return FLAGS(argv)
    except flags.Error as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)), flags_parser=parse_flags)

"""Train a keras_vit model: `python train/main.py [--tpu] [--config=NAME] [flags]`.

With no flags it trains a small ViT on the embedded Fashion-MNIST on the CPU.
Every field of `train.configs.TrainConfig` is a flag that overrides the preset;
`--model_kwargs` takes JSON (e.g. '{"patch_size": 4}').
"""

import dataclasses
import json
import os
import sys

# `python train/main.py` puts train/ on sys.path; the trainer's modules import
# as `train.*`, so the repository root goes there too.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the TPU path; JAX works too
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from train.configs import PRESETS, TrainConfig, get_config  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("config", "default", f"Preset, one of {sorted(PRESETS)}.")
flags.DEFINE_string("workdir", "workdir", "Checkpoints, TensorBoard logs, model.keras, saved_model.")
flags.DEFINE_bool("tpu", False, "Train on the TPU of this Colab runtime or TPU VM (TPUStrategy).")
flags.DEFINE_string("tpu_name", None, "Train on a named or remote TPU (name or grpc://host:port).")

_FLAG_TYPES = {int: flags.DEFINE_integer, float: flags.DEFINE_float, bool: flags.DEFINE_bool, str: flags.DEFINE_string}
for _field in dataclasses.fields(TrainConfig):
    if _field.name == "model_kwargs":
        flags.DEFINE_string("model_kwargs", None, "JSON dict of builder arguments, merged into the preset's.")
        continue
    _type = {"int": int, "float": float, "bool": bool, "str": str}.get(str(_field.type), _field.type)
    _FLAG_TYPES.get(_type, flags.DEFINE_string)(_field.name, None, f"Overrides the preset's {_field.name}.")


def config_from_flags():
    config = get_config(FLAGS.config)
    for field in dataclasses.fields(TrainConfig):
        value = getattr(FLAGS, field.name)
        if value is None:
            continue
        if field.name == "model_kwargs":
            value = {**config.model_kwargs, **json.loads(value)}
        setattr(config, field.name, value)
    return config


def main(argv):
    del argv
    import keras

    from train.strategy import TPUUnavailableError, get_strategy
    from train.trainer import train

    config = config_from_flags()
    try:
        strategy = get_strategy(FLAGS.tpu, FLAGS.tpu_name)
    except TPUUnavailableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    devices = strategy.num_replicas_in_sync if strategy is not None else len(keras.distribution.list_devices())
    print(f"keras_vit training: model={config.model} dataset={config.dataset} backend={keras.backend.backend()} "
          f"replicas={devices} workdir={FLAGS.workdir}", flush=True)
    try:
        summary = train(config, FLAGS.workdir, strategy)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if summary["load_report"]:
        print(summary["load_report"])
    if summary["preempted"]:
        print(f"Preempted: checkpoint written at step {summary['step']} of {summary['total_steps']}. "
              "Run the same command to resume.", flush=True)
        return 143
    speed = (f"{summary['images_per_second']:.0f} images/s" if summary["timed_steps"]
             else "n/a (the workdir's run was already complete)")
    print(
        "\nDone.\n"
        f"  test accuracy     {summary['accuracy']:.4f}\n"
        f"  training speed    {speed}\n"
        f"  steps             {summary['step']} (resumed from {summary['resumed_from_step']})\n"
        f"  skipped images    {summary['skipped_images']}\n"
        f"  model             {summary['model_path']}\n"
        f"  SavedModel        {summary['saved_model_path']} (serve: uint8 images -> probabilities)\n"
        f"  TensorBoard logs  {os.path.join(summary['workdir'], 'logs')}\n"
        f"  checkpoints       {os.path.join(summary['workdir'], 'checkpoints')}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))

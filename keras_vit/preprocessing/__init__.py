"""Pixels as the checkpoints' authors and the papers' reference code prepared them.

Evaluation: `eval_transform("DeiT_S16/imagenet")` maps one decoded image of any
size to the pixels the checkpoint was evaluated on (`EvalConfig`, the checkpoint's
record's; timm's re-tuned values with `reference="timm"`),
and `EvalTransform` does the same as the first layer of a model; `resize_config(size)` is the
plain resize of `keras.utils.image_dataset_from_directory` and of the trainer's evaluation. Training:
`train_transform(...)` / `train_transform_for("deit", size)` (crop, flip,
`rand_augment(policy)`, `random_erasing`), `mix_batch` (MixUp/CutMix) and
`repeated_augmentation_order`, each a pure function of a seed.

Everything but the layer and the configurations is written in TensorFlow ops
(it runs inside `tf.data`, which feeds every Keras backend), so those names are
imported on first use: `import keras_vit` needs no TensorFlow.
"""

import importlib

from keras_vit.preprocessing.checkpoints import EvalConfig, eval_config, resize_config
from keras_vit.preprocessing.huggingface import eval_config_from_huggingface
from keras_vit.preprocessing.layers import EvalTransform

# Public names of the TensorFlow modules, imported when first asked for.
_LAZY = {
    "eval_transform": "evaluation",
    "rand_augment": "randaugment",
    "apply_op": "randaugment",
    "parse_policy": "randaugment",
    "RAND_AUGMENT_OPS": "randaugment",
    "random_resized_crop": "cropping",
    "inception_crop": "cropping",
    "random_flip": "cropping",
    "random_erasing": "erasing",
    "mix_batch": "mixing",
    "repeated_augmentation_order": "sampling",
    "train_transform": "training",
    "train_transform_for": "training",
    "RECIPES": "training",
    "resize": "resizing",
}

__all__ = ["EvalConfig", "EvalTransform", "eval_config",
           "eval_config_from_huggingface", "resize_config", *_LAZY]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'keras_vit.preprocessing' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"keras_vit.preprocessing.{_LAZY[name]}")
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        raise ModuleNotFoundError(
            f"keras_vit.preprocessing.{name} runs in TensorFlow ops (tf.data feeds every backend): install "
            "TensorFlow with one of keras_vit's extras cpu, tpu or gpu (e.g. pip install -e \".[cpu]\"), "
            "or pip install tensorflow-cpu beside JAX.",
            name="tensorflow") from error
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)

"""Checks of a training configuration, run before anything is read, built or written.

Every field of `TrainConfig` is also a command-line flag of the same name, so the
messages name the field as the flag (`--learning_rate`), the value received and
what is accepted, in one line.
"""

import difflib
import os

import keras_vit
from keras_vit.schedules import DECAYS
from keras_vit.weights.readers import detect_format
from keras_vit.checkpoints import known_checkpoint
from train import data as data_lib
from train import pipeline
from train.analysis_logging import parse_analyses
from train.modeling import PRECISIONS, TRAINER_ARGUMENTS, builder_arguments, general_builders, headless_by_default
from train.optimization import OPTIMIZERS

# The 0-10 magnitude scale of RandAugment (Cubuk et al. 2020), which DeiT's `m9` uses.
RANDAUGMENT_MAGNITUDES = (0, 10)


def _fail(field, value, accepted):
    raise ValueError(f"--{field} must be {accepted}. Received: {field}={value!r}")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_positive_int(config, field, optional=False):
    value = getattr(config, field)
    if optional and value is None:
        return
    if not _is_int(value) or value <= 0:
        _fail(field, value, "a positive integer" + (" (or unset)" if optional else ""))


def check_non_negative_int(config, field):
    value = getattr(config, field)
    if not _is_int(value) or value < 0:
        _fail(field, value, "an integer >= 0")


def check_number(config, field, low, high, low_open=False, high_open=True, optional=False):
    """Checks that a float field lies in [low, high) (or the interval the flags say)."""
    value = getattr(config, field)
    if optional and value is None:
        return
    above = value > low if low_open else value >= low
    below = high is None or (value < high if high_open else value <= high)
    if not _is_number(value) or not (above and below):
        interval = (
            f"{'(' if low_open else '['}{low}, {'inf' if high is None else high}"
            f"{')' if high_open or high is None else ']'}"
        )
        _fail(field, value, f"a number in {interval}" + (" (or unset)" if optional else ""))


def check_choice(config, field, accepted):
    value = getattr(config, field)
    if value not in accepted:
        raise ValueError(f"--{field} must be one of {accepted}. Received: {field}={value!r}")


def check_model(config):
    """The model name and `--model_kwargs` against the builder's own arguments."""
    names = sorted(keras_vit.VARIANTS) + list(general_builders())
    if config.model not in names:
        hint = difflib.get_close_matches(str(config.model), names, n=1)
        raise ValueError(
            f"--model must be a builder name ({', '.join(names)})."
            f"{f' Did you mean {hint[0]!r}?' if hint else ''} Received: model={config.model!r}"
        )
    if not isinstance(config.model_kwargs, dict):
        raise ValueError(
            "--model_kwargs must be a JSON object of builder arguments, e.g. '{\"patch_size\": 4}'. "
            f"Received: model_kwargs={config.model_kwargs!r}"
        )
    accepted = builder_arguments(config.model)
    for key in config.model_kwargs:
        if key in TRAINER_ARGUMENTS:
            raise ValueError(
                f"--model_kwargs may not set {key!r}: the trainer sets image_size from --image_size and "
                f"num_classes and num_channels from the dataset. Received: model_kwargs={config.model_kwargs!r}"
            )
        if key not in accepted:
            hint = difflib.get_close_matches(key, accepted, n=1)
            raise ValueError(
                f"--model_kwargs names an argument that {config.model} does not take: {key!r}."
                f"{f' Did you mean {hint[0]!r}?' if hint else ''} Accepted: {', '.join(accepted)}."
            )
    if (config.objective == "classification" and headless_by_default(config.model)
            and config.model_kwargs.get("include_top", True) is not True):
        raise ValueError(
            f"--model={config.model} is trained on labels here (--objective=classification), which needs its "
            f"classification head: the trainer sets include_top=True itself. Received: "
            f"model_kwargs={config.model_kwargs!r}"
        )


def check_dataset(config):
    """The dataset name and, for local paths, that `--data_dir` exists; an image folder's splits.

    For an image folder, `config.train_split` and `config.eval_split` are set to the
    subfolders found (`train.data.folder_splits`).
    """
    if not isinstance(config.dataset, str) or not config.dataset:
        _fail("dataset", config.dataset, "a dataset name ('fashion_mnist', 'synthetic', 'folder:/path' or a TFDS name)")
    if config.data_dir is not None and "://" not in config.data_dir and not os.path.isdir(config.data_dir):
        raise ValueError(
            f"--data_dir does not exist or is not a directory. Received: data_dir={config.data_dir!r}"
        )
    kind = data_lib.source_kind(config.dataset)
    channels = config.image_channels
    if channels is not None and kind != "folder":
        raise ValueError(f"--image_channels applies to an image folder (--dataset=folder:DIR) only: other datasets "
                         f"have their own channels. Received: image_channels={channels!r} with "
                         f"--dataset={config.dataset!r}")
    if channels is not None and (not _is_int(channels) or channels not in (1, 3)):
        _fail("image_channels", channels, "1 (grayscale) or 3 (RGB), or unset (RGB)")
    if kind == "folder":
        root = data_lib.folder_root(config.dataset)
        if not os.path.isdir(root):
            raise ValueError(f"--dataset names an image folder that does not exist: {root!r}. "
                             f"Received: dataset={config.dataset!r}")
        # The splits as the folder names them (a preset's "test" is the folder's "validation"):
        # the run, and a dry run's printed configuration, use what was found.
        config.train_split, config.eval_split = data_lib.folder_splits(root, config.train_split, config.eval_split)
        # Every batch is whole: a folder of fewer images than one batch makes no step.
        count = data_lib.count_images(root, config.train_split)
        if not count:
            raise ValueError(f"--dataset names an image folder with no images in its {config.train_split!r} split "
                             f"({root}/{config.train_split}/<class name>/<image files>); --train_split names "
                             f"another. Received: dataset={config.dataset!r}")
        if _is_int(config.batch_size) and count < config.batch_size:
            raise ValueError(f"--batch_size must be at most the {count} images of the image folder's "
                             f"{config.train_split!r} split. Received: batch_size={config.batch_size}")
    elif kind == "tfds":
        data_lib.check_tfds_name(config.dataset)


def check_batch_fits(config, train_images):
    """Every batch is whole: a training set of fewer images than one batch makes no step."""
    if train_images < config.batch_size:
        raise ValueError(f"--batch_size must be at most the {train_images} training images of --dataset (split "
                         f"{config.train_split!r}): a smaller batch, or more images. "
                         f"Received: batch_size={config.batch_size}")


def check_pretrained(config):
    if config.pretrained is None:
        return
    if not isinstance(config.pretrained, str) or not (
        os.path.exists(config.pretrained) or known_checkpoint(config.model, config.pretrained) is not None
    ):
        raise ValueError(
            "--pretrained must be a checkpoint file or a known checkpoint name of the model "
            f"(keras_vit.list_checkpoints() lists them). Received: pretrained={config.pretrained!r}"
        )
    if os.path.isfile(config.pretrained):
        # Only the first bytes are read: a file of no known format fails here, before the
        # model is built or the data read, not minutes later when the weights are loaded.
        try:
            detect_format(config.pretrained)
        except ValueError as error:
            raise ValueError(f"--pretrained is not a checkpoint file. {error} "
                             f"Received: pretrained={config.pretrained!r}") from None


def check_distillation(config):
    """`--teacher`, `--teacher_weights` and `--distillation*` together, without loading the teacher."""
    from train.distillation import DISTILLATION_TYPES
    from train.teachers import check_teacher_spec

    check_choice(config, "distillation", DISTILLATION_TYPES)
    check_number(config, "distillation_tau", 0, None, low_open=True)
    check_number(config, "distillation_alpha", 0, 1, high_open=False)
    if (config.teacher is None) != (config.distillation == "none"):
        raise ValueError("--teacher and --distillation=hard|soft go together. "
                         f"Received: teacher={config.teacher!r}, distillation={config.distillation!r}")
    if config.teacher_weights is not None and config.teacher is None:
        raise ValueError(f"--teacher_weights needs --teacher. Received: teacher_weights={config.teacher_weights!r}")
    if config.teacher is not None:
        check_teacher_spec(config.teacher, config.teacher_weights)


OBJECTIVES = ("classification", "masked_patch_prediction")


def check_objective(config):
    """`--objective` and the masked-patch-prediction settings (ViT App. B.1.2)."""
    from keras_vit.pretraining import TARGETS

    check_choice(config, "objective", OBJECTIVES)
    check_choice(config, "mpp_target", TARGETS)
    check_number(config, "mpp_corruption_rate", 0, 1, low_open=True, high_open=False)
    if config.objective != "masked_patch_prediction":
        return
    if config.teacher is not None:
        raise ValueError("--objective=masked_patch_prediction learns from the images alone and takes no --teacher. "
                         f"Received: teacher={config.teacher!r}")
    if config.mixup or config.cutmix:
        # MixUp and CutMix blend two images and their labels; the appendix pretrains on single images, and
        # the targets of a blended image are colours of neither.
        raise ValueError("--objective=masked_patch_prediction predicts each image's own patches and takes no "
                         "MixUp or CutMix: set --mixup=0 --cutmix=0. "
                         f"Received: mixup={config.mixup}, cutmix={config.cutmix}")
    if config.random_erasing:
        # Erasing fills a rectangle with random noise: its patches' targets would be the noise's colours,
        # which no appendix target is, and its values leave [0, 255], outside the targets' bins.
        raise ValueError("--objective=masked_patch_prediction predicts each image's own patches and takes no "
                         f"random erasing: set --random_erasing=0. Received: random_erasing={config.random_erasing}")
    if config.eval_flip is True:
        # It averages class logits; the pretrainer has none (its export is the encoder).
        raise ValueError("--objective=masked_patch_prediction has no class logits for --eval_flip to average: "
                         "set --eval_flip=false. Received: eval_flip=True")


def check_randaugment(config):
    """`--randaugment`: a timm policy string, or an integer magnitude of DeiT's policy."""
    if config.randaugment is None:
        return
    try:
        pipeline.rand_augment_policy(config.randaugment)
    except (TypeError, ValueError) as error:
        _fail("randaugment", config.randaugment,
              f"a timm RandAugment policy such as 'rand-m9-mstd0.5-inc1', or an integer magnitude from "
              f"{RANDAUGMENT_MAGNITUDES[0]} (off) to {RANDAUGMENT_MAGNITUDES[1]} for that policy ({error})")


def check_config(config):
    """Checks every setting of a run; raises a one-line `ValueError` naming the flag.

    Args:
        config: `TrainConfig`.
    """
    check_choice(config, "optimizer", OPTIMIZERS)
    check_choice(config, "precision", PRECISIONS)
    check_choice(config, "decay", DECAYS)
    check_choice(config, "augmentation", pipeline.AUGMENTATIONS)
    check_model(config)
    for field in ("batch_size", "epochs", "steps_per_execution"):
        check_positive_int(config, field)
    for field in ("image_size", "eval_batch_size", "steps"):
        check_positive_int(config, field, optional=True)
    for field in ("warmup_steps", "checkpoint_every_steps", "seed"):
        check_non_negative_int(config, field)
    check_number(config, "learning_rate", 0, None, low_open=True)
    check_number(config, "adam_epsilon", 0, None, low_open=True)
    check_number(config, "end_learning_rate", 0, None)
    check_number(config, "weight_decay", 0, None)
    check_number(config, "clip_norm", 0, None, low_open=True, optional=True)
    if config.ema_decay is not None and not (_is_number(config.ema_decay) and 0 <= config.ema_decay < 1):
        _fail("ema_decay", config.ema_decay, "a number in [0, 1) (0 turns EMA off), or unset")
    for field in ("adam_beta1", "adam_beta2", "momentum", "label_smoothing", "dropout_rate", "drop_path_rate"):
        check_number(config, field, 0, 1)
    for field in ("mixup", "cutmix"):
        check_number(config, field, 0, None)
    check_distillation(config)
    check_objective(config)
    check_positive_int(config, "analysis_images")
    parse_analyses(config.log_analysis)
    check_randaugment(config)
    check_number(config, "random_erasing", 0, 1)
    check_positive_int(config, "repeated_augmentation")
    check_positive_int(config, "mixing_group", optional=True)
    # A group as large as the batch or larger mixes the batch as one (a preset's group at a small batch).
    if config.mixing_group and config.mixing_group < config.batch_size and config.batch_size % config.mixing_group:
        raise ValueError(f"--mixing_group must divide --batch_size (each group is mixed on its own). "
                         f"Received: mixing_group={config.mixing_group}, batch_size={config.batch_size}")
    check_number(config, "eval_crop", 0, 1, low_open=True, optional=True)
    if config.remat and config.dropout_rate:
        # Stochastic depth is fine: the blocks draw its masks outside the recomputation.
        raise ValueError(
            "--remat cannot be combined with --dropout_rate (the recomputed backward pass would draw other "
            f"dropout masks); --drop_path_rate is supported. Received: remat=True, dropout_rate={config.dropout_rate}"
        )
    for field in ("jit_compile", "remat", "eval_flip"):
        if not isinstance(getattr(config, field), bool):
            _fail(field, getattr(config, field), "true or false")
    check_pretrained(config)
    check_dataset(config)

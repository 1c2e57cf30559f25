"""Batches for training and evaluation: order, augmentation, mixing, and sharding per input pipeline.

Every training example's place is a pure function of `(seed, epoch, position)`:
epoch `e` visits the examples in a stateless permutation of `(seed, e)` (with
repeated augmentation, DeiT's: each of them `r` times in a row), global batch `b`
holds positions `[b B, (b + 1) B)` of it, and the training transform (crop, flip,
RandAugment, random erasing: `keras_vit.preprocessing`), MixUp and CutMix draw
from stateless seeds of `(seed, e, position)`. Hence

- a resumed run continues with exactly the batches the interrupted one would
  have seen, every augmentation included;
- with several input pipelines (`tf.distribute`'s `InputContext`: one per worker
  or TPU host) pipeline `p` reads only its slice of every global batch, and the
  global batches are those of a single-process run, so a multi-worker run trains
  on the same batches as one process would.

Sources without random access (TFDS) are sharded by files with
`tfds.ReadConfig(input_context=...)` and shuffled through a buffer seeded per
epoch; their global batches depend on the number of pipelines.
"""

import functools

import tensorflow as tf

from keras_vit.preprocessing.checkpoints import EvalConfig, resize_config
from keras_vit.preprocessing.evaluation import eval_transform
from keras_vit.preprocessing.mixing import mix_batch
from keras_vit.preprocessing.randaugment import parse_policy
from keras_vit.preprocessing.sampling import repeated_augmentation_order
from keras_vit.preprocessing.training import train_transform
from keras_vit.checkpoints import known_checkpoint_key

# The functions tf.data traces here are written in TensorFlow's own control flow (`tf.cond`,
# `tf.switch_case`, stateless random ops), with no Python branch or loop on a tensor for
# AutoGraph to rewrite; so must a source's `read` be, which they call (`train.data.Source`).
# Left to convert them, it transpiled about 300 functions (RandAugment's operations, mixing,
# erasing) on each run: 10 of the 32 s of a tiny run with the DeiT recipe.
_as_written = tf.autograph.experimental.do_not_convert  # a shorter name for the decorator

# The crop of each training image: ViT's inception crop, DeiT's (timm's) random resized
# crop, a plain resize, or a resize shifted by up to 4 pixels each way (ResNet's CIFAR
# crop, "padded_crop"); all but "none" flip half of the images horizontally.
AUGMENTATIONS = ("inception_crop", "random_resized_crop", "padded_crop", "flip", "none")
_CROPS = {"inception_crop": "inception_crop", "random_resized_crop": "random_resized_crop",
          "padded_crop": "padded_crop", "flip": "resize", "none": "resize"}
# The shuffle buffer of sources read as a stream (TFDS).
SHUFFLE_BUFFER = 50_000
# `--randaugment=N` is DeiT's policy at magnitude N.
DEIT_POLICY = "rand-m{}-mstd0.5-inc1"


def rand_augment_policy(value):
    """The timm policy string of `--randaugment`; None when off (None, 0, or "0")."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"expected a policy string or an integer, not {type(value).__name__}")
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        if int(text) == 0:
            return None
        text = DEIT_POLICY.format(int(text))
    parse_policy(text)  # raises a ValueError naming what is wrong
    return text


def training_transform(image_size, augmentation="inception_crop", randaugment=None, random_erasing=0.0):
    """`f(image, seed)`: one training image as the model takes it (float32 in [0, 255]).

    Args:
        image_size: tuple `(height, width)`.
        augmentation: one of `AUGMENTATIONS`.
        randaugment: timm RandAugment policy, integer magnitude of DeiT's, or None.
        random_erasing: float. Probability of erasing a random box (timm's "pixel" mode).
    """
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"`augmentation` must be one of {AUGMENTATIONS}. Received: augmentation={augmentation!r}")
    return train_transform(
        image_size, crop=_CROPS[augmentation], flip=augmentation != "none",
        rand_augment=rand_augment_policy(randaugment), random_erasing=random_erasing)


def resize(image, size):
    """A plain (bilinear, float) resize: the evaluation of datasets with no transform of their own."""
    return tf.image.resize(tf.cast(image, tf.float32), size)


# Keeps the augmentation seeds apart from the order's (stateless_shuffle of [seed, epoch]).
_AUGMENTATION_STREAM = 0x5EED


def _epoch_key(seed, epoch):
    """The first half of every augmentation seed of `(seed, epoch)`: a pseudo-random int32.

    A hash, not arithmetic: `(seed + epoch) * k` gave run `s` at epoch `e + 1` the
    draws of run `s + 1` at epoch `e`.
    """
    key = tf.random.experimental.stateless_fold_in(
        tf.constant([seed, _AUGMENTATION_STREAM], tf.int64), tf.cast(epoch, tf.int64))
    return tf.random.stateless_uniform((), key, minval=0, maxval=2**31 - 1, dtype=tf.int32)


def _pipeline_layout(batch_size, input_context):
    """`(pipelines, pipeline id, examples per pipeline per step, per-replica batch)`."""
    if input_context is None:
        return 1, 0, batch_size, batch_size
    pipelines = input_context.num_input_pipelines
    per_replica = input_context.get_per_replica_batch_size(batch_size)
    if batch_size % pipelines:
        raise ValueError(f"`batch_size` (global) must be divisible by the {pipelines} input pipelines. "
                         f"Received: batch_size={batch_size}")
    return pipelines, input_context.input_pipeline_id, batch_size // pipelines, per_replica


def make_train_dataset(source, image_size, batch_size, seed, augmentation="inception_crop",
                       start_epoch=0, skip_batches=0, end_epoch=None, randaugment=None,
                       mixup=0.0, cutmix=0.0, input_context=None, random_erasing=0.0, repeated_augmentation=1,
                       mixing_group=None):
    """Stream of training batches `(images, one_hot_labels)`, epoch after epoch.

    Args:
        source: `train.data.Source`.
        image_size: tuple `(height, width)`.
        batch_size: int. Global batch size; the last partial batch of each epoch
            is dropped so that shapes are static (TPUs).
        seed: int.
        augmentation: one of `AUGMENTATIONS`.
        start_epoch: int. First epoch of the stream (resuming).
        skip_batches: int. Global batches of `start_epoch` already trained on.
        end_epoch: int. Epoch after the last one. Defaults to `start_epoch + 1`.
        randaugment: str, int or None. timm's RandAugment policy (e.g.
            `"rand-m9-mstd0.5-inc1"`), or a magnitude of that policy; None or 0 disables.
        mixup: float. MixUp alpha; 0 disables.
        cutmix: float. CutMix alpha; 0 disables.
        input_context: `tf.distribute.InputContext` or None. With one, the
            stream is this input pipeline's: per-replica batches of its slice of
            every global batch (for `distribute_datasets_from_function`).
        random_erasing: float. Probability of random erasing per image (DeiT: 0.25).
        repeated_augmentation: int. Copies of each image per epoch, in a row (DeiT's
            sampler: 3); an epoch keeps its length, so it holds fewer distinct images.
        mixing_group: int or None. MixUp/CutMix draw one lambda per group of this
            many consecutive images of a batch (timm mixes each GPU's batch on its
            own); None mixes each batch as one group.

    Returns:
        A `tf.data.Dataset` of batches of the global size (no `input_context`)
        or of the per-replica size.
    """
    transform = training_transform(image_size, augmentation, randaugment, random_erasing)
    if source.size < batch_size:
        raise ValueError(
            f"The training split has {source.size} examples, fewer than one batch "
            f"(batch_size={batch_size})."
        )
    pipelines, pipeline_id, width, per_replica = _pipeline_layout(batch_size, input_context)
    steps_per_epoch = source.size // batch_size
    replica_batches_per_step = width // per_replica
    num_classes = source.num_classes

    def finish(data, epoch_key):
        """Per-replica batches, each with its mixing seed: one per (global batch, slice).

        The seeds' negative second half keeps them apart from the per-image ones.
        """
        data = data.batch(per_replica, drop_remainder=True)

        @_as_written
        def with_seed(index, batch):
            step, slot = index // replica_batches_per_step, index % replica_batches_per_step
            slice_id = (step * pipelines + pipeline_id) * replica_batches_per_step + slot
            return (*batch, tf.stack([epoch_key, tf.cast(-1 - slice_id, tf.int32)]))

        return data.enumerate().map(with_seed)

    group = per_replica if not mixing_group or mixing_group >= per_replica else mixing_group
    if per_replica % group:
        raise ValueError(f"`mixing_group` must divide the per-replica batch ({per_replica}). "
                         f"Received: mixing_group={mixing_group}")

    @_as_written
    def mix(images, labels, mix_seed):
        if group == per_replica:
            return mix_batch(images, labels, mix_seed, mixup_alpha=mixup, cutmix_alpha=cutmix)
        parts = [mix_batch(images[i * group:(i + 1) * group], labels[i * group:(i + 1) * group],
                           tf.random.experimental.stateless_fold_in(mix_seed, i), mixup_alpha=mixup,
                           cutmix_alpha=cutmix)
                 for i in range(per_replica // group)]
        return tf.concat([p[0] for p in parts], 0), tf.concat([p[1] for p in parts], 0)

    def batch_augmentations(stream):
        if mixup or cutmix:
            return stream.map(mix, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return stream.map(lambda images, labels, mix_seed: (images, labels))

    def prepare(image, label, position, epoch_key):
        element_seed = tf.stack([epoch_key, tf.cast(position, tf.int32)])
        return transform(image, element_seed), tf.one_hot(label, num_classes)

    end_epoch = max(end_epoch or 0, start_epoch + 1)
    if source.read is not None:
        @_as_written
        def one_epoch(epoch):
            epoch_key = _epoch_key(seed, epoch)
            if repeated_augmentation > 1:
                # The epoch keeps its length (whole global batches), as DeiT's does (whole 256s).
                order = repeated_augmentation_order(source.size, epoch, seed, repeated_augmentation,
                                                    multiple=batch_size)
            else:
                order = tf.random.experimental.stateless_shuffle(
                    tf.range(source.size, dtype=tf.int64), seed=tf.stack([tf.cast(seed, tf.int64), epoch]))
            # (step, pipeline, slot) -> this pipeline's examples, and their positions in the epoch.
            positions = tf.reshape(tf.range(steps_per_epoch * batch_size, dtype=tf.int64),
                                   (steps_per_epoch, pipelines, width))[:, pipeline_id]
            positions = tf.reshape(positions, (-1,))
            data = tf.data.Dataset.from_tensor_slices((tf.gather(order, positions), positions))

            @_as_written  # its own `map`: said again rather than left to inheritance
            def load(index, position):
                image, label, ok = source.read(index)
                image, label = prepare(image, label, position, epoch_key)
                return image, label, ok

            data = data.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
            if source.skipped is not None:  # sources with unreadable files drop them here
                data = data.filter(lambda image, label, ok: ok)
            data = data.map(lambda image, label, ok: (image, label))
            return finish(data, epoch_key)

        # One pipeline over all epochs, traced once: the epoch is a tensor.
        stream = tf.data.Dataset.range(start_epoch, end_epoch).flat_map(one_epoch)
    else:
        stream = _streamed_epochs(source, steps_per_epoch, replica_batches_per_step, start_epoch, end_epoch,
                                  seed, prepare, finish, input_context, repeated_augmentation)
    stream = stream.skip(skip_batches * replica_batches_per_step)
    return batch_augmentations(stream).prefetch(tf.data.AUTOTUNE)


def _streamed_epochs(source, steps_per_epoch, replica_batches_per_step, start_epoch, end_epoch, seed, prepare,
                     finish, input_context, repeated_augmentation=1):
    """Epochs of a source read as a stream: one dataset per epoch, each with a Python-int shuffle seed.

    (A tensor seed in `shuffle` fails when the global seed is 0, so the epochs
    are chained rather than traced once.) Each pipeline yields exactly
    `steps_per_epoch` steps of batches per epoch, repeating its shard if short.
    """
    dataset = source.shard(input_context) if input_context is not None else source.dataset

    def one_epoch(epoch):
        epoch_key = _epoch_key(seed, epoch)
        data = dataset.shuffle(min(source.size, SHUFFLE_BUFFER), seed=seed + epoch, reshuffle_each_iteration=False)
        if repeated_augmentation > 1:
            data = data.flat_map(lambda *example: tf.data.Dataset.from_tensors(example).repeat(repeated_augmentation))
        data = data.repeat().enumerate().map(
            _as_written(lambda position, example: prepare(*example, position, epoch_key)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return finish(data, epoch_key).take(steps_per_epoch * replica_batches_per_step)

    return functools.reduce(lambda a, b: a.concatenate(b), (one_epoch(e) for e in range(start_epoch, end_epoch)))


def evaluation_transform(image_size, pretrained=None, eval_crop=None, channels=3, model=None):
    """How evaluation images become the model's input: the run's evaluation transform.

    The same function prepares the evaluation batches and runs inside the
    exported SavedModel (`keras_vit.export.saved_model(image_transform=...)`),
    so the served model sees a photo of any size as the evaluation saw its
    images; its `config` attribute (an `EvalConfig`) describes it, for the
    summary and for `EvalTransform` in the LiteRT and OpenVINO exports.

    Args:
        image_size: tuple `(height, width)`; square unless the transform is the plain resize.
        pretrained: str or None. A known checkpoint (`"DeiT_S16/imagenet"`, or
            `"imagenet"` with `model`, any case) brings the transform it was
            evaluated with (`keras_vit.preprocessing.eval_transform(name)`) at
            `image_size`: it takes precedence over `eval_crop`.
        eval_crop: float or None. Otherwise: resize the shorter side to
            `size / eval_crop` (bicubic, antialiased) and crop the centre, as
            DeiT, ConViT and Swin evaluate. With neither, a plain resize
            (`resize`, vit_jax's evaluation).
        channels: int. 1 for grayscale datasets: the transform's geometry, one channel.
        model: str or None. The model's name, for a short `pretrained` name.

    Returns:
        A function of one image `(height, width, channels)` returning float32
        `(height, width, channels)` of `image_size`, with its `EvalConfig` as
        `config` (None for a plain resize to a non-square size, which no
        `EvalConfig` describes).

    Raises:
        ValueError: for a checkpoint's transform or `eval_crop` at a non-square size.
    """
    # The registry's own lookup (short names, any case); every known checkpoint has a transform.
    known = known_checkpoint_key(model or "", pretrained)
    if known is None and eval_crop is None:
        def plain(image):
            return resize(image, image_size)

        plain.config = resize_config(image_size[0]) if image_size[0] == image_size[1] else None
        return plain
    if image_size[0] != image_size[1]:
        raise ValueError(f"A checkpoint's evaluation transform or --eval_crop makes square images. "
                         f"Received: image_size={tuple(image_size)}")
    if known is not None:
        transform = eval_transform(known, image_size=image_size[0])
    else:
        transform = eval_transform(EvalConfig(image_size=image_size[0], interpolation="bicubic",
                                              crop_fraction=eval_crop, crop_mode="center"))
    if channels == 1:  # the transform makes RGB of a gray image by repeating its channel
        def gray(image):
            return transform(image)[..., :1]

        gray.config = transform.config
        return gray
    return transform


def make_eval_dataset(source, image_size, batch_size, drop_remainder=False, transform=None):
    """Evaluation batches `(images, one_hot_labels)`.

    The last partial batch is kept unless `drop_remainder` (TPUs need static shapes).
    `transform` maps one image to the model's input (`eval_transform`'s callable);
    None resizes it plainly to `image_size`.
    """
    num_classes = source.num_classes
    transform = transform or (lambda image: resize(image, image_size))

    def prepare(image, label):
        return transform(image), tf.one_hot(label, num_classes)

    data = source.dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
    return data.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)

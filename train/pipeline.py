"""Batches for training and evaluation: order, augmentation, mixing, and sharding per input pipeline.

Every training example's place is a pure function of `(seed, epoch, position)`:
epoch `e` visits the examples in a stateless permutation of `(seed, e)`, global
batch `b` holds positions `[b B, (b + 1) B)` of it, and crops, flips, MixUp and
CutMix draw from stateless seeds of `(seed, e, position)`. Hence

- a resumed run continues with exactly the batches the interrupted one would
  have seen (RandAugment excepted: keras-cv's layer keeps its own random state);
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

from train.mixing import mix_batch

AUGMENTATIONS = ("inception_crop", "flip", "none")
# The shuffle buffer of sources read as a stream (TFDS).
SHUFFLE_BUFFER = 50_000


def inception_crop(image, size, seed, area=(0.05, 1.0)):
    """Random crop of 5-100% of the area and 3/4-4/3 aspect, resized (Szegedy et al. 2015)."""
    begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image), tf.zeros((0, 0, 4)), seed=seed, area_range=area,
        aspect_ratio_range=(3 / 4, 4 / 3), use_image_if_no_bounding_boxes=True,
    )
    channels = image.shape[-1]
    image = tf.slice(image, begin, crop_size)
    image.set_shape((None, None, channels))  # the slice loses the static channel count
    return tf.image.resize(image, size)


def resize(image, size):
    return tf.image.resize(tf.cast(image, tf.float32), size)


def augment(image, size, mode, seed):
    """Training augmentation of one image; returns float32 in [0, 255]."""
    if mode == "inception_crop":
        image = inception_crop(image, size, seed)
    else:
        image = resize(image, size)
    if mode != "none":
        image = tf.image.stateless_random_flip_left_right(image, seed=seed + [0, 1])
    return tf.clip_by_value(image, 0.0, 255.0)


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
                       mixup=0.0, cutmix=0.0, input_context=None):
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
        randaugment: int or None. RandAugment magnitude (0-10, keras-cv).
        mixup: float. MixUp alpha; 0 disables.
        cutmix: float. CutMix alpha; 0 disables.
        input_context: `tf.distribute.InputContext` or None. With one, the
            stream is this input pipeline's: per-replica batches of its slice of
            every global batch (for `distribute_datasets_from_function`).

    Returns:
        A `tf.data.Dataset` of batches of the global size (no `input_context`)
        or of the per-replica size.
    """
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"`augmentation` must be one of {AUGMENTATIONS}. Received: augmentation={augmentation!r}")
    if source.size < batch_size:
        raise ValueError(
            f"The training split has {source.size} examples, fewer than one batch "
            f"(batch_size={batch_size})."
        )
    pipelines, pipeline_id, width, per_replica = _pipeline_layout(batch_size, input_context)
    steps_per_epoch = source.size // batch_size
    replica_batches_per_step = width // per_replica
    num_classes = source.num_classes
    randaugment_fn = _randaugment(randaugment, seed)

    def finish(data, epoch_key):
        """Per-replica batches, each with its mixing seed: one per (global batch, slice).

        The seeds' negative second half keeps them apart from the per-image ones.
        """
        data = data.batch(per_replica, drop_remainder=True)

        def with_seed(index, batch):
            step, slot = index // replica_batches_per_step, index % replica_batches_per_step
            slice_id = (step * pipelines + pipeline_id) * replica_batches_per_step + slot
            return (*batch, tf.stack([epoch_key, tf.cast(-1 - slice_id, tf.int32)]))

        return data.enumerate().map(with_seed)

    def batch_augmentations(stream):
        # Applied to the whole stream: keras-cv's RandAugment cannot be traced
        # inside the per-epoch function of `flat_map`.
        if randaugment_fn is not None:
            stream = stream.map(lambda images, labels, mix_seed: (randaugment_fn(images), labels, mix_seed),
                                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        if mixup or cutmix:
            return stream.map(
                lambda images, labels, mix_seed: mix_batch(images, labels, mix_seed, mixup_alpha=mixup,
                                                           cutmix_alpha=cutmix),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return stream.map(lambda images, labels, mix_seed: (images, labels))

    def prepare(image, label, position, epoch_key):
        element_seed = tf.stack([epoch_key, tf.cast(position, tf.int32)])
        return augment(image, image_size, augmentation, element_seed), tf.one_hot(label, num_classes)

    end_epoch = max(end_epoch or 0, start_epoch + 1)
    if source.read is not None:
        def one_epoch(epoch):
            epoch_key = tf.cast((seed + epoch) * 7919, tf.int32)
            order = tf.random.experimental.stateless_shuffle(
                tf.range(source.size, dtype=tf.int64), seed=tf.stack([tf.cast(seed, tf.int64), epoch]))
            # (step, pipeline, slot) -> this pipeline's examples, and their positions in the epoch.
            positions = tf.reshape(tf.range(steps_per_epoch * batch_size, dtype=tf.int64),
                                   (steps_per_epoch, pipelines, width))[:, pipeline_id]
            positions = tf.reshape(positions, (-1,))
            data = tf.data.Dataset.from_tensor_slices((tf.gather(order, positions), positions))

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
                                  seed, prepare, finish, input_context)
    stream = stream.skip(skip_batches * replica_batches_per_step)
    return batch_augmentations(stream).prefetch(tf.data.AUTOTUNE)


def _streamed_epochs(source, steps_per_epoch, replica_batches_per_step, start_epoch, end_epoch, seed, prepare,
                     finish, input_context):
    """Epochs of a source read as a stream: one dataset per epoch, each with a Python-int shuffle seed.

    (A tensor seed in `shuffle` fails when the global seed is 0, so the epochs
    are chained rather than traced once.) Each pipeline yields exactly
    `steps_per_epoch` steps of batches per epoch, repeating its shard if short.
    """
    dataset = source.shard(input_context) if input_context is not None else source.dataset

    def one_epoch(epoch):
        epoch_key = tf.constant((seed + epoch) * 7919, tf.int32)
        data = dataset.shuffle(min(source.size, SHUFFLE_BUFFER), seed=seed + epoch, reshuffle_each_iteration=False)
        data = data.repeat().enumerate().map(
            lambda position, example: prepare(*example, position, epoch_key),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return finish(data, epoch_key).take(steps_per_epoch * replica_batches_per_step)

    return functools.reduce(lambda a, b: a.concatenate(b), (one_epoch(e) for e in range(start_epoch, end_epoch)))


def _randaugment(magnitude, seed):
    """keras-cv's RandAugment as a function of a batch; grayscale batches go through it as RGB.

    Its colour operations need three channels; a gray image repeated over three
    channels stays gray under every operation, so its first channel is the result.
    """
    if not magnitude:
        return None
    import keras_cv

    layer = keras_cv.layers.RandAugment(
        value_range=(0, 255), augmentations_per_image=2, magnitude=magnitude / 10, seed=seed)

    def apply(images):
        if images.shape[-1] == 1:
            return layer(tf.repeat(images, 3, axis=-1), training=True)[..., :1]
        return layer(images, training=True)

    return apply


def make_eval_dataset(source, image_size, batch_size, drop_remainder=False):
    """Evaluation batches `(images, one_hot_labels)`.

    The last partial batch is kept unless `drop_remainder` (TPUs need static shapes).
    """
    num_classes = source.num_classes

    def prepare(image, label):
        return resize(image, image_size), tf.one_hot(label, num_classes)

    data = source.dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
    return data.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)

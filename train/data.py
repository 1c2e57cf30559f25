"""tf.data input pipelines: the embedded Fashion-MNIST, TFDS datasets and image folders.

Every source yields `(uint8 image, int label)`; `make_train_dataset` and
`make_eval_dataset` turn it into batches of float32 images in [0, 255] (the
models map pixels to their own range) and one-hot labels. Training batches are a
pure function of `(seed, epoch, position)`: shuffling and augmentation use
per-epoch seeds and stateless random ops, so a resumed run sees exactly the
batches the interrupted one would have seen.
"""

import dataclasses
import difflib
import functools
import gzip
import os
import struct
import threading

import numpy as np
import tensorflow as tf

from train.mixing import mix_batch

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
AUGMENTATIONS = ("inception_crop", "flip", "none")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")


@dataclasses.dataclass
class Source:
    """A dataset split before batching.

    Attributes:
        dataset: `tf.data.Dataset` of `(uint8 image (h, w, c), int64 label)`.
        size: int. Number of examples.
        num_classes: int.
        channels: int.
        native_size: tuple or None. Image size when all images share it.
        class_names: list of str.
        skipped: `SkipCounter` or None, for sources that can skip bad files.
    """

    dataset: tf.data.Dataset
    size: int
    num_classes: int
    channels: int
    native_size: tuple = None
    class_names: list = None
    skipped: "SkipCounter" = None


class SkipCounter:
    """Counts unreadable images skipped by a folder dataset (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._files = set()

    def add(self, path):
        with self._lock:
            self._files.add(path)

    @property
    def count(self):
        """Distinct files skipped so far (each epoch meets them again)."""
        return len(self._files)

    @property
    def files(self):
        return sorted(self._files)


# ---- sources ----------------------------------------------------------------------


def read_idx(path):
    """Reads a (gzipped) IDX file of the MNIST family into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path!r} is not an unsigned-byte IDX file (magic {data[:4]!r}).")
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    array = np.frombuffer(data, np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path!r} is truncated: expected {int(np.prod(shape))} values, found {array.size}.")
    return array.reshape(shape)


def fashion_mnist(split, data_dir=None):
    """The embedded default: Fashion-MNIST from the Debian package, else from TFDS."""
    directory = data_dir or FASHION_MNIST_DIR
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError(f"Fashion-MNIST has splits 'train' and 'test'. Received: split={split!r}")
    images_path = os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz")
    if not os.path.exists(images_path):
        # No Debian package (e.g. on Colab): the same data through TFDS.
        return tfds_source("fashion_mnist", split, data_dir)
    images = read_idx(images_path)[..., None]
    labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz")).astype("int64")
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return Source(dataset, len(labels), 10, 1, (28, 28), list(FASHION_MNIST_CLASSES))


class DataUnavailableError(RuntimeError):
    """A dataset could not be downloaded or prepared; the message says which and why."""


def tfds_names():
    """The names of the datasets registered with TFDS."""
    import tensorflow_datasets as tfds

    return tfds.list_builders(with_community_datasets=False)


def check_tfds_name(name, data_dir=None):
    """Raises a short `ValueError` (with a hint) unless TFDS knows `name`.

    `name` may carry a config and version (`"cifar10:3.0.2"`, `"imagenet2012/subset"`);
    a dataset already prepared under `data_dir` is accepted by its folder.
    """
    base = name.split(":")[0].split("/")[0]
    if data_dir is not None and "://" not in data_dir and os.path.isdir(os.path.join(data_dir, base)):
        return
    names = tfds_names()
    if base not in names:
        hint = difflib.get_close_matches(base, names, n=3)
        raise ValueError(
            f"--dataset is not 'fashion_mnist', 'synthetic', an image folder ('folder:/path') or a TFDS "
            f"dataset.{f' Did you mean {hint}?' if hint else ''} tfds.list_builders() lists the "
            f"{len(names)} TFDS names. Received: dataset={name!r}"
        )


def tfds_source(name, split, data_dir=None):
    """A TFDS dataset by name; `data_dir` may be local or `gs://`.

    Raises:
        DataUnavailableError: if the data is not prepared in `data_dir` and
            cannot be downloaded (no network, for example).
    """
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        check_tfds_name(name, data_dir)  # the short message, with a hint
        raise
    try:
        builder.download_and_prepare()
    except Exception as error:  # noqa: BLE001 - downloads fail with many error types
        first_line = (str(error).strip().splitlines() or ["no details"])[0][:300]
        raise DataUnavailableError(
            f"TFDS could not download or prepare {name!r} into {builder.data_dir!r} "
            f"({type(error).__name__}: {first_line}). Without a network, prepare it on a machine "
            f"with one (`tfds build {name} --data_dir=DIR`) and pass --data_dir=DIR."
        ) from None
    info = builder.info
    # File order is fixed (no shuffle_files) so that a resumed run sees the same data.
    dataset = builder.as_dataset(split=split, as_supervised=True, shuffle_files=False)
    label = info.features["label"]
    image = info.features["image"]
    shape = image.shape
    native = tuple(shape[:2]) if None not in shape[:2] else None
    return Source(
        dataset.map(lambda x, y: (x, tf.cast(y, tf.int64))),
        info.splits[split].num_examples,
        label.num_classes,
        shape[-1] or 3,
        native,
        list(label.names),
    )


def _list_folder(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    files, labels = [], []
    for index, name in enumerate(classes):
        for dirpath, _, filenames in os.walk(os.path.join(root, name)):
            for filename in sorted(filenames):
                if filename.lower().endswith(IMAGE_EXTENSIONS):
                    files.append(os.path.join(dirpath, filename))
                    labels.append(index)
    return classes, files, labels


def folder_source(root, split, channels=3):
    """Images in `root/<split>/<class>/*.jpg` (png, bmp, gif and webp too).

    Unreadable or corrupt images are skipped and counted (`Source.skipped`)
    instead of stopping the run.
    """
    split_dir = os.path.join(root, split)
    if not os.path.isdir(split_dir):
        raise ValueError(
            f"Image folder {root!r} has no {split!r} directory; expected "
            f"{root}/{split}/<class name>/<image files>."
        )
    classes, files, labels = _list_folder(split_dir)
    if not files:
        raise ValueError(f"Image folder {split_dir!r} holds no images ({', '.join(IMAGE_EXTENSIONS)}).")
    counter = SkipCounter()

    def decode(path):
        from PIL import Image

        path = path.numpy().decode()
        try:
            with Image.open(path) as image:
                array = np.asarray(image.convert("RGB" if channels == 3 else "L"))
            return array.reshape(array.shape[0], array.shape[1], channels), True
        except Exception:  # noqa: BLE001 - any unreadable file is skipped and counted
            counter.add(path)
            return np.zeros((1, 1, channels), np.uint8), False

    def load(path, label):
        image, ok = tf.py_function(decode, [path], (tf.uint8, tf.bool))
        image.set_shape((None, None, channels))
        return image, label, ok

    dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, "int64")))
    def readable(image, label, ok):
        return ok

    def drop_flag(image, label, ok):
        return image, label

    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.filter(readable).map(drop_flag)
    return Source(dataset, len(files), len(classes), channels, None, classes, counter)


def synthetic(split, size=32, channels=3, examples=None):
    """A generated 4-class dataset for smoke tests, demos and CI: no files, no downloads.

    Class `k` images have brightness around `30 + 60 k` plus noise, so a few
    steps of any model learn it. `train` has 512 examples, `test` 128.
    """
    count = examples or {"train": 512, "test": 128}.get(split, 128)
    rng = np.random.default_rng({"train": 0, "test": 1}.get(split, 2))
    labels = rng.integers(0, 4, count).astype("int64")
    noise = rng.integers(-25, 25, (count, size, size, channels))
    images = (30 + 60 * labels[:, None, None, None] + noise).clip(0, 255).astype(np.uint8)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    return Source(dataset, count, 4, channels, (size, size), ["dark", "dim", "bright", "brightest"])


def source_kind(name):
    """What `--dataset` names: `"fashion_mnist"`, `"synthetic"`, `"folder"` or `"tfds"`."""
    if name in ("fashion_mnist", "default"):
        return "fashion_mnist"
    if name == "synthetic":
        return "synthetic"
    if name.startswith("folder:") or os.sep in name or os.path.isdir(name):
        return "folder"
    return "tfds"


def folder_root(name):
    """The directory of a `folder:/path` (or plain path) dataset name."""
    return name.split(":", 1)[1] if name.startswith("folder:") else name


def load_source(name, split, data_dir=None):
    """Resolves `--dataset`: `fashion_mnist`, `synthetic`, an image folder, or a TFDS name."""
    kind = source_kind(name)
    if kind == "fashion_mnist":
        return fashion_mnist(split, data_dir)
    if kind == "synthetic":
        return synthetic(split)
    if kind == "folder":
        root = folder_root(name)
        if not os.path.isdir(root):
            raise ValueError(f"Image folder not found. Received: dataset={name!r}")
        return folder_source(root, split)
    return tfds_source(name, split, data_dir)


# ---- augmentation and batching --------------------------------------------------


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


def _resize(image, size):
    return tf.image.resize(tf.cast(image, tf.float32), size)


def augment(image, size, mode, seed):
    """Training augmentation of one image; returns float32 in [0, 255]."""
    if mode == "inception_crop":
        image = inception_crop(image, size, seed)
    else:
        image = _resize(image, size)
    if mode != "none":
        image = tf.image.stateless_random_flip_left_right(image, seed=seed + [0, 1])
    return tf.clip_by_value(image, 0.0, 255.0)


def make_train_dataset(source, image_size, batch_size, seed, augmentation="inception_crop",
                       start_epoch=0, skip_batches=0, end_epoch=None, randaugment=None,
                       mixup=0.0, cutmix=0.0):
    """Stream of training batches `(images, one_hot_labels)`, epoch after epoch.

    Batch `b` of epoch `e` depends only on `(seed, e, b)`: order, crops, flips,
    MixUp and CutMix draw from stateless seeds, so a resumed run continues with
    exactly the batches the interrupted one would have seen. RandAugment is the
    exception (keras-cv's layer keeps its own random state): after a resume its
    choice of operations differs, while the images it is applied to and the
    labels are the same.

    Args:
        source: `Source`.
        image_size: tuple `(height, width)`.
        batch_size: int. Global batch size; the last partial batch of each epoch
            is dropped so that shapes are static (TPUs).
        seed: int.
        augmentation: one of `AUGMENTATIONS`.
        start_epoch: int. First epoch of the stream (resuming).
        skip_batches: int. Batches of `start_epoch` already trained on.
        end_epoch: int. Epoch after the last one. Defaults to `start_epoch + 1`.
        randaugment: int or None. RandAugment magnitude (0-10, keras-cv).
        mixup: float. MixUp alpha; 0 disables.
        cutmix: float. CutMix alpha; 0 disables.
    """
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"`augmentation` must be one of {AUGMENTATIONS}. Received: augmentation={augmentation!r}")
    if source.size < batch_size:
        raise ValueError(
            f"The training split has {source.size} examples, fewer than one batch "
            f"(batch_size={batch_size})."
        )
    num_classes = source.num_classes
    randaugment_layer = _randaugment(randaugment, seed)

    def one_epoch(epoch):
        data = source.dataset.shuffle(min(source.size, 50_000), seed=seed + epoch, reshuffle_each_iteration=False)
        epoch_key = tf.constant((seed + epoch) * 7919, tf.int32)

        def prepare(index, example):
            image, label = example
            element_seed = tf.stack([epoch_key, tf.cast(index, tf.int32)])
            image = augment(image, image_size, augmentation, element_seed)
            return image, tf.one_hot(label, num_classes)

        data = data.enumerate().map(prepare, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        data = data.batch(batch_size, drop_remainder=True)
        if randaugment_layer is not None:
            data = data.map(lambda images, labels: (randaugment_layer(images), labels),
                            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        if mixup or cutmix:
            def mix(index, batch):
                # Batch seeds are kept apart from the per-image ones (negative second half).
                batch_seed = tf.stack([epoch_key, -1 - tf.cast(index, tf.int32)])
                return mix_batch(*batch, batch_seed, mixup_alpha=mixup, cutmix_alpha=cutmix)

            data = data.enumerate().map(mix, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return data

    # One dataset per epoch, each shuffled with its own Python-int seed, chained:
    # epoch e's order depends on (seed, e) only. (A tensor seed inside one
    # `flat_map` over the epochs fails in `shuffle` when the global seed is 0.)
    epochs = range(start_epoch, max(end_epoch or 0, start_epoch + 1))
    stream = functools.reduce(lambda a, b: a.concatenate(b), (one_epoch(e) for e in epochs))
    stream = stream.skip(skip_batches)
    return stream.prefetch(tf.data.AUTOTUNE)


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
        return _resize(image, image_size), tf.one_hot(label, num_classes)

    data = source.dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
    return data.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)

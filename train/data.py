"""tf.data input pipelines: the embedded Fashion-MNIST, TFDS datasets and image folders.

(About 400 lines: the three sources and the two dataset builders share the seeded,
position-keyed batching that makes a resumed run see the same batches.)

Every source yields `(uint8 image, int label)`; `make_train_dataset` and
`make_eval_dataset` turn it into batches of float32 images in [0, 255] (the
models map pixels to their own range) and one-hot labels. Training batches are a
pure function of `(seed, epoch, position)`: shuffling and augmentation use
per-epoch seeds and stateless random ops, so a resumed run sees exactly the
batches the interrupted one would have seen.
"""

import dataclasses
import difflib
import gzip
import os
import struct
import threading

import numpy as np
import tensorflow as tf


FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
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
        read: callable or None. For sources with random access: an int64 index
            -> `(uint8 image, int64 label, bool readable)`. The training pipeline
            traces it without AutoGraph: its branches must be TensorFlow ops.
        shard: callable or None. For streamed sources: a
            `tf.distribute.InputContext` -> the dataset of that input pipeline.
    """

    dataset: tf.data.Dataset
    size: int
    num_classes: int
    channels: int
    native_size: tuple = None
    class_names: list = None
    skipped: "SkipCounter" = None
    read: object = None
    shard: object = None


def array_source(images, labels, num_classes, class_names):
    """A source held in memory: random access by index."""
    images_t = tf.constant(images)
    labels_t = tf.constant(labels.astype("int64"))

    def read(index):
        return tf.gather(images_t, index), tf.gather(labels_t, index), tf.constant(True)

    dataset = tf.data.Dataset.from_tensor_slices((images, labels.astype("int64")))
    return Source(dataset, len(labels), num_classes, images.shape[-1], tuple(images.shape[1:3]),
                  list(class_names), read=read)


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
    return array_source(images, labels, 10, FASHION_MNIST_CLASSES)


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


# Where TFDS downloads from first (its mirror of prepared datasets), and how long to wait
# for it: without a network TFDS itself retries for minutes before it gives up.
DOWNLOAD_HOST = ("storage.googleapis.com", 443)
NETWORK_DEADLINE_S = 10.0


def check_network(name, data_dir, host=DOWNLOAD_HOST, deadline=NETWORK_DEADLINE_S):
    """Raises `DataUnavailableError` at once when `host` cannot be reached within `deadline` seconds."""
    import socket

    try:
        socket.create_connection(host, timeout=deadline).close()
    except OSError as error:
        raise DataUnavailableError(
            f"TFDS would download {name!r} into {data_dir!r}, but {host[0]}:{host[1]} could not be reached "
            f"within {deadline:g} s ({type(error).__name__}: {error}): no network? Prepare it on a machine "
            f"with one (`tfds build {name} --data_dir=DIR`) and pass --data_dir=DIR."
        ) from None


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
    if not builder.is_prepared():
        check_network(name, builder.data_dir)
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

    def to_int64(x, y):
        return x, tf.cast(y, tf.int64)

    def shard(input_context):
        # Each input pipeline (worker, TPU host) reads only its share of the files.
        read_config = tfds.ReadConfig(input_context=input_context)
        return builder.as_dataset(split=split, as_supervised=True, shuffle_files=False,
                                  read_config=read_config).map(to_int64)

    return Source(
        dataset.map(to_int64),
        info.splits[split].num_examples,
        label.num_classes,
        shape[-1] or 3,
        native,
        list(label.names),
        shard=shard,
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


def count_images(root, split):
    """The number of image files in `root/<split>/<class>/` (unreadable ones included)."""
    return len(_list_folder(os.path.join(root, split))[1])


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DECODERS = ("tensorflow", "pillow")


def _pillow_decode(path, channels, counter):
    """`(uint8 array, True)`, or a 1x1 placeholder and False when Pillow cannot read `path`."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            array = np.asarray(image.convert("RGB" if channels == 3 else "L"))
        return array.reshape(array.shape[0], array.shape[1], channels), True
    except Exception:  # noqa: BLE001 - any unreadable file is skipped and counted
        counter.add(path)
        return np.zeros((1, 1, channels), np.uint8), False


def _native_decode(path, channels):
    """`(image, decoded)`: TensorFlow's decoding of the files it reads as Pillow does.

    Those are JPEGs (libjpeg's accurate integer DCT, Pillow's) and PNGs of at
    most 8 bits per sample; `decoded` is False for any other file (GIF, BMP,
    WebP, 16-bit PNG), which Pillow then reads. A corrupt JPEG or PNG raises
    here and goes to Pillow too, which skips and counts it.
    """
    raw = tf.io.read_file(path)
    # The first 25 bytes, zero-padded: the PNG signature, and IHDR's bit depth at byte 24.
    header = tf.strings.join([tf.strings.substr(raw, 0, 25), b"\0" * 25])
    bit_depth = tf.io.decode_raw(tf.strings.substr(header, 24, 1), tf.uint8)[0]
    png = tf.logical_and(tf.equal(tf.strings.substr(header, 0, 8), PNG_SIGNATURE), bit_depth <= 8)
    jpeg = tf.io.is_jpeg(raw)

    def decode_jpeg():
        return tf.io.decode_jpeg(raw, channels=3, dct_method="INTEGER_ACCURATE")

    def decode_other():
        return tf.cond(png, lambda: tf.io.decode_png(raw, channels=3),
                       lambda: tf.zeros((1, 1, 3), tf.uint8))

    image = tf.cond(jpeg, decode_jpeg, decode_other)
    if channels == 1:
        # Pillow's RGB -> L: ITU-R 601-2 luma in 16-bit fixed point, rounded.
        rgb = tf.cast(image, tf.int32)
        luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) // 65536
        image = tf.cast(luma, tf.uint8)[..., None]
    return image, tf.logical_or(jpeg, png)


# The names an image folder's evaluation split goes by, in the order they are looked for when
# the configured one (a preset's "test", or ImageNet's "validation") is not there.
EVAL_SPLIT_NAMES = ("validation", "val", "test")


def folder_splits(root, train_split, eval_split):
    """`(train split, evaluation split)` of the image folder `root`, as its subfolders name them.

    `root/<train_split>/` must exist. The evaluation split is `eval_split` where that
    subfolder exists; where it does not and `eval_split` is one of the usual names
    (`EVAL_SPLIT_NAMES`), the first of them that does.

    Raises:
        ValueError: naming the flag that fixes it (`--train_split`, `--eval_split`) and
            the subfolders found.
    """
    found = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    layout = (f"an image folder holds <split>/<class name>/<image files>, e.g. {root}/train/cat/1.jpg and "
              f"{root}/validation/cat/2.jpg; its subfolders here: {', '.join(found) or 'none'}")
    if train_split not in found:
        raise ValueError(f"--train_split names no subfolder of the image folder: {layout}. Pass the training "
                         f"split's folder name as --train_split. Received: train_split={train_split!r}")
    if eval_split in found and eval_split != train_split:
        return train_split, eval_split
    usual = [name for name in EVAL_SPLIT_NAMES if name in found and name != train_split]
    if eval_split in EVAL_SPLIT_NAMES and usual:
        return train_split, usual[0]
    raise ValueError(f"--eval_split names no subfolder of the image folder other than the training split's: "
                     f"{layout}. Pass the evaluation split's folder name as --eval_split. "
                     f"Received: eval_split={eval_split!r}")


def folder_source(root, split, channels=3, decoder="tensorflow"):
    """Images in `root/<split>/<class>/*.jpg` (png, bmp, gif and webp too).

    Unreadable or corrupt images are skipped and counted (`Source.skipped`)
    instead of stopping the run.

    Args:
        root: str. The folder holding `<split>/`.
        split: str. `"train"` or `"test"`.
        channels: int. 3 (RGB) or 1 (Pillow's luma).
        decoder: str. `"tensorflow"` decodes JPEGs and 8-bit PNGs with
            TensorFlow's ops, which give Pillow's pixels and run outside
            Python's lock, so tf.data threads decode in parallel; every other
            file, and any file those ops reject, goes to Pillow. `"pillow"`
            reads every file with Pillow in `tf.py_function` (one thread at
            a time). Both give the same pixels.
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}. Received: decoder={decoder!r}")
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

    def pillow_decode(path):
        image, ok = tf.py_function(lambda p: _pillow_decode(p.numpy().decode(), channels, counter),
                                   [path], (tf.uint8, tf.bool))
        image.set_shape((None, None, channels))
        ok.set_shape(())
        return image, ok

    def decode(path):
        if decoder == "pillow":
            return pillow_decode(path)
        # tf.data has no try/except: the native attempt runs in a one-element dataset that
        # drops it on error (or when the format is not one it reads as Pillow does), and
        # Pillow's is evaluated only when nothing came out of it.
        native = (tf.data.Dataset.from_tensors(path).map(lambda p: _native_decode(p, channels))
                  .ignore_errors().filter(lambda image, decoded: decoded))
        fallback = tf.data.Dataset.from_tensors(path).map(pillow_decode)
        image, ok = native.concatenate(fallback).take(1).get_single_element()
        image.set_shape((None, None, channels))
        return image, ok

    paths = tf.constant(files)
    labels = tf.constant(np.asarray(labels, "int64"))

    def load(path, label):
        image, ok = decode(path)
        return image, label, ok

    def read(index):
        return load(tf.gather(paths, index), tf.gather(labels, index))

    def readable(image, label, ok):
        return ok

    def drop_flag(image, label, ok):
        return image, label

    dataset = tf.data.Dataset.from_tensor_slices((paths, labels))
    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.filter(readable).map(drop_flag)
    return Source(dataset, len(files), len(classes), channels, None, classes, counter, read=read)


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
    return array_source(images, labels, 4, ["dark", "dim", "bright", "brightest"])


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


def load_source(name, split, data_dir=None, channels=None):
    """Resolves `--dataset`: `fashion_mnist`, `synthetic`, an image folder, or a TFDS name.

    `channels` (`--image_channels`): an image folder's, 3 (RGB, None too) or 1 (Pillow's luma).
    """
    kind = source_kind(name)
    if kind == "fashion_mnist":
        return fashion_mnist(split, data_dir)
    if kind == "synthetic":
        return synthetic(split)
    if kind == "folder":
        root = folder_root(name)
        if not os.path.isdir(root):
            raise ValueError(f"Image folder not found. Received: dataset={name!r}")
        return folder_source(root, split, channels=channels or 3)
    return tfds_source(name, split, data_dir)

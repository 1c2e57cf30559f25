"""Input pipelines: IDX reading, deterministic resumable streams, folders with bad files."""

import os

import numpy as np
import pytest

from tests.train.helpers import make_idx_dataset, make_image_folder, write_idx
from train import data


def batches(dataset, n):
    return [(x.numpy(), y.numpy()) for x, y in dataset.take(n)]


def test_read_idx_round_trip_and_truncation(tmp_path):
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(str(tmp_path / "a.gz"), array)
    np.testing.assert_array_equal(data.read_idx(str(tmp_path / "a.gz")), array)
    import gzip

    raw = gzip.open(tmp_path / "a.gz").read()
    with gzip.open(tmp_path / "b.gz", "wb") as f:
        f.write(raw[:-5])
    with pytest.raises(ValueError, match=r"b.gz' is truncated: expected 24 values, found 19"):
        data.read_idx(str(tmp_path / "b.gz"))


def test_fashion_mnist_source_reads_the_debian_layout(tmp_path):
    directory = make_idx_dataset(tmp_path / "fm", train=40, test=8)
    source = data.fashion_mnist("train", data_dir=directory)
    assert (source.size, source.num_classes, source.channels, source.native_size) == (40, 10, 1, (28, 28))
    image, label = next(iter(source.dataset))
    assert image.shape == (16, 16, 1) and image.dtype.name == "uint8" and label.dtype.name == "int64"
    with pytest.raises(ValueError, match=r"splits 'train' and 'test'. Received: split='validation'"):
        data.fashion_mnist("validation", data_dir=directory)


@pytest.mark.parametrize("augmentation", ["inception_crop", "flip", "none"])
def test_train_stream_is_static_deterministic_and_resumable(tmp_path, augmentation):
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=50, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=8, seed=3, augmentation=augmentation)
    full = batches(data.make_train_dataset(source, end_epoch=3, **kwargs), 18)  # 6 batches an epoch
    assert all(x.shape == (8, 12, 12, 1) and y.shape == (8, 10) for x, y in full)
    assert all(x.dtype == np.float32 and 0 <= x.min() and x.max() <= 255 for x, _ in full)
    again = batches(data.make_train_dataset(source, end_epoch=3, **kwargs), 18)
    for (a, b), (c, d) in zip(full, again):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    # Epochs differ in order; a stream resumed at epoch 1, batch 2 continues exactly.
    assert not np.array_equal(full[0][1], full[6][1])
    resumed = batches(data.make_train_dataset(source, start_epoch=1, skip_batches=2, end_epoch=3, **kwargs), 10)
    for (a, b), (c, d) in zip(full[8:], resumed):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_eval_dataset_keeps_or_drops_the_remainder(tmp_path):
    source = data.fashion_mnist("test", data_dir=make_idx_dataset(tmp_path / "fm", train=8, test=10))
    assert [len(y) for _, y in batches(data.make_eval_dataset(source, (16, 16), 4), 9)] == [4, 4, 2]
    assert [len(y) for _, y in batches(data.make_eval_dataset(source, (16, 16), 4, drop_remainder=True), 9)] == [4, 4]


def test_folder_skips_and_counts_corrupt_images(tmp_path):
    root = make_image_folder(tmp_path / "images", per_class=3, corrupt=2)
    source = data.load_source(f"folder:{root}", "train")
    assert source.class_names == ["class_0", "class_1", "class_2", "class_3"][: source.num_classes]
    examples = list(source.dataset)
    assert len(examples) == source.size - 2
    assert source.skipped.count == 2
    assert all(os.path.basename(f).startswith("broken_") for f in source.skipped.files)
    assert all(image.shape[-1] == 3 for image, _ in examples)


def test_missing_or_empty_dataset_paths_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"Image folder not found. Received: dataset='folder:/no/such/dir'"):
        data.load_source("folder:/no/such/dir", "train")
    os.makedirs(tmp_path / "empty" / "train" / "a")
    with pytest.raises(ValueError, match=r"empty/train' holds no images"):
        data.load_source(str(tmp_path / "empty"), "train")
    with pytest.raises(ValueError, match=r"has no 'test' directory"):
        data.load_source(str(tmp_path / "empty"), "test")


def test_batch_smaller_than_dataset_is_required(tmp_path):
    source = data.fashion_mnist("test", data_dir=make_idx_dataset(tmp_path / "fm", train=8, test=4))
    with pytest.raises(ValueError, match=r"has 4 examples, fewer than one batch \(batch_size=8\)"):
        data.make_train_dataset(source, (16, 16), 8, 0)


def test_keras_cv_mixup_and_randaugment_make_soft_labels(tmp_path):
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=32, test=4))
    source.dataset = source.dataset.map(lambda x, y: (data.tf.image.grayscale_to_rgb(x), y))
    stream = data.make_train_dataset(source, (16, 16), 8, 0, "flip", randaugment=9, mixup=0.8, cutmix=1.0)
    x, y = next(iter(stream))
    assert x.shape == (8, 16, 16, 3)
    np.testing.assert_allclose(y.numpy().sum(-1), 1.0, atol=1e-5)
    assert ((y.numpy() > 0) & (y.numpy() < 1)).any()  # mixed, not one-hot

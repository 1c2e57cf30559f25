"""Input pipelines: IDX reading, deterministic resumable streams, folders with bad files."""

import os

import numpy as np
import pytest

from tests.train.helpers import make_idx_dataset, make_image_folder, write_idx
from train import data, pipeline


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
    assert (source.size, source.num_classes, source.channels, source.native_size) == (40, 10, 1, (16, 16))
    image, label = next(iter(source.dataset))
    assert image.shape == (16, 16, 1) and image.dtype.name == "uint8" and label.dtype.name == "int64"
    with pytest.raises(ValueError, match=r"splits 'train' and 'test'. Received: split='validation'"):
        data.fashion_mnist("validation", data_dir=directory)


@pytest.mark.parametrize("augmentation", ["inception_crop", "flip", "none"])
def test_train_stream_is_static_deterministic_and_resumable(tmp_path, augmentation):
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=50, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=8, seed=3, augmentation=augmentation)
    full = batches(pipeline.make_train_dataset(source, end_epoch=3, **kwargs), 18)  # 6 batches an epoch
    assert all(x.shape == (8, 12, 12, 1) and y.shape == (8, 10) for x, y in full)
    assert all(x.dtype == np.float32 and 0 <= x.min() and x.max() <= 255 for x, _ in full)
    again = batches(pipeline.make_train_dataset(source, end_epoch=3, **kwargs), 18)
    for (a, b), (c, d) in zip(full, again):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    # Epochs differ in order; a stream resumed at epoch 1, batch 2 continues exactly.
    assert not np.array_equal(full[0][1], full[6][1])
    resumed = batches(pipeline.make_train_dataset(source, start_epoch=1, skip_batches=2, end_epoch=3, **kwargs), 10)
    for (a, b), (c, d) in zip(full[8:], resumed):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_eval_dataset_keeps_or_drops_the_remainder(tmp_path):
    source = data.fashion_mnist("test", data_dir=make_idx_dataset(tmp_path / "fm", train=8, test=10))
    assert [len(y) for _, y in batches(pipeline.make_eval_dataset(source, (16, 16), 4), 9)] == [4, 4, 2]
    assert [len(y) for _, y in batches(pipeline.make_eval_dataset(source, (16, 16), 4, drop_remainder=True), 9)] == [4, 4]


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
        pipeline.make_train_dataset(source, (16, 16), 8, 0)


def test_randaugment_and_mixing_of_rgb_images_make_soft_labels():
    source = data.synthetic("train", size=16)
    stream = pipeline.make_train_dataset(source, (16, 16), 8, 0, "flip", randaugment=9, mixup=0.8, cutmix=1.0)
    x, y = next(iter(stream))
    assert x.shape == (8, 16, 16, 3)
    np.testing.assert_allclose(y.numpy().sum(-1), 1.0, atol=1e-5)
    assert ((y.numpy() > 0) & (y.numpy() < 1)).any()  # mixed, not one-hot


# ---- MixUp / CutMix (DeiT's batch mixing) and exact resume -------------------------


def np_mix(images, labels, use_cutmix, lam, box):
    """MixUp / CutMix written out in numpy from the drawn parameters (timm's Mixup, batch mode)."""
    partner, partner_labels = images[::-1], labels[::-1]
    if use_cutmix:
        top, bottom, left, right = box
        mixed = images.copy()
        mixed[:, top:bottom, left:right] = partner[:, top:bottom, left:right]
        lam = 1.0 - (bottom - top) * (right - left) / (images.shape[1] * images.shape[2])
    else:
        mixed = lam * images + (1.0 - lam) * partner
    return mixed, lam * labels + (1.0 - lam) * partner_labels


@pytest.mark.parametrize("mixup, cutmix", [(0.8, 0.0), (0.0, 1.0), (0.8, 1.0)])
def test_mix_batch_matches_numpy_and_its_parameters_follow_the_recipe(mixup, cutmix):
    import tensorflow as tf

    from train.mixing import mix_batch, mix_parameters

    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (6, 12, 10, 1)).astype("float32")
    labels = np.eye(4, dtype="float32")[rng.integers(0, 4, 6)]
    choices, lams = [], []
    for i in range(200):
        seed = tf.constant([3, i])
        use_cutmix, lam, box = mix_parameters(seed, 12, 10, mixup, cutmix)
        use_cutmix, lam, box = bool(use_cutmix), float(lam), [int(b) for b in box]
        choices.append(use_cutmix)
        lams.append(lam)
        assert 0 <= box[0] <= box[1] <= 12 and 0 <= box[2] <= box[3] <= 10
        if i < 20:
            mixed, mixed_labels = mix_batch(tf.constant(images), tf.constant(labels), seed, mixup, cutmix)
            expected, expected_labels = np_mix(images, labels, use_cutmix, lam, box)
            # float32, values up to 255: rounding of lam * x + (1 - lam) * y stays below 1e-4.
            np.testing.assert_allclose(mixed.numpy(), expected, atol=1e-4)
            np.testing.assert_allclose(mixed_labels.numpy(), expected_labels, atol=1e-6)
            np.testing.assert_allclose(mixed_labels.numpy().sum(-1), 1.0, atol=1e-6)
    share = np.mean(choices)
    if mixup and cutmix:
        assert 0.35 < share < 0.65  # switch probability 0.5
    else:
        assert share == (1.0 if cutmix else 0.0)
    # Beta(alpha, alpha) has mean 1/2 and variance 1 / (4 (2 alpha + 1)).
    assert abs(np.mean(lams) - 0.5) < 0.06
    if not cutmix:
        assert abs(np.var(lams) - 1 / (4 * (2 * mixup + 1))) < 0.02


def test_resume_is_exact_with_mixup_and_cutmix_and_keeps_order_with_randaugment(tmp_path):
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=40, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=8, seed=5, augmentation="inception_crop", end_epoch=2)
    full = batches(pipeline.make_train_dataset(source, mixup=0.8, cutmix=1.0, **kwargs), 10)  # 5 batches an epoch
    resumed = batches(pipeline.make_train_dataset(source, mixup=0.8, cutmix=1.0, start_epoch=1, skip_batches=2,
                                              **kwargs), 3)
    assert any(not np.isin(y, (0.0, 1.0)).all() for _, y in full)  # labels were mixed
    for (a, b), (c, d) in zip(full[7:], resumed):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    # RandAugment keeps its own random state (keras-cv): after a resume the images
    # it produces differ, but what is promised holds: the same examples, in the same order.
    plain = batches(pipeline.make_train_dataset(source, **kwargs), 10)
    full = batches(pipeline.make_train_dataset(source, randaugment=9, **kwargs), 10)
    resumed = batches(pipeline.make_train_dataset(source, randaugment=9, start_epoch=1, skip_batches=2, **kwargs), 3)
    for (_, plain_labels), (_, b), (_, d) in zip(plain[7:], full[7:], resumed):
        np.testing.assert_array_equal(plain_labels, b)
        np.testing.assert_array_equal(b, d)


def test_tfds_download_failure_is_one_line(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    def offline(self, *args, **kwargs):
        raise ConnectionError("Failed to resolve 'storage.googleapis.com'\nmore details\nand more")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", offline)
    with pytest.raises(data.DataUnavailableError) as caught:
        data.tfds_source("mnist", "train", data_dir=str(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("TFDS could not download or prepare 'mnist' into ")
    assert "(ConnectionError: Failed to resolve 'storage.googleapis.com')" in message
    assert "pass --data_dir=DIR" in message
    with pytest.raises(ValueError, match=r"Did you mean \['mnist'.*Received: dataset='mnistt'"):
        data.tfds_source("mnistt", "train", data_dir=str(tmp_path))


@pytest.mark.parametrize("pipelines, replicas", [(2, 2), (2, 4), (4, 4)])
def test_input_pipelines_read_disjoint_slices_of_the_single_process_batches(tmp_path, pipelines, replicas):
    import tensorflow as tf

    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=70, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=16, seed=2, augmentation="inception_crop", end_epoch=2,
                  start_epoch=0, skip_batches=1)
    single = batches(pipeline.make_train_dataset(source, **kwargs), 7)  # 4 steps an epoch, from step 1
    per_pipeline = []
    for pipeline_id in range(pipelines):
        context = tf.distribute.InputContext(pipelines, pipeline_id, replicas)
        per_pipeline.append(batches(pipeline.make_train_dataset(source, input_context=context, **kwargs),
                                    7 * replicas // pipelines))
    local = replicas // pipelines
    for step, (images, labels) in enumerate(single):
        parts = [per_pipeline[p][step * local + r] for p in range(pipelines) for r in range(local)]
        assert all(x.shape[0] == 16 // replicas for x, _ in parts)
        np.testing.assert_array_equal(np.concatenate([x for x, _ in parts]), images)
        np.testing.assert_array_equal(np.concatenate([y for _, y in parts]), labels)

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


def _format_zoo(directory):
    """One file per way a folder's image can be stored, cut from a real photograph."""
    import skimage.data
    from PIL import Image

    photo = Image.fromarray(skimage.data.chelsea()).resize((61, 47), Image.BICUBIC)
    os.makedirs(directory, exist_ok=True)
    files = {
        "q90_420.jpg": (photo, dict(quality=90)),
        "q95_444.jpg": (photo, dict(quality=95, subsampling=0)),
        "progressive.jpg": (photo, dict(quality=85, progressive=True)),
        "grey.jpg": (photo.convert("L"), dict(quality=90)),
        "cmyk.jpg": (photo.convert("CMYK"), dict(quality=90)),
        "rgb.png": (photo, {}),
        "rgba.png": (photo.convert("RGBA"), {}),
        "grey.png": (photo.convert("L"), {}),
        "one_bit.png": (photo.convert("1"), {}),
        "palette.png": (photo.convert("P", palette=Image.ADAPTIVE), {}),
        "palette_transparent.png": (photo.convert("P", palette=Image.ADAPTIVE), dict(transparency=3)),
        "grey16.png": (Image.fromarray(np.asarray(photo.convert("L")).astype(np.uint16) * 257), {}),
        "picture.gif": (photo, {}),
        "picture.bmp": (photo, {}),
    }
    for name, (image, options) in files.items():
        image.save(os.path.join(directory, name), **options)
    return sorted(files)


@pytest.mark.parametrize("channels", [3, 1])
def test_tensorflow_decoder_gives_pillows_pixels_and_leaves_only_other_formats_to_pillow(
        tmp_path, monkeypatch, channels):
    from PIL import Image

    names = _format_zoo(tmp_path / "zoo" / "train" / "cat")
    pillow_reads = []
    pillow_decode = data._pillow_decode

    def counting_pillow_decode(path, *args):
        pillow_reads.append(os.path.basename(path))
        return pillow_decode(path, *args)

    monkeypatch.setattr(data, "_pillow_decode", counting_pillow_decode)
    source = data.folder_source(str(tmp_path / "zoo"), "train", channels=channels)
    for index, name in enumerate(names):
        image, label, ok = (t.numpy() for t in source.read(index))
        with Image.open(tmp_path / "zoo" / "train" / "cat" / name) as reference:
            expected = np.asarray(reference.convert("RGB" if channels == 3 else "L")).reshape(47, 61, channels)
        assert ok and label == 0, name
        np.testing.assert_array_equal(image, expected, err_msg=name)  # exact: same pixels as Pillow
    # JPEG (CMYK included only if TensorFlow reads it) and 8-bit PNG never reach Python.
    assert set(pillow_reads) - {"cmyk.jpg"} == {"grey16.png", "picture.gif", "picture.bmp"}
    assert source.skipped.count == 0


def test_both_decoders_skip_and_count_truncated_and_fake_jpegs(tmp_path):
    root = make_image_folder(tmp_path / "images", per_class=2, corrupt=1)
    from PIL import Image

    good = os.path.join(root, "train", "class_1", "whole.jpg")
    Image.fromarray(np.full((30, 30, 3), 90, np.uint8)).save(good, quality=90)
    with open(good, "rb") as f:
        whole = f.read()
    with open(os.path.join(root, "train", "class_1", "truncated.jpg"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    for decoder in ("tensorflow", "pillow"):
        source = data.folder_source(root, "train", decoder=decoder)
        assert len(list(source.dataset)) == source.size - 2, decoder
        assert [os.path.basename(f) for f in source.skipped.files] == ["broken_0.jpg", "truncated.jpg"], decoder


def test_unknown_decoder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"decoder must be one of tensorflow, pillow. Received: decoder='cv2'"):
        data.folder_source(str(tmp_path), "train", decoder="cv2")


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
    stream = pipeline.make_train_dataset(source, (16, 16), 8, 0, "flip", randaugment="rand-m9-mstd0.5-inc1",
                                         random_erasing=0.25, mixup=0.8, cutmix=1.0)
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

    from keras_vit.preprocessing.mixing import mix_batch, mix_parameters

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


@pytest.mark.parametrize("repeats", [1, 3])
def test_resume_is_exact_with_every_augmentation_of_the_deit_recipe(tmp_path, repeats):
    """Crop, flip, RandAugment, erasing, MixUp/CutMix and repeated augmentation: all stateless."""
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=40, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=8, seed=5, augmentation="random_resized_crop", end_epoch=2,
                  randaugment="rand-m9-mstd0.5-inc1", random_erasing=0.25, mixup=0.8, cutmix=1.0,
                  repeated_augmentation=repeats)
    full = batches(pipeline.make_train_dataset(source, **kwargs), 10)  # 5 batches an epoch
    resumed = batches(pipeline.make_train_dataset(source, start_epoch=1, skip_batches=2, **kwargs), 3)
    assert any(not np.isin(y, (0.0, 1.0)).all() for _, y in full)  # labels were mixed
    for (a, b), (c, d) in zip(full[7:], resumed):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    other_seed = batches(pipeline.make_train_dataset(source, **{**kwargs, "seed": 6}), 1)
    assert not np.array_equal(other_seed[0][0], full[0][0])


def test_mixing_groups_mix_only_within_themselves_each_with_its_own_lambda(tmp_path):
    """timm mixes each GPU's batch on its own: `mixing_group` images share a lambda and partners."""
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=64, test=8))
    kwargs = dict(image_size=(12, 12), batch_size=16, seed=4, augmentation="none")
    plain = batches(pipeline.make_train_dataset(source, **kwargs), 4)
    mixed = batches(pipeline.make_train_dataset(source, mixup=0.8, mixing_group=4, **kwargs), 4)
    lambdas = set()
    for (x, y), (mx, my) in zip(plain, mixed):
        for group in range(4):
            rows = slice(4 * group, 4 * group + 4)
            first, partner = x[rows][0], x[rows][-1]
            lam = np.sum((mx[rows][0] - partner) * (first - partner)) / np.sum((first - partner) ** 2)
            # Each mixed image is lam * itself + (1 - lam) * its partner in the reversed group.
            np.testing.assert_allclose(mx[rows], lam * x[rows] + (1 - lam) * x[rows][::-1], atol=1e-3)
            np.testing.assert_allclose(my[rows], lam * y[rows] + (1 - lam) * y[rows][::-1], atol=1e-5)
            lambdas.add(round(float(lam), 4))
    assert len(lambdas) > 8  # a lambda per group, not per batch


def test_repeated_augmentation_shows_each_image_three_times_in_a_row_differently_augmented(tmp_path):
    source = data.fashion_mnist("train", data_dir=make_idx_dataset(tmp_path / "fm", train=48, test=8))
    stream = pipeline.make_train_dataset(source, (28, 28), 12, 1, "random_resized_crop", repeated_augmentation=3)
    images, labels = next(iter(stream))
    labels = labels.numpy().argmax(-1).reshape(4, 3)
    assert (labels == labels[:, :1]).all()  # each group of three is one example...
    images = images.numpy().reshape(4, 3, 28, 28, 1)
    for group in images:  # ...under different crops
        assert not np.array_equal(group[0], group[1]) and not np.array_equal(group[1], group[2])


def test_an_unprepared_tfds_dataset_without_a_network_fails_at_once(tmp_path, monkeypatch):
    """TFDS itself retries a download for minutes; the probe's deadline answers within seconds."""
    import socket
    import time

    def unreachable(address, timeout=None):
        assert timeout == data.NETWORK_DEADLINE_S
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    start = time.monotonic()
    with pytest.raises(data.DataUnavailableError) as caught:
        data.fashion_mnist("train", data_dir=str(tmp_path))  # no IDX files there: TFDS
    assert time.monotonic() - start < 30
    message = str(caught.value)
    assert "\n" not in message and "storage.googleapis.com:443 could not be reached within 10 s" in message
    assert "pass --data_dir=DIR" in message and not list(tmp_path.iterdir())  # nothing written


def test_tfds_download_failure_is_one_line(tmp_path, monkeypatch):
    import tensorflow_datasets as tfds

    def offline(self, *args, **kwargs):
        raise ConnectionError("Failed to resolve 'storage.googleapis.com'\nmore details\nand more")

    monkeypatch.setattr(tfds.core.DatasetBuilder, "download_and_prepare", offline)
    monkeypatch.setattr(data, "check_network", lambda name, data_dir: None)  # the host answers; the download fails
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


def test_evaluation_uses_the_checkpoints_own_transform_or_the_recipes_crop():
    import tensorflow as tf

    from keras_vit.preprocessing import EvalConfig, eval_transform, resize_config

    image = np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    # A plain resize (vit_jax's evaluation), described for EvalTransform in the exports.
    plain = pipeline.evaluation_transform((32, 32))
    np.testing.assert_array_equal(plain(image), tf.image.resize(tf.cast(image, tf.float32), (32, 32)))
    assert plain.config == resize_config(32)
    assert (plain.config.interpolation, plain.config.crop_mode, plain.config.crop_fraction) == ("bilinear", "squash", 1)
    assert not plain.config.antialias and not plain.config.round_to_uint8
    expected = eval_transform("Swin_B384/imagenet", image_size=32)(image)  # a squash, no crop
    # The checkpoint's own transform, however --pretrained names it, wins over a preset's --eval_crop.
    for name, model in (("Swin_B384/imagenet", None), ("imagenet", "Swin_B384"), ("swin_b384/IMAGENET", None)):
        own = pipeline.evaluation_transform((32, 32), pretrained=name, eval_crop=0.875, model=model)
        np.testing.assert_array_equal(own(image), expected)
    crop = pipeline.evaluation_transform((32, 32), pretrained="/some/file.keras", eval_crop=0.5)
    expected = eval_transform(EvalConfig(image_size=32, interpolation="bicubic", crop_fraction=0.5, crop_mode="center"))
    np.testing.assert_array_equal(crop(image), expected(image))
    gray = pipeline.evaluation_transform((32, 32), eval_crop=0.875, channels=1)(image[..., :1])
    assert gray.shape == (32, 32, 1)
    with pytest.raises(ValueError, match=r"makes square images\. Received: image_size=\(32, 48\)"):
        pipeline.evaluation_transform((32, 48), eval_crop=0.875)


def test_seeds_of_neighbouring_runs_and_epochs_draw_apart():
    """The augmentation key of (seed, epoch) is a hash: run s at epoch e+1 is not run s+1 at epoch e."""
    keys = {(s, e): int(pipeline._epoch_key(s, e)) for s in range(4) for e in range(4)}
    assert len(set(keys.values())) == len(keys)


def test_an_image_folders_evaluation_split_is_found_by_its_usual_names(tmp_path):
    # (subfolders, what a preset's "test" finds, what ImageNet's "validation" finds): the configured
    # name where the folder has it, else the first of validation/, val/ and test/.
    cases = ((("train", "validation"), "validation", "validation"),
             (("train", "val", "test"), "test", "val"),
             (("train", "test"), "test", "test"))
    for names, for_test, for_validation in cases:
        root = tmp_path / "-".join(names)
        for name in names:
            (root / name / "cat").mkdir(parents=True)
        assert data.folder_splits(str(root), "train", "test") == ("train", for_test)
        assert data.folder_splits(str(root), "train", "validation") == ("train", for_validation)


def test_an_image_folders_missing_split_names_the_flag_and_what_it_holds(tmp_path):
    (tmp_path / "photos" / "training" / "cat").mkdir(parents=True)
    (tmp_path / "photos" / "holdout" / "cat").mkdir(parents=True)
    root = str(tmp_path / "photos")
    with pytest.raises(ValueError, match=r"^--train_split names no subfolder of the image folder: .*its subfolders "
                                         r"here: holdout, training\. .*Received: train_split='train'$"):
        data.folder_splits(root, "train", "test")
    with pytest.raises(ValueError, match=r"^--eval_split names no subfolder of the image folder other than the "
                                         r"training split's: .*Pass the evaluation split's folder name as "
                                         r"--eval_split\. Received: eval_split='test'$"):
        data.folder_splits(root, "training", "test")
    assert data.folder_splits(root, "training", "holdout") == ("training", "holdout")

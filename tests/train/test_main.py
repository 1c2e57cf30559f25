"""Each path of train/main.py, run for real on tiny data (a few steps each)."""

import json
import os
import re
import signal
import subprocess
import time

import keras
import numpy as np
import pytest

import keras_vit  # noqa: F401  (registers the layers and schedules for loading)
from tests.train.helpers import (
    BACKEND,
    JIT_FLAG,
    ROOT,
    TINY_MODEL,
    call_main,
    main_command,
    make_idx_dataset,
    make_image_folder,
    run_main,
    tiny_flags,
)


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=256, test=64)


def load_checkpoint_into(model, folder):
    """Loads a checkpoint's raw model weights into `model`; returns its optimizer's `(path, value)` pairs.

    Either format: Keras' weights file and the optimizer's arrays (TensorFlow
    backend), or Orbax's state folder (JAX), whose entries follow the order of
    `model.weights` and of the optimizer's variables.
    """
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("format") == "orbax":
        import orbax.checkpoint as ocp

        state = ocp.StandardCheckpointer().restore(str(folder / "state"))
        model.set_weights([np.asarray(state["model"][key]) for key in sorted(state["model"])])
        model.optimizer.build(model.trainable_variables)
        names = [variable.path for variable in model.optimizer.variables]
        return [(name, np.asarray(state["optimizer"][key])) for name, key in zip(names, sorted(state["optimizer"]))]
    model.load_weights(str(folder / "model.weights.h5"))
    with np.load(folder / "optimizer.npz") as state:
        return [(key, state[key]) for key in sorted(state.files)]


def test_default_path_trains_evaluates_and_exports(tmp_path, idx_dir):
    import tensorflow as tf

    workdir = tmp_path / "run"
    started = time.monotonic()
    result = run_main(*tiny_flags(workdir, idx_dir, "--epochs=3", "--ema_decay=0.9", "--learning_rate=3e-3",
                                  "--steps_per_execution=4"))
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test accuracy" in result.stdout and "images/s" in result.stdout
    # No warning the user cannot act on (Keras' "shuffle=True is ignored" for a dataset, #41).
    assert "shuffle" not in result.stderr, result.stderr[-2000:]
    # The summary's wall time covers the process up to the export: at most the
    # subprocess's own duration, and more than the few seconds TensorFlow takes to import.
    wall = re.search(r"wall time +(?:(\d+) min )?(\d+) s \(process start to exported SavedModel\)", result.stdout)
    assert wall, result.stdout[-2000:]
    wall_seconds = 60 * int(wall.group(1) or 0) + int(wall.group(2))
    assert 3 <= wall_seconds <= elapsed + 1
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["step"] == 24 and summary["accuracy"] > 0.5  # 4 learnable classes
    # 8 steps an epoch in executions of 4: the speed counts steps, not callback calls.
    assert summary["timed_steps"] == 16 and summary["images_per_second"] > 0
    assert len(summary["history"]["loss"]) == 3
    assert os.listdir(workdir / "logs")
    # model.keras reloads; the SavedModel serves uint8 images as probabilities.
    model = keras.models.load_model(str(workdir / "model.keras"))
    images = np.random.default_rng(0).integers(0, 255, (3, 16, 16, 1)).astype(np.uint8)
    loaded = tf.saved_model.load(str(workdir / "saved_model"))
    probabilities = loaded.serve(tf.constant(images)).numpy()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(images.astype("float32"))))
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    with pytest.raises(Exception):
        loaded.serve(tf.constant(images.astype(np.float32)))
    # A photo of any size: resized inside as the evaluation resized its images (a plain float resize).
    photo = np.random.default_rng(1).integers(0, 255, (1, 23, 37, 1)).astype(np.uint8)
    resized = tf.image.resize(tf.cast(photo, tf.float32), (16, 16)).numpy()
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(resized)))
    np.testing.assert_allclose(loaded.serve(tf.constant(photo)).numpy(), expected, atol=1e-5)
    assert summary["channels"] == 1 and summary["eval_transform"]["crop_mode"] == "squash"
    assert f"classify a photo  python train/classify.py --workdir={workdir} photo.jpg" in result.stdout
    # EMA: the exported weights are the averages kept by the optimizer, not the raw ones.
    last = sorted(os.listdir(workdir / "checkpoints"), key=lambda d: -1 if d == "latest" else int(d.split("-")[1]))[-1]
    raw = keras.models.load_model(str(workdir / "model.keras"))
    optimizer_state = load_checkpoint_into(raw, workdir / "checkpoints" / last)
    exported = [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]
    raw_weights = [keras.ops.convert_to_numpy(w) for w in raw.trainable_weights]
    assert max(np.abs(a - b).max() for a, b in zip(exported, raw_weights)) > 1e-4
    ema = [value for name, value in optimizer_state if "average" in name]
    assert len(ema) == len(exported)
    for a, b in zip(exported, ema):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert not [f for f in os.listdir(workdir) if ".tmp" in f]


# The runs below are calls in this process (they were processes of their own until #38): the
# process around the trainer (exit codes, no traceback, signals) is tested above and in
# tests/bad_inputs/test_cli.py; what these check is the run itself.
def test_default_preset_is_the_hybrid_on_32_pixel_images(tmp_path, idx_dir):
    # The README's command without flags: the preset's model and size, with the
    # transformer shrunk and a few steps (the preset's BiT root stays as it is).
    workdir = tmp_path / "run"
    tiny_transformer = '{"hidden_size": 24, "num_layers": 1, "num_heads": 2, "mlp_dim": 32}'
    assert call_main([f"--workdir={workdir}", "--dataset=fashion_mnist", f"--data_dir={idx_dir}",
                      "--batch_size=32", "--steps=4", "--warmup_steps=2", JIT_FLAG,
                      f"--model_kwargs={tiny_transformer}"]) == 0
    config = json.loads((workdir / "config.json").read_text())
    assert config["image_size"] == 32 and config["model_kwargs"]["resnet_stages"] == []
    # Its evaluation: each test image and its mirror image (the training flips), both accuracies kept.
    assert config["eval_flip"] and config["augmentation"] == "flip"
    assert set(json.loads((workdir / "summary.json").read_text())) >= {"accuracy", "one_view_accuracy"}
    model = keras.models.load_model(str(workdir / "model.keras"))
    assert tuple(model.input_shape) == (None, 32, 32, 1)
    root = model.get_layer("conv_root")
    assert root.kernel.shape == (7, 7, 1, 64) and root.strides == (2, 2)
    # 32 px -> root stride 4 -> an 8x8 map -> 2x2 patches: 16 tokens and the class token.
    assert model.get_layer("patch_encoder").output.shape[1:] == (16, 24)
    assert model.get_layer("class_token").output.shape[1] == 17


def test_eval_flip_reports_and_serves_each_image_averaged_with_its_mirror_image(tmp_path, idx_dir, capsys):
    import tensorflow as tf

    from train.data import read_idx

    workdir = tmp_path / "run"
    assert call_main(list(tiny_flags(workdir, idx_dir, "--steps=24", "--learning_rate=1e-2", "--ema_decay=0.5",
                                           "--eval_flip=true"))) == 0
    out = capsys.readouterr().out
    summary = json.loads((workdir / "summary.json").read_text())
    # The reference: model.keras's logits on each test image and on its mirror image (numpy's
    # flip of the width axis), averaged here. Accuracy within one image of 64 (argmax of near ties
    # after another float summation order).
    images = read_idx(os.path.join(idx_dir, "t10k-images-idx3-ubyte.gz"))[..., None]
    labels = read_idx(os.path.join(idx_dir, "t10k-labels-idx1-ubyte.gz"))
    model = keras.models.load_model(str(workdir / "model.keras"))
    one_view = keras.ops.convert_to_numpy(model(images.astype("float32")))
    mirror = keras.ops.convert_to_numpy(model(images[:, :, ::-1].astype("float32")))
    averaged = (one_view + mirror) / 2
    assert abs(summary["accuracy"] - np.mean(averaged.argmax(-1) == labels)) <= 1 / 64 + 1e-6
    assert abs(summary["one_view_accuracy"] - np.mean(one_view.argmax(-1) == labels)) <= 1 / 64 + 1e-6
    # The loss tells the views apart where the accuracies (classes by brightness, which a mirror
    # keeps) may not: the preset's cross-entropy with label smoothing 0.1 of the averaged logits.
    def smoothed_cross_entropy(logits):
        targets = np.eye(logits.shape[-1])[labels] * 0.9 + 0.1 / logits.shape[-1]
        shifted = logits - logits.max(-1, keepdims=True)
        log_probabilities = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return float(np.mean(-(targets * log_probabilities).sum(-1)))

    # Measured: the run's loss within 1e-7 (relative) of this, the one view's 3e-5 away; so the
    # tolerance is 2e-6 and the views must differ by more than 1e-5.
    expected_loss, one_view_loss = smoothed_cross_entropy(averaged), smoothed_cross_entropy(one_view)
    assert summary["loss"] == pytest.approx(expected_loss, rel=2e-6)
    assert abs(one_view_loss - expected_loss) > 1e-5 * expected_loss
    assert f"test accuracy     {summary['accuracy']:.4f} (each image and its mirror image averaged" in out
    assert f"one view: {summary['one_view_accuracy']:.4f})" in out
    # The SavedModel serves the averaged model: on images that are not mirror-symmetric its log
    # probabilities are the average logits' log softmax (atol 1e-5), which the one view's miss.
    noise = np.random.default_rng(0).integers(0, 255, (3, 16, 16, 1)).astype(np.uint8)
    logits = [keras.ops.convert_to_numpy(model(x.astype("float32"))) for x in (noise, noise[:, :, ::-1])]
    expected = keras.ops.convert_to_numpy(keras.ops.log_softmax((logits[0] + logits[1]) / 2))
    assert np.abs(keras.ops.convert_to_numpy(keras.ops.log_softmax(logits[0])) - expected).max() > 1e-4
    loaded = tf.saved_model.load(str(workdir / "saved_model"))
    np.testing.assert_allclose(np.log(loaded.serve(tf.constant(noise)).numpy()), expected, atol=1e-5)


def test_on_the_accelerator_path_the_trainer_takes_the_lean_layers_and_says_so(tmp_path, idx_dir, capsys,
                                                                               monkeypatch):
    # What a GPU or TPU run takes by itself (`KERAS_VIT_CODE_PATH=auto` there), chosen on the CPU.
    from keras_vit.layers import lean, mlp, normalization

    monkeypatch.setenv("KERAS_VIT_CODE_PATH", "accelerator")
    calls = {"lean_layer_norm": 0, "lean_gelu_dense": 0}

    def counted(module, name):
        function = getattr(lean, name)

        def spy(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)

    counted(normalization, "lean_layer_norm")
    counted(mlp, "lean_gelu_dense")
    workdir = tmp_path / "run"
    assert call_main(list(tiny_flags(workdir, idx_dir, "--steps=4", "--precision=bfloat16"))) == 0
    out = capsys.readouterr().out
    summary = json.loads((workdir / "summary.json").read_text())
    # The block's two layer norms, the encoder's, and its MLP, traced in the training step.
    assert calls["lean_layer_norm"] >= 3 and calls["lean_gelu_dense"] >= 1, calls
    assert summary["code_path"] == "accelerator" and np.isfinite(summary["loss"])
    # On a CPU the attention is Keras's (XLA's own); on a GPU it would read "cudnn".
    assert set(summary["attention_kernels"]) == {"keras"} and summary["attention_kernels"]["keras"] >= 1
    assert (f"layers            accelerator path (lean layer norm and MLP backward); attention: "
            f"keras ({summary['attention_kernels']['keras']} traces)") in out


def test_image_folder_with_a_corrupt_file_and_sgd_linear(tmp_path, capsys):
    root = make_image_folder(tmp_path / "images", per_class=10, corrupt=1)
    argv = [
        f"--workdir={tmp_path / 'run'}", "--config=fashion_mnist_vit", f"--dataset=folder:{root}", "--image_size=16",
        "--batch_size=8", f"--model_kwargs={TINY_MODEL}", "--steps=6", "--optimizer=sgd",
        "--decay=linear", "--augmentation=inception_crop", JIT_FLAG, "--clip_norm=1.0",
    ]
    assert call_main(argv) == 0
    first = capsys.readouterr().out
    assert "skipped images    1" in first
    assert "layers " not in first  # the CPU path: no line on the accelerator's layers
    # The same command on a finished workdir trains nothing and exports again.
    assert call_main(argv) == 0
    again = capsys.readouterr().out
    assert "steps             6 (resumed from 6)" in again
    assert "already complete" in again


def test_finetune_from_a_generated_checkpoint_at_higher_resolution(tmp_path, idx_dir, capsys):
    source = keras_vit.VisionTransformer(
        image_size=16, num_channels=1, num_classes=7, **json.loads(TINY_MODEL), representation_size=8
    )
    source.save(str(tmp_path / "pretrained.keras"))
    assert call_main(list(tiny_flags(tmp_path / "run", idx_dir, "--image_size=24", "--steps=4", "--optimizer=sgd",
                                     f"--pretrained={tmp_path / 'pretrained.keras'}"))) == 0
    out = capsys.readouterr().out
    assert "resampled  patch_encoder/position_embedding" in out
    assert "(4, 4, 16) -> (6, 6, 16)" in out
    assert "num_classes differs (7 in the checkpoint, 10 in the model)" in out


def test_dinov2_fine_tunes_from_the_command_line_with_its_head(tmp_path, idx_dir, capsys):
    # DINOv2's builders are headless (a feature extractor) by default: trained on labels, the trainer
    # gives the model its head; the general builder is accepted like the named variants.
    model = '{"patch_size": 4, "hidden_size": 16, "num_layers": 1, "num_heads": 2, "mlp_dim": 32}'
    flags = ("--model=DINOv2", f"--model_kwargs={model}", "--steps=2")
    assert call_main(list(tiny_flags(tmp_path / "run", idx_dir, *flags))) == 0, capsys.readouterr().err[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert 0.0 <= summary["accuracy"] <= 1.0
    served = keras.models.load_model(str(tmp_path / "run" / "model.keras"))
    assert served.output_shape == (None, 10)  # Fashion-MNIST's classes
    # Headless on purpose is refused before anything is written, naming the flag.
    headless = model[:-1] + ', "include_top": false}'
    assert call_main(list(tiny_flags(tmp_path / "headless", idx_dir, "--model=DINOv2_S14",
                                     f"--model_kwargs={headless}", "--steps=2"))) == 2
    assert "--model=DINOv2_S14 is trained on labels here (--objective=classification), which needs its " \
           "classification head" in capsys.readouterr().err
    assert not (tmp_path / "headless").exists()
    # Any other model of features, not logits: refused after it is built, still before the first write.
    features = TINY_MODEL[:-1] + ', "include_top": false}'
    assert call_main(list(tiny_flags(tmp_path / "features", idx_dir, f"--model_kwargs={features}",
                                     "--steps=2"))) == 2
    assert "--model=VisionTransformer returns (None, 16), not the logits of the dataset's 10 classes" \
        in capsys.readouterr().err
    assert not (tmp_path / "features").exists()


def test_an_offline_known_pretrained_name_is_one_line_that_names_the_local_route(tmp_path, capsys, monkeypatch):
    import dataclasses

    from keras_vit import checkpoints
    from keras_vit.weights import registry

    # Offline as on a machine without a network: the address does not answer (here a missing file://).
    known = checkpoints.KNOWN_CHECKPOINTS["ViT_Ti16/augreg"]
    monkeypatch.setitem(checkpoints.KNOWN_CHECKPOINTS, "ViT_Ti16/augreg",
                        dataclasses.replace(known, url=f"file://{tmp_path}/offline/{known.url.rsplit('/', 1)[-1]}"))
    monkeypatch.setattr(registry, "CACHE_DIR", str(tmp_path / "cache"))
    root = make_image_folder(tmp_path / "images", per_class=2, size=16)
    status = call_main([f"--workdir={tmp_path / 'run'}", "--config=fashion_mnist_vit", f"--dataset=folder:{root}",
                        "--image_size=16", "--batch_size=4", "--model=ViT_Ti16", "--pretrained=ViT_Ti16/augreg",
                        "--steps=2", JIT_FLAG])
    err = capsys.readouterr().err
    assert status == 1, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: The checkpoint could not be downloaded from file://"), err
    assert "--pretrained= in train/main.py" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_short_fine_tune_fits_the_presets_warmup_and_ema_to_its_length_and_learns(tmp_path, capsys):
    # The `vit_finetune` preset (500 warmup steps, EMA 0.9999) for 6 steps on a folder of photos: the
    # zero-initialised head must move, and the run says what it fitted.
    import tensorflow as tf

    source = keras_vit.VisionTransformer(image_size=16, num_classes=7, **json.loads(TINY_MODEL))
    source.save(str(tmp_path / "pretrained.keras"))
    root = make_image_folder(tmp_path / "photos", per_class=4, size=20)
    workdir = tmp_path / "run"
    assert call_main([f"--workdir={workdir}", "--config=vit_finetune", "--model=VisionTransformer",
                      f"--model_kwargs={TINY_MODEL}", f"--pretrained={tmp_path / 'pretrained.keras'}",
                      f"--dataset=folder:{root}", "--eval_split=test", "--image_size=16", "--batch_size=8",
                      "--precision=float32", "--steps=6", JIT_FLAG]) == 0, capsys.readouterr().err[-3000:]
    out = capsys.readouterr().out
    assert "note: --warmup_steps=500 is not shorter than this run's 6 steps: warmup fitted to 0 steps" in out
    assert "note: --ema_decay=0.9999 averages over about 10,000 steps, more than this run's 6: EMA off." in out
    summary = json.loads((workdir / "summary.json").read_text())
    assert len(summary["fitted_to_run"]) == 2
    # The classes in label order: the folder's sorted subfolder names, in the summary and labels.txt.
    assert summary["class_names"] == ["class_0", "class_1", "class_2", "class_3"]
    assert (workdir / "labels.txt").read_text() == "class_0\nclass_1\nclass_2\nclass_3\n"
    assert f"labels            {workdir / 'labels.txt'} (4 classes, in label order)" in out
    images = np.random.default_rng(0).integers(0, 255, (4, 16, 16, 3)).astype(np.uint8)
    loaded = tf.saved_model.load(str(workdir / "saved_model"))
    probabilities = loaded.serve(tf.constant(images)).numpy()
    # Learned something: not the uniform 1/4 of a head still at zero.
    assert np.abs(probabilities - 0.25).max() > 0.01, probabilities
    # A photo of another size, prepared inside by the run's evaluation transform (the preset's: a
    # plain resize, recorded in the summary), as model.keras gets it from that transform here.
    from train.pipeline import evaluation_transform

    photo = np.random.default_rng(1).integers(0, 255, (41, 27, 3)).astype(np.uint8)
    transform = evaluation_transform((16, 16))
    assert transform.config.transform_settings() == {key: summary["eval_transform"][key]
                                                     for key in transform.config.transform_settings()}
    model = keras.models.load_model(str(workdir / "model.keras"))
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(transform(photo).numpy()[None])))
    np.testing.assert_allclose(loaded.serve(tf.constant(photo[None])).numpy(), expected, atol=1e-5)


def _wait_for_checkpoint(workdir, process, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (workdir / "checkpoints" / "latest").exists():
            return
        assert process.poll() is None, process.stderr.read()[-3000:]
        time.sleep(0.2)
    raise AssertionError("no checkpoint appeared")


# Every augmentation of the DeiT recipe (the `deit` preset's), with drop path: each draws its
# randomness from the step, so a resumed run must replay it exactly.
DEIT_RECIPE = ("--augmentation=random_resized_crop", "--randaugment=rand-m9-mstd0.5-inc1", "--random_erasing=0.25",
               "--repeated_augmentation=3", "--mixup=0.8", "--cutmix=1.0", "--label_smoothing=0.1",
               "--drop_path_rate=0.1", "--eval_crop=0.875")


# Both ways a run ends early, each resumed, against one uninterrupted run: SIGTERM (a preemption
# notice: the run checkpoints and exits 143) and SIGKILL (no notice), both with the DeiT recipe.
# The two were separate cases (term with the plain recipe), each with its own uninterrupted run;
# they now share it (#38): the plain recipe's path is the DeiT recipe's with the augmentations
# off. A plain SIGKILL case was dropped before, for the same reason. The recipe also stands for
# the DeiT recipe on grayscale data, which RandAugment's colour operations must handle (it was a
# test of its own).
# Over 60 s (about 100 s on TensorFlow and on JAX before #38 moved three of its five runs into this
# process): two killed trainer processes, each importing JAX and TensorFlow and compiling its step, two
# resumed runs and one straight.
def test_killed_runs_resume_at_the_checkpointed_step_and_match(tmp_path, idx_dir):
    flags = ("--epochs=4", "--checkpoint_every_steps=3", *DEIT_RECIPE)
    environment = {**os.environ, "KERAS_BACKEND": BACKEND}
    for kill_signal in (signal.SIGTERM, signal.SIGKILL):
        workdir = tmp_path / kill_signal.name
        process = subprocess.Popen(main_command(*tiny_flags(workdir, idx_dir, *flags)), cwd=ROOT, env=environment,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_checkpoint(workdir, process)
        process.send_signal(kill_signal)
        process.wait(timeout=120)
        assert process.returncode == (143 if kill_signal == signal.SIGTERM else -9)
        saved_step = int((workdir / "checkpoints" / "latest").read_text().split("-")[1])
        assert 0 < saved_step < 32
        # The resumed and straight runs are calls in this process: what crosses processes is the
        # killed run's checkpoint (they were processes of their own until #38).
        assert call_main(list(tiny_flags(workdir, idx_dir, *flags))) == 0
        summary = json.loads((workdir / "summary.json").read_text())
        assert summary["resumed_from_step"] == saved_step and summary["step"] == 32
        assert np.isfinite(summary["loss"])
    # An uninterrupted run with the same command ends with the same weights.
    assert call_main(list(tiny_flags(tmp_path / "straight", idx_dir, *flags))) == 0
    b = keras.models.load_model(str(tmp_path / "straight" / "model.keras"))
    for kill_signal in (signal.SIGTERM, signal.SIGKILL):
        a = keras.models.load_model(str(tmp_path / kill_signal.name / "model.keras"))
        for x, y in zip(a.weights, b.weights):
            np.testing.assert_allclose(keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(y), atol=1e-5,
                                       err_msg=kill_signal.name)


def test_tpu_flag_without_a_tpu_fails_fast_and_cleanly(tmp_path):
    start = time.time()
    result = run_main("--tpu", f"--workdir={tmp_path}", timeout=120)
    assert time.time() - start < 60
    assert result.returncode == 2
    assert "--tpu was given but" in result.stderr and "TPU" in result.stderr
    assert "Traceback" not in result.stderr


def test_dry_run_checks_the_flags_and_writes_nothing(tmp_path, capsys):
    workdir = tmp_path / "run"
    assert call_main([f"--workdir={workdir}", "--config=fashion_mnist_vit", "--steps=7", "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[:out.rindex("}") + 1])["steps"] == 7
    assert "Dry run:" in out and not workdir.exists()
    assert call_main([f"--workdir={workdir}", "--mixup=-1", "--dry_run"]) == 2
    assert "Received: mixup=-1" in capsys.readouterr().err and not workdir.exists()
    # An image folder's splits as it names them: the dry run finds validation/ for the preset's "test",
    # and refuses a folder without an evaluation split, naming the flag.
    photos = tmp_path / "photos"
    for split in ("train", "validation"):
        (photos / split / "cat").mkdir(parents=True)
    # An empty training split is refused (a run would stop reading it), naming the flags.
    assert call_main([f"--workdir={workdir}", "--config=fashion_mnist_vit", f"--dataset=folder:{photos}",
                      "--dry_run"]) == 2
    assert "no images in its 'train' split" in capsys.readouterr().err and not workdir.exists()
    for index in range(128):  # the preset's batch: every batch is whole
        (photos / "train" / "cat" / f"{index}.png").write_bytes(b"")
    assert call_main([f"--workdir={workdir}", "--config=fashion_mnist_vit", f"--dataset=folder:{photos}",
                      "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out[:out.rindex("}") + 1])["eval_split"] == "validation"
    (photos / "validation").rename(photos / "holdout")
    assert call_main([f"--workdir={workdir}", "--config=fashion_mnist_vit", f"--dataset=folder:{photos}",
                      "--dry_run"]) == 2
    assert "--eval_split names no subfolder of the image folder" in capsys.readouterr().err
    assert not workdir.exists()

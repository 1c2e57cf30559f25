"""train/classify.py and train/export.py on a finished run: photos of any size, from every exported file."""

import json
import os
import re

import keras
import numpy as np
import pytest
from PIL import Image

from tests.train.helpers import call_main, make_idx_dataset, tiny_flags
from train import classify, serving
from train import export as export_cli


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A grayscale run evaluated as the main job is: a plain resize and mirror averaging (`--eval_flip`)."""
    root = tmp_path_factory.mktemp("serving")
    idx_dir = make_idx_dataset(root / "fashion", train=64, test=32)
    workdir = root / "run"
    assert call_main(list(tiny_flags(workdir, idx_dir, "--steps=8", "--learning_rate=1e-2",
                                         "--eval_flip=true"))) == 0
    return workdir


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Colour photos of two sizes and formats: the gray run reads them as Pillow's luma, as its folders."""
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    paths = []
    for size, suffix in (((23, 37), "png"), ((50, 31), "jpg")):
        path = str(folder / f"photo_{size[0]}x{size[1]}.{suffix}")
        Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def test_every_exported_file_serves_the_runs_evaluation_of_a_photo(run, photos, capsys):
    from train.modeling import mirror_averaged
    from train.pipeline import evaluation_transform

    summary = json.loads((run / "summary.json").read_text())
    assert summary["channels"] == 1
    assert summary["eval_transform"]["crop_mode"] == "squash" and not summary["eval_transform"]["antialias"]
    assert export_cli.main([f"--workdir={run}", "--format=litert"]) == 0
    assert export_cli.main([f"--workdir={run}", "--format=openvino"]) == 0
    out = capsys.readouterr().out
    assert f"classify a photo: python train/classify.py --workdir={run} --format=openvino photo.jpg" in out
    assert sorted(os.listdir(run)) == ["checkpoints", "config.json", "labels.txt", "logs", "model.bin", "model.keras",
                                       "model.tflite", "model.xml", "saved_model", "summary.json"]
    # The reference: the evaluation pipeline's own transform of the photo, then model.keras averaged
    # with its mirror image (--eval_flip), then a softmax.
    one_view = keras.saving.load_model(str(run / "model.keras"))
    model = mirror_averaged(one_view)
    transform = evaluation_transform((16, 16), channels=1)

    def probabilities(classifier, image):
        return keras.ops.convert_to_numpy(keras.ops.softmax(classifier(image.numpy()[None])))[0]

    for path in photos:
        photo = serving.read_photo(path, channels=1)
        assert photo.shape[-1] == 1 and photo.dtype == np.uint8
        expected = probabilities(model, transform(photo))
        # The check tells transforms apart: a centre crop, or no mirror averaging, moves the
        # probabilities by more than 1e-4 (measured 1.0e-3 to 5.9e-3); each file is within 1e-5
        # (measured at most 3e-8: the SavedModel runs the pipeline's transform itself, LiteRT and OpenVINO
        # EvalTransform's matrix resize, equal to it to float32 rounding).
        for wrong in (probabilities(model, evaluation_transform((16, 16), eval_crop=0.875, channels=1)(photo)),
                      probabilities(one_view, transform(photo))):
            assert np.abs(wrong - expected).max() > 1e-4
        for file_format in serving.EXPORTED:
            served = serving.predictor(str(run), file_format)(photo)
            np.testing.assert_allclose(served, expected, atol=1e-5, err_msg=f"{file_format} {path}")
    # One line per photo: its most probable classes by name, from labels.txt.
    names = (run / "labels.txt").read_text().split()
    assert classify.main([f"--workdir={run}", "--format=litert", "--top=2", *photos]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"{photos[0]}: ")
    expected = probabilities(model, transform(serving.read_photo(photos[0], channels=1)))
    best = expected.argsort()[::-1][:2]
    assert lines[0] == f"{photos[0]}: " + ", ".join(f"{names[k]} {expected[k]:.3f}" for k in best)


@pytest.mark.parametrize("argv, message", [
    (["--format=tflite"], r"--format must be one of saved_model, litert, openvino\. Received: --format='tflite'"),
    (["--top=0"], r"--top must be a positive integer\. Received: --top=0"),
    (["--workdir=WORKDIR/missing"], r"--workdir must be the folder of a finished training run .* \(no summary\.json\)"),
    (["missing.jpg"], r"Cannot read the image 'missing\.jpg': the file does not exist\."),
    (["--workdir=gs://bucket/run"], r"--workdir must be a local folder here: copy the run's folder to this machine"),
])
def test_classify_refuses_with_one_line_naming_the_argument(run, photos, capsys, argv, message):
    argv = [arg.replace("WORKDIR", str(run)) for arg in argv]
    args = argv if any(not arg.startswith("--") for arg in argv) else [*argv, photos[0]]
    assert classify.main([f"--workdir={run}", *args]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.search(message, err), err


def test_export_refuses_before_writing_anything(run, capsys, monkeypatch, tmp_path):
    cases = [
        ([f"--workdir={run}", "--format=saved_model"],
         r"--format must be one of litert, openvino \(the run's SavedModel"),
        ([f"--workdir={run}", "--format=openvino", "--quantize=dynamic"],
         r"--quantize applies to --format=litert only"),
        ([f"--workdir={run}", "--format=litert", "--quantize=int8"], r"--quantize must be 'dynamic' or left out"),
        ([f"--workdir={tmp_path}", "--format=litert"], r"--workdir must be the folder of a finished training run"),
    ]
    for argv, message in cases:
        assert export_cli.main(argv) == 1
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and re.search(message, err), err
    monkeypatch.setattr(export_cli, "_BACKEND", "jax")
    assert export_cli.main([f"--workdir={tmp_path}", "--format=litert"]) == 1
    assert "Received: KERAS_BACKEND='jax'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_a_file_older_than_the_runs_model_is_refused(run, photos, capsys):
    # A LiteRT or OpenVINO file of an earlier run in the same workdir must not answer for this one.
    path = run / "model.xml"
    made_here = not path.exists()
    if made_here:
        path.write_text("<net/>")
    saved = path.stat()
    os.utime(path, (0, 0))
    try:
        assert classify.main([f"--workdir={run}", "--format=openvino", photos[0]]) == 1
    finally:
        if made_here:
            path.unlink()
        else:
            os.utime(path, (saved.st_atime, saved.st_mtime))
    err = capsys.readouterr().err
    assert "model.xml' is older than the run's model.keras" in err
    assert f"train/export.py --workdir={run} --format=openvino again" in err

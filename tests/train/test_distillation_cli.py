"""Distillation from the command line: `--teacher` and `--distillation`, resumed exactly, exporting the student."""

import json
import shutil

import keras
import numpy as np

import keras_vit  # noqa: F401  (registers the layers for loading)
from tests.train.helpers import main_here, make_idx_dataset, run_in_process, tiny_flags


def weights(path):
    return keras.models.load_model(str(path)).get_weights()


def test_hard_distillation_resumes_exactly_and_exports_the_student_alone(tmp_path, capsys):
    data = make_idx_dataset(tmp_path / "data", train=128, test=32)
    teacher = main_here(capsys, *tiny_flags(tmp_path / "teacher", data, "--steps=8"))
    assert teacher.returncode == 0, teacher.stderr[-3000:]
    flags = ("--steps=8", f"--teacher={tmp_path / 'teacher' / 'model.keras'}", "--distillation=hard",
             "--mixup=0.8")
    student = main_here(capsys, *tiny_flags(tmp_path / "student", data, *flags))
    assert student.returncode == 0, student.stderr[-3000:]
    assert json.loads((tmp_path / "student" / "summary.json").read_text())["step"] == 8

    # The exports are the student: the same weights as a model of its architecture, no teacher inside.
    exported = keras.models.load_model(str(tmp_path / "student" / "model.keras"))
    plain = keras.models.load_model(str(tmp_path / "teacher" / "model.keras"))  # same tiny ViT architecture
    assert [w.shape for w in exported.weights] == [w.shape for w in plain.weights]
    assert exported.output_shape == plain.output_shape

    # Resumed from its first checkpoint (step 4: 128 images in batches of 32), the
    # run ends with the uninterrupted run's weights: the teacher's targets, the
    # MixUp draws and the data order are all functions of the step.
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "student", resumed)
    for leftover in ("checkpoints/ckpt-8", "model.keras", "saved_model", "summary.json"):
        path = resumed / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (resumed / "checkpoints" / "latest").write_text("ckpt-4")
    again = main_here(capsys, *tiny_flags(resumed, data, *flags))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Resumed from ckpt-4 (step 4)" in again.stdout
    for a, b in zip(weights(resumed / "model.keras"), weights(tmp_path / "student" / "model.keras")):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_distillation_flags_are_checked_before_anything_runs(tmp_path, capsys):
    # In this process: the exit status and the absence of a traceback end to end are the
    # bad-flag tests' (tests/bad_inputs/test_cli.py).
    data = make_idx_dataset(tmp_path / "data", train=64, test=16)
    for flags, message in (
        (("--distillation=hard",), "--teacher and --distillation=hard|soft go together"),
        (("--teacher=ViT_Ti16",), "--teacher and --distillation=hard|soft go together"),
        (("--teacher=/no/such/teacher.keras", "--distillation=soft"), "--teacher"),
        (("--teacher=ViT_Ti16", "--distillation=fuzzy"), "--distillation must be one of"),
        (("--teacher=ViT_Ti16", "--distillation=soft", "--distillation_tau=0"), "--distillation_tau must be"),
    ):
        status, stderr = run_in_process(list(tiny_flags(tmp_path / "run", data, *flags)), capsys)
        assert status == 2, stderr[-2000:]
        assert message in stderr and "Traceback" not in stderr
        assert not (tmp_path / "run").exists()


def test_a_student_with_a_distillation_token_learns_on_both_heads(tmp_path, capsys):
    data = make_idx_dataset(tmp_path / "data", train=64, test=32)
    teacher = main_here(capsys, *tiny_flags(tmp_path / "teacher", data, "--steps=2"))
    assert teacher.returncode == 0, teacher.stderr[-3000:]
    (tiny_kwargs,) = [flag for flag in tiny_flags(tmp_path, data) if flag.startswith("--model_kwargs=")]
    tiny = json.loads(tiny_kwargs.split("=", 1)[1])
    student = main_here(capsys, *tiny_flags(tmp_path / "student", data, "--steps=4", "--distillation=soft",
                                   f"--teacher={tmp_path / 'teacher' / 'model.keras'}",
                                   f"--model_kwargs={json.dumps({**tiny, 'distillation': True})}"))
    assert student.returncode == 0, student.stderr[-3000:]
    model = keras.models.load_model(str(tmp_path / "student" / "model.keras"))
    heads = keras_vit.distillation_heads(model)
    images = np.random.default_rng(0).uniform(0, 255, (3, 16, 16, 1)).astype("float32")
    head, head_dist = (keras.ops.convert_to_numpy(x) for x in heads(images))
    # Both heads start at zero (ViT's head initialisation) and learn from different
    # targets, the labels and the teacher's distribution, so they differ; the exported
    # output is their average. (Four small steps: the logits are small, so compare relatively.)
    assert np.abs(head).max() > 0 and np.abs(head_dist).max() > 0
    assert not np.allclose(head, head_dist, rtol=0.1, atol=0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(images)), (head + head_dist) / 2, atol=1e-5)

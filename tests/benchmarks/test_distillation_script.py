"""benchmarks/distillation.py runs end to end on tiny settings and prints its table."""

import types

import pytest

from benchmarks import distillation
from benchmarks.distillation import SECTION, replace_section, supports_distillation_token
from tests.train.helpers import make_idx_dataset, run_student_here

# A tiny student (the preset's 7x7 patches on 28x28 images): each run takes seconds.
TINY_STUDENT = '{"hidden_size": 16, "num_layers": 2, "num_heads": 2, "mlp_dim": 32}'


def _rows(text):
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]


# The script runs in this process; of its trainer runs, the first student's is a process of its
# own, as the script runs them all (the subprocess plumbing, once), and the others are calls here
# (`run_student_here`: they were processes too until #38, about 75 s in all).
def test_distillation_prints_the_teacher_and_every_student_row(tmp_path, monkeypatch, capsys):
    source = make_idx_dataset(tmp_path / "source", train=256, test=64, size=28)
    workdir = tmp_path / "work"
    calls = []

    def run_student(*args):
        calls.append(args)
        return (distillation.run_student if len(calls) == 1 else run_student_here)(*args)

    monkeypatch.setattr(distillation, "run_student", run_student)
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")  # the student process's backend
    status = distillation.main([
        f"--source_dir={source}", "--train_size=256", "--test_size=64", "--steps=2", "--teacher_steps=2",
        "--seeds=0", "--attention_images=16", f"--model_kwargs={TINY_STUDENT}", f"--workdir={workdir}"])
    assert status == 0
    result = types.SimpleNamespace(stdout=capsys.readouterr().out)
    rows = _rows(result.stdout)
    expected = ["none", "none", "hard, one head"]
    if supports_distillation_token():
        expected.append("hard, distillation head")
        assert "distillation token" in rows[-1][0]
    else:
        assert "needs `keras_vit.VisionTransformer(distillation=True)`" in result.stdout
    assert [row[1] for row in rows] == expected, result.stdout
    assert rows[0][0].startswith("CNN teacher")
    for row in rows:
        assert 0 <= float(row[3]) <= 1 and 0 <= float(row[4]) <= 1  # test accuracy: mean, the one seed
    for row in rows[1:]:
        blocks = [float(d) for d in row[7].split(",")]
        # Two blocks; distances between patch centres of a 4x4 grid of 7-pixel patches.
        assert len(blocks) == 2 and all(0 < d <= 7 * 3 * 2**0.5 for d in blocks)
        assert 0 < float(row[6]) <= 7 * 3 * 2**0.5
    assert "Command: `python benchmarks/distillation.py" in result.stdout and "Machine: " in result.stdout
    # The slice, the teacher and each run stay in --workdir; BENCHMARKS.md is written only with --write.
    assert (workdir / "teacher.keras").is_file() and (workdir / "vit_hard" / "seed_0" / "summary.json").is_file()


def test_the_section_is_replaced_in_place_or_appended():
    text = "# Benchmarks\n\n## Earlier\n\nkept\n"
    appended = replace_section(text, f"{SECTION}\n\nfirst\n")
    assert appended == f"{text}\n{SECTION}\n\nfirst\n"
    later = appended + "\n## Later\n\nkept too\n"
    assert replace_section(later, f"{SECTION}\n\nsecond\n") == (
        f"{text}\n{SECTION}\n\nsecond\n\n## Later\n\nkept too\n")


def test_distillation_rejects_a_missing_source_and_a_used_workdir(tmp_path, capsys):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    source = make_idx_dataset(tmp_path / "source", train=8, test=8, size=28)
    for flags, message in (([f"--source_dir={tmp_path / 'none'}"], "--source_dir holds no"),
                           ([f"--source_dir={source}", f"--workdir={tmp_path / 'used'}"], "--workdir must be empty")):
        with pytest.raises(SystemExit) as exit_info:  # argparse's exit, before anything runs
            distillation.main(flags)
        stderr = capsys.readouterr().err
        assert exit_info.value.code == 2 and message in stderr, stderr[-2000:]

"""`experiments/masked_patch_prediction.py`: a tiny pretrain-then-fine-tune run beside scratch, and its verdicts."""

import json
import os

import pytest

from experiments import common, masked_patch_prediction
from tests.experiments.helpers import PNG


def test_pretrained_arm_fine_tunes_the_encoder_and_reports(tmp_path, source, capsys):
    figure, markdown, work = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    flags = ["--tiny", f"--source_dir={source}", "--test_size=32", "--seeds=0", "--arms=scratch,mean_color_50",
             "--fractions=0.5", f"--workdir={work}", f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert masked_patch_prediction.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    accuracy, (pretraining,), (difference,), (claim,) = rows[:2], rows[2:3], rows[3:4], rows[4:]
    assert [r[:3] for r in accuracy] == [["scratch", "50%", "64"], ["mean_color 50%", "50%", "64"]]
    assert all(0 <= float(r[3]) <= 1 and r[3] == r[4] for r in accuracy)  # one seed: the mean is the run
    assert pretraining[:2] == ["mean_color 50%", "0"] and float(pretraining[2]) > 0
    assert float(difference[2]) == pytest.approx(100 * (float(accuracy[1][3]) - float(accuracy[0][3])), abs=0.02)
    assert difference[3] == difference[5] == "n/a (one seed)"
    assert claim[0] == "(a) pretraining helps" and claim[3] == "n/a (one seed)"
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {masked_patch_prediction.TITLE}\n" in text
    assert common.table_rows(text.split(f"## {masked_patch_prediction.TITLE}\n", 1)[1]) == rows
    assert "Command: `python experiments/masked_patch_prediction.py" in text and "Machine: " in text
    assert figure.read_bytes().startswith(PNG)

    # The pretrained arm fine-tuned the pretraining run's exported encoder; scratch loaded nothing.
    runs = work / "runs"
    assert sorted(p.name for p in runs.iterdir()) == [
        "mean_color_50_0.5_seed_0.json", "pretrain_mean_color_50_seed_0.json", "scratch_0.5_seed_0.json"]
    pretrain = json.loads((runs / "pretrain_mean_color_50_seed_0.json").read_text())
    assert "--objective=masked_patch_prediction" in pretrain["flags"] and os.path.isfile(pretrain["model_path"])
    tuned = json.loads((runs / "mean_color_50_0.5_seed_0.json").read_text())
    assert f"--pretrained={pretrain['model_path']}" in tuned["flags"] and tuned["load_report"]
    scratch = json.loads((runs / "scratch_0.5_seed_0.json").read_text())
    assert not any(f.startswith("--pretrained") for f in scratch["flags"]) and scratch["load_report"] is None

    # --resume reads every run back instead of training it again; other settings are refused.
    assert masked_patch_prediction.main([*flags, "--resume"]) == 0
    captured = capsys.readouterr()
    assert common.table_rows(captured.out) == rows
    assert "pretraining mean_color 50%, seed 0: read back from" in captured.err
    assert "3 of the runs were trained by an earlier invocation" in captured.out
    with pytest.raises(SystemExit, match="was trained with other settings"):
        masked_patch_prediction.main([*flags, "--resume", "--pretrain_epochs=3"])


def comparison(a, b):
    return common.comparison(dict(enumerate(a)), dict(enumerate(b)))


def test_pretraining_helps_only_beyond_the_seed_to_seed_spread():
    beyond, within = comparison([0.82, 0.84], [0.80, 0.80]), comparison([0.81, 0.79], [0.80, 0.80])
    assert beyond["difference"] == pytest.approx(3.0) and beyond["spread"] == pytest.approx(1.0)
    assert beyond["paired"] == pytest.approx([2.0, 4.0]) and beyond["exceeds"]
    assert within["difference"] == pytest.approx(0.0) and not within["exceeds"]
    assert masked_patch_prediction.helps_verdict([beyond, beyond])[1] == "yes"
    assert masked_patch_prediction.helps_verdict([beyond, within]) == (
        "1 of 2 pretrained arms above scratch, 1 by more than the spread", "no")
    assert masked_patch_prediction.helps_verdict([comparison([0.9], [0.8])])[1] == "n/a (one seed)"


def test_mean_colour_at_least_as_good_as_pixels():
    assert masked_patch_prediction.colour_verdict(comparison([0.80, 0.82], [0.80, 0.82])) == "yes"
    assert masked_patch_prediction.colour_verdict(comparison([0.80, 0.82], [0.81, 0.83])) == "no, within the spread"
    assert masked_patch_prediction.colour_verdict(comparison([0.70, 0.71], [0.81, 0.82])) == "no"
    assert masked_patch_prediction.colour_verdict(comparison([0.7], [0.8])) == "no (one seed: no spread)"


@pytest.mark.parametrize("flags, message", [
    (["--arms=scratch,mae"], "--arms must be a comma-separated list"),
    (["--fractions=0"], "--fractions must be in (0, 1]"),
    (["--fractions=half"], "--fractions must be comma-separated numbers"),
    (["--resume"], "--resume needs --workdir"),
])
def test_bad_arguments_are_named(flags, message, source, capsys):
    with pytest.raises(SystemExit) as exit_info:
        masked_patch_prediction.parse_args([f"--source_dir={source}", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

"""`experiments/deit_recipe.py`: a tiny end-to-end run of both arms, and its pure helpers."""

import numpy as np
import pytest

from experiments import common, deit_recipe
from tests.experiments.helpers import PNG


def test_both_arms_train_and_report(tmp_path, source, capsys):
    pytest.importorskip("torch")
    figure, markdown = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md"
    flags = ["--tiny", f"--source_dir={source}", "--train_size=128", "--test_size=32", "--seeds=0",
             f"--workdir={tmp_path / 'work'}", f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert deit_recipe.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    runs, summary, (verdict,) = rows[:2], rows[2:4], rows[4:]
    assert [(r[0], r[1]) for r in runs] == [("keras_vit", "0"), ("timm", "0")]
    assert all(0 <= float(r[2]) <= 1 and float(r[3]) > 0 for r in runs)
    assert [(r[0], r[1]) for r in summary] == [("keras_vit", "1"), ("timm", "1")]
    assert float(verdict[0]) == pytest.approx(100 * (float(runs[0][2]) - float(runs[1][2])), abs=0.01)
    assert verdict[1] == verdict[4] == "n/a (one seed)"
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {deit_recipe.TITLE}\n" in text
    assert common.table_rows(out) == common.table_rows(text.split(f"## {deit_recipe.TITLE}\n", 1)[1])
    assert "Command: `python experiments/deit_recipe.py" in text and "Machine: " in text
    assert figure.read_bytes().startswith(PNG)
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["keras_vit_seed_0.json", "timm_seed_0.json"]

    # --resume reads the runs back instead of training them again; other settings are refused.
    assert deit_recipe.main([*flags, "--resume"]) == 0
    captured = capsys.readouterr()
    assert common.table_rows(captured.out) == rows and "keras_vit, seed 0: read back from" in captured.err
    with pytest.raises(SystemExit, match="was trained with other settings"):
        deit_recipe.main([*flags, "--resume", "--learning_rate=0.5"])


def test_our_smoothed_mix_is_timms_mixup_target():
    pytest.importorskip("torch")
    from runs.reference import timm, torch

    labels, lam, smoothing = torch.tensor([0, 3, 1, 2]), 0.3, 0.1
    expected = timm.data.mixup.mixup_target(labels, 4, lam, smoothing).numpy()
    one_hot = np.eye(4, dtype="float32")[labels.numpy()]
    mixed = lam * one_hot + (1 - lam) * one_hot[::-1]  # keras_vit's mix_batch pairs with the reversed batch
    np.testing.assert_allclose(deit_recipe.smooth_labels(mixed, smoothing), expected, atol=1e-6)


def test_agreement_is_the_difference_of_the_means_within_the_pooled_spread():
    rows = [{"arm": "keras_vit", "seed": 0, "accuracy": 0.80}, {"arm": "keras_vit", "seed": 1, "accuracy": 0.82},
            {"arm": "timm", "seed": 0, "accuracy": 0.81}, {"arm": "timm", "seed": 1, "accuracy": 0.79}]
    result = deit_recipe.comparison(rows)
    assert result["difference"] == pytest.approx(1.0)
    assert result["spread"] == pytest.approx(100 * 0.02 / 2**0.5)  # both arms' sd over seeds: 1.41 points
    assert result["paired"] == pytest.approx([-1.0, 3.0]) and result["agree"]
    rows[0]["accuracy"] = rows[1]["accuracy"] = 0.90
    assert not deit_recipe.comparison(rows)["agree"]


def test_rgb_images_are_resized_gray_repeated():
    images = np.random.default_rng(0).integers(0, 256, (2, 28, 28), dtype=np.uint8)
    rgb = deit_recipe.rgb_images(images, 32)
    assert rgb.shape == (2, 32, 32, 3) and rgb.dtype == np.uint8
    assert (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all()


@pytest.mark.parametrize("flags, message", [
    (["--arms=deit"], "--arms must be a comma-separated list"),
    (["--batch_size=33"], "--batch_size must be even"),
    (["--eval_crop=1.5"], "--eval_crop must be in (0, 1]"),
    (["--resume"], "--resume needs --workdir"),
])
def test_bad_arguments_are_named(flags, message, source, capsys):
    with pytest.raises(SystemExit) as exit_info:
        deit_recipe.parse_args([f"--source_dir={source}", "--arms=keras_vit", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

"""`experiments/axial_vit.py`: a tiny ViT and Axial-ViT of the same width, their accuracy and compute."""

import pytest

from experiments import axial_vit, common, vit_position_embeddings
from keras_vit.analysis import vit_forward_macs
from keras_vit.models.axial import axial_vit_forward_macs
from tests.experiments.helpers import PNG


def test_both_models_train_and_report_accuracy_and_compute(tmp_path, source, capsys):
    figure, markdown, work = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    flags = ["--tiny", f"--source_dir={source}", "--test_size=32", "--seeds=0", f"--workdir={work}",
             f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert axial_vit.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    (vit, axial), (accuracy, compute) = rows[:2], rows[2:]
    assert [r[:2] for r in (vit, axial)] == [["ViT", "`VisionTransformer`"], ["Axial-ViT", "`AxialViT_B16`"]]
    # The analytic counts of the tiny models (10 classes, as `compute` builds them) and of the paper's at 224 px.
    sizes = dict(vit_position_embeddings.MODEL, **common.TINY_MODEL, image_size=28, num_channels=1,
                 num_classes=10)
    assert float(vit[3]) == pytest.approx(vit_forward_macs(**sizes) / 1e6, abs=0.005)
    assert float(axial[3]) == pytest.approx(axial_vit_forward_macs(**sizes) / 1e6, abs=0.005)
    assert [vit[8], axial[8]] == ["17.56", "33.51"] and float(axial[3]) > float(vit[3])
    assert all(float(r[4]) > 0 and 0 <= float(r[5]) <= 100 and r[5] == r[6] for r in (vit, axial))  # one seed
    assert accuracy[0] == axial_vit.CLAIM_ACCURACY and accuracy[2].endswith("(one seed: no spread)")
    assert float(accuracy[1].split(": ")[1].split(" ")[0]) == pytest.approx(float(axial[5]) - float(vit[5]), abs=0.02)
    assert compute[0] == axial_vit.CLAIM_COMPUTE and compute[2] in ("yes (one seed)", "more MACs, but not slower "
                                                                     "at every seed")
    ratio = float(compute[1].split(" x")[1].split(" ")[0])
    assert ratio == pytest.approx(axial_vit_forward_macs(**sizes) / vit_forward_macs(**sizes), abs=0.005)
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {axial_vit.TITLE}\n" in text
    assert common.table_rows(text.split(f"## {axial_vit.TITLE}\n", 1)[1]) == rows
    assert "Command: `python experiments/axial_vit.py" in text and "Load average (1 min)" in text
    assert "The paper's accuracy finding" in text and figure.read_bytes().startswith(PNG)
    assert sorted(p.name for p in (work / "runs").iterdir()) == ["axial_seed_0.json", "vit_seed_0.json"]


def test_compute_finding_needs_more_macs_and_slower_training_at_every_seed():
    assert axial_vit.compute_verdict(1.9, [0.5, 0.6]) == "yes"
    assert axial_vit.compute_verdict(1.9, [0.5]) == "yes (one seed)"
    assert axial_vit.compute_verdict(1.9, [0.5, 1.1]) == "more MACs, but not slower at every seed"
    assert axial_vit.compute_verdict(0.9, [0.5, 0.6]) == "no (fewer forward MACs)"
    assert axial_vit.outcome("same direction, within the spread") == "comes out in its direction, within the spread"
    assert axial_vit.outcome("no (one seed: no spread)") == "does not reproduce (one seed: no spread)"

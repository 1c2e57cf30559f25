"""`experiments/swin_ablations.py`: a tiny run of shifted and unshifted windows beside the paper's numbers."""

import pytest

from experiments import common, swin_ablations
from tests.experiments.helpers import PNG


def test_two_rows_train_and_report_beside_the_paper(tmp_path, source, capsys):
    figure, markdown, work = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    flags = ["--tiny", f"--source_dir={source}", "--test_size=32", "--seeds=0", "--arms=unshifted,relative",
             f"--workdir={work}", f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert swin_ablations.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    (unshifted, shifted), (claim,) = rows[:2], rows[2:]
    assert [r[:4] for r in rows[:2]] == [["w/o shifting (rel. pos.)", "`shifted_windows=False`", "80.2", "2"],
                                         ["shifted windows, rel. pos. (Swin)", "defaults", "81.3", "1"]]
    assert all(0 <= float(r[4]) <= 100 and r[4] == r[6] for r in (unshifted, shifted))  # one seed
    assert claim[0] == swin_ablations.CLAIMS[0][0] and claim[1].startswith("relative - unshifted: ")
    assert float(claim[1].split(": ")[1].split(" ")[0]) == pytest.approx(
        float(shifted[4]) - float(unshifted[4]), abs=0.02)
    assert claim[2].endswith("(one seed: no spread)") and "One seed, so no spread" in out
    text = markdown.read_text()
    assert f"## {swin_ablations.TITLE}\n" in text and "resized to 32 px" in text
    assert common.table_rows(text.split(f"## {swin_ablations.TITLE}\n", 1)[1]) == rows
    assert "Command: `python experiments/swin_ablations.py" in text and figure.read_bytes().startswith(PNG)
    assert sorted(p.name for p in (work / "runs").iterdir()) == ["relative_seed_0.json", "unshifted_seed_0.json"]
    assert '"window_size": 4' in (work / "runs" / "unshifted_seed_0.json").read_text()

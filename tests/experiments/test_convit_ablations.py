"""`experiments/convit_ablations.py`: a tiny run of two rows beside the paper's numbers, and its verdicts."""

import pytest

from experiments import common, convit_ablations
from tests.experiments.helpers import PNG


def test_two_rows_train_and_report_beside_the_paper(tmp_path, source, capsys):
    figure, markdown, work = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    flags = ["--tiny", f"--source_dir={source}", "--test_size=32", "--seeds=0", "--arms=a,e", "--fraction=0.5",
             f"--workdir={work}", f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert convit_ablations.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    (full, deit), claims = rows[:2], rows[2:]
    assert [r[:4] for r in rows[:2]] == [["(a) ConViT", "defaults", "82.2", "1"],
                                         ["(e) no GPSA (DeiT)", "`num_gpsa_layers=0`", "79.1", "2"]]
    assert all(0 <= float(r[4]) <= 100 and r[4] == r[6] for r in (full, deit))  # one seed: the mean is the run
    assert [c[0] for c in claims] == [convit_ablations.CLAIMS[0][0], convit_ablations.CLAIMS[1][0]]
    difference = float(claims[0][1].split(": ")[1].split(" ")[0])
    assert difference == pytest.approx(float(full[4]) - float(deit[4]), abs=0.02)
    assert claims[0][2].endswith("(one seed: no spread)")
    assert "One seed, so no spread" in out and ("on 1 of the 1 pairs" in out or "on 0 of the 1 pairs" in out)
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {convit_ablations.TITLE}\n" in text
    assert common.table_rows(text.split(f"## {convit_ablations.TITLE}\n", 1)[1]) == rows
    assert "Command: `python experiments/convit_ablations.py" in text and "class-balanced 50%" in text
    assert figure.read_bytes().startswith(PNG)
    assert sorted(p.name for p in (work / "runs").iterdir()) == ["a_seed_0.json", "e_seed_0.json"]

    # --resume reads the runs back instead of training them again; other settings are refused.
    assert convit_ablations.main([*flags, "--resume"]) == 0
    captured = capsys.readouterr()
    assert common.table_rows(captured.out) == rows and "e, seed 0: read back from" in captured.err
    with pytest.raises(SystemExit, match="was trained with other settings"):
        convit_ablations.main([*flags, "--resume", "--fraction=0.25"])


@pytest.mark.parametrize("flags, message", [
    (["--arms=a,h"], "--arms must be a comma-separated list"),
    (["--fraction=0"], "--fraction must be in (0, 1]"),
    (["--resume"], "--resume needs --workdir"),
])
def test_bad_arguments_are_named(flags, message, source, capsys):
    with pytest.raises(SystemExit) as exit_info:
        convit_ablations.parse_args([f"--source_dir={source}", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

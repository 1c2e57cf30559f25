"""`experiments/vit_position_embeddings.py`: a tiny run of two rows beside Table 8, and the "differ little" check."""

import json

import pytest

from experiments import common, vit_position_embeddings
from tests.experiments.helpers import PNG


def test_two_rows_train_and_report_beside_table_8(tmp_path, source, capsys):
    figure, markdown, work = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    flags = ["--tiny", f"--source_dir={source}", "--test_size=32", "--seeds=0", "--arms=none,relative",
             f"--workdir={work}", f"--figure={figure}", "--write", f"--experiments_md={markdown}"]
    assert vit_position_embeddings.main(flags) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    (none, relative), (claim,) = rows[:2], rows[2:]
    assert [r[:4] for r in rows[:2]] == [["no position embedding", "`position_embedding='none'`", "61.382", "2"],
                                         ["1-D relative attention", "`position_embedding='relative'`", "64.032", "1"]]
    assert all(0 <= float(r[4]) <= 100 and r[4] == r[6] for r in (none, relative))  # one seed: the mean is the run
    assert claim[0] == vit_position_embeddings.CLAIMS[0][0] and claim[1].startswith("relative - none: ")
    assert float(claim[1].split(": ")[1].split(" ")[0]) == pytest.approx(float(relative[4]) - float(none[4]), abs=0.02)
    assert claim[2].endswith("(one seed: no spread)")
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {vit_position_embeddings.TITLE}\n" in text
    assert common.table_rows(text.split(f"## {vit_position_embeddings.TITLE}\n", 1)[1]) == rows
    assert "Command: `python experiments/vit_position_embeddings.py" in text and "patch_size 4" in text
    assert figure.read_bytes().startswith(PNG)
    assert sorted(p.name for p in (work / "runs").iterdir()) == ["none_seed_0.json", "relative_seed_0.json"]
    flags = json.loads((work / "runs" / "relative_seed_0.json").read_text())["flags"]
    assert json.loads(flags[1].split("=", 1)[1])["position_embedding"] == "relative"


def records(accuracies):
    return [{"arm": arm, "seed": seed, "accuracy": value}
            for arm, values in accuracies.items() for seed, value in enumerate(values)]


def test_kinds_differ_little_only_when_nearer_each_other_than_none():
    clustered = records({"none": (0.80, 0.81), "learned_1d": (0.85, 0.86), "learned_2d": (0.84, 0.85)})
    kinds = vit_position_embeddings.kinds_comparison(clustered, ["none", "learned_1d", "learned_2d"])
    assert kinds["range"] == pytest.approx(1.0) and kinds["margin"] == pytest.approx(4.0)
    assert (kinds["best"], kinds["worst"]) == ("learned_1d", "learned_2d")
    assert kinds["spread"] == pytest.approx(100 * 0.005 * 2**0.5)
    assert vit_position_embeddings.kinds_verdict(kinds) == "yes"
    spread_out = records({"none": (0.80, 0.81), "learned_1d": (0.90, 0.90), "relative": (0.82, 0.82)})
    assert vit_position_embeddings.kinds_verdict(vit_position_embeddings.kinds_comparison(
        spread_out, ["none", "learned_1d", "relative"])) == "no"
    assert vit_position_embeddings.kinds_comparison(clustered, ["none", "learned_1d"]) is None
    one_seed = records({"none": (0.8,), "learned_1d": (0.85,), "relative": (0.84,)})
    one_seed = vit_position_embeddings.kinds_comparison(one_seed, ["none", "learned_1d", "relative"])
    assert vit_position_embeddings.kinds_verdict(one_seed) == "yes (one seed: no spread)"
    assert vit_position_embeddings.paper_kinds() == pytest.approx((0.328, 2.582))

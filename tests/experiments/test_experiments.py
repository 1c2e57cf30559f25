"""The experiment scripts: a smoke run of each at a tiny size, and their pure helpers.

Each smoke run trains tiny models through `train/main.py` on a generated
4-class IDX dataset of 28x28 images, and checks the printed table, the PNG
figure(s) and the section written to a temporary EXPERIMENTS.md.
"""

import json
import os
import re

import numpy as np
import pytest

from experiments import common, convit_locality, convit_sample_efficiency, hybrid_compute, timm_parity
from experiments import vit_attention_distance
from tests.experiments.helpers import PNG
from tests.train.helpers import make_idx_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("source"), train=256, test=64, size=28)


def run(module, tmp_path, source, capsys, *flags):
    """Runs `module.main` at `--tiny` with `--write` into tmp_path; returns (stdout, Markdown, figure path)."""
    figure, markdown = tmp_path / "figures" / "figure.png", tmp_path / "EXPERIMENTS.md"
    assert module.main(["--tiny", f"--source_dir={source}", "--test_size=64", "--seeds=0",
                        f"--workdir={tmp_path / 'work'}", f"--figure={figure}", "--write",
                        f"--experiments_md={markdown}", *flags]) == 0
    out = capsys.readouterr().out
    text = markdown.read_text()
    assert text.startswith("# Experiments\n") and f"## {module.TITLE}\n" in text
    assert common.table_rows(out) == common.table_rows(text.split(f"## {module.TITLE}\n", 1)[1])
    assert "Command: `python experiments/" in text and "Machine: " in text
    assert figure.read_bytes().startswith(PNG) and "figures/figure.png" in text
    return out, text, figure


def accuracy(cell):
    return float(cell.split(" ")[0])


def test_sample_efficiency_smoke(tmp_path, source, capsys):
    out, _, _ = run(convit_sample_efficiency, tmp_path, source, capsys, "--fractions=0.5")
    (row,) = common.table_rows(out)
    assert row[:2] == ["50%", "128"]
    assert 0 <= accuracy(row[3]) <= 1 and 0 <= accuracy(row[4]) <= 1
    assert float(row[5]) == pytest.approx(100 * (accuracy(row[4]) - accuracy(row[3])), abs=0.01)


def test_locality_smoke(tmp_path, source, capsys):
    out, text, figure = run(convit_locality, tmp_path, source, capsys, "--models=convit")
    rows = common.table_rows(out)
    # The ConViT's two blocks: the first GPSA, its gate starting at sigma(1).
    assert [(r[0], r[1], r[2]) for r in rows] == [("ConViT", "1", "GPSA"), ("ConViT", "2", "SA")]
    assert float(rows[0][3]) == pytest.approx(1 / (1 + np.exp(-1)), abs=1e-3)
    assert all(0 < float(r[6]) < 3 * 2**0.5 for r in rows)  # patches of a 4x4 grid
    gates = common.sibling_figure(str(figure), "final_gates")
    assert open(gates, "rb").read().startswith(PNG) and "figure_final_gates.png" in text


def test_attention_distance_smoke(tmp_path, source, capsys):
    out, text, figure = run(vit_attention_distance, tmp_path, source, capsys, "--attention_images=16")
    rows = common.table_rows(out)
    assert [r[0] for r in rows[:2]] == ["1", "2"]  # the tiny ViT's two blocks
    uniform = float(rows[0][6])
    for row in rows[:2]:
        assert 0 < float(row[2]) <= float(row[1]) <= float(row[3]) <= 7 * 3 * 2**0.5
        assert len(row[4].split(",")) == 4  # heads
    assert 0 < uniform < 7 * 3 * 2**0.5
    assert [r[0] for r in rows[2:]] == ["at initialization", "after training (EMA weights)"]
    similarity = common.sibling_figure(str(figure), "position_similarity")
    assert open(similarity, "rb").read().startswith(PNG)


def test_hybrid_compute_smoke(tmp_path, source, capsys):
    out, _, _ = run(hybrid_compute, tmp_path, source, capsys, "--sizes=XS")
    rows = common.table_rows(out)
    assert [(r[0], r[1]) for r in rows] == [("ViT", "XS"), ("hybrid", "XS")]
    vit, hybrid = rows
    # The ResNet root adds compute: more MACs per image, and the same images seen.
    assert float(hybrid[3]) > float(vit[3]) > 0
    assert float(hybrid[4]) > float(vit[4]) > 0


def test_timm_parity_smoke(tmp_path, source, capsys):
    pytest.importorskip("torch")
    out, _, _ = run(timm_parity, tmp_path, source, capsys, "--initialization=deit", "--train_size=256")
    rows = common.table_rows(out)
    assert [(r[0], r[1]) for r in rows] == [("ViT", "deit"), ("ConViT", "deit")]
    for row in rows:
        ours, theirs = row[3].split(" / ")
        assert ours == theirs  # the same architecture: the same parameter count
        assert 0 <= accuracy(row[4]) <= 1 and 0 <= accuracy(row[5]) <= 1


# ---- helpers ---------------------------------------------------------------------------------


def test_balanced_indices_keep_the_class_shares_and_the_order():
    labels = np.array([0] * 60 + [1] * 30 + [2] * 10)
    np.random.default_rng(0).shuffle(labels)
    keep = common.balanced_indices(labels, 20)
    assert list(keep) == sorted(keep) and len(keep) == 20
    assert np.bincount(labels[keep]).tolist() == [12, 6, 2]
    for label in range(3):  # each class gives its earliest examples
        where = np.flatnonzero(labels == label)
        assert set(keep[labels[keep] == label]) == set(where[: np.sum(labels[keep] == label)])
    assert len(common.balanced_indices(labels, 1000)) == 100


def test_write_section_creates_replaces_in_place_and_appends(tmp_path):
    path = str(tmp_path / "EXPERIMENTS.md")
    common.write_section(path, "A", "## A\n\nfirst")
    assert open(path).read() == f"{common.HEADER}\n\n## A\n\nfirst\n"
    common.write_section(path, "B", "## B\n\nother")
    common.write_section(path, "A", "## A\n\nsecond")
    assert open(path).read() == f"{common.HEADER}\n\n## A\n\nsecond\n\n## B\n\nother\n"


def test_tables_with_two_seeds_give_spreads():
    rows = [{"fraction": 0.1, "images": 6000, "epochs": 100, "ViT": [0.80, 0.82], "ConViT": [0.84, 0.85]}]
    (row,) = common.table_rows(convit_sample_efficiency.table(rows, [0, 1]))
    assert row[3] == "0.8100 ± 0.0141" and row[5] == "+3.50 ± 0.71"
    parity = [{"model": "ViT", "initialization": "vit", "timm_initialization": "weight_init='jax'",
               "parameters": (10, 10), "keras_vit": [0.80, 0.82], "timm": [0.81, 0.83], "seconds": ([1], [2])}]
    (row,) = common.table_rows(timm_parity.table(parity, [0, 1]))
    assert row[6] == "-1.00" and row[7] == "-0.7"  # 1 point over a standard error of sqrt(2) points


@pytest.mark.parametrize("module, flags, message", [
    (convit_sample_efficiency, ["--fractions=0,1"], "--fractions must be in (0, 1]"),
    (convit_locality, ["--models=deit"], "--models must be a comma-separated list"),
    (hybrid_compute, ["--hybrid_stages=[0]"], "--hybrid_stages must be a JSON list"),
    (vit_attention_distance, ["--seeds=a"], "--seeds must be comma-separated integers"),
    (timm_parity, ["--initialization=jax"], "--initialization must be a comma-separated list"),
])
def test_bad_arguments_are_named(module, flags, message, source, capsys):
    with pytest.raises(SystemExit) as exit_info:
        module.parse_args([f"--source_dir={source}", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_missing_source_and_used_workdir_are_refused(tmp_path, source, capsys):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    for flags, message in (([f"--source_dir={tmp_path / 'none'}"], "--source_dir holds no"),
                           ([f"--source_dir={source}", f"--workdir={tmp_path / 'used'}"], "--workdir must be empty")):
        with pytest.raises(SystemExit):
            convit_sample_efficiency.parse_args(flags)
        assert message in capsys.readouterr().err
    assert os.listdir(tmp_path / "used") == ["file"]


def test_transfer_digits_smoke(tmp_path, source, capsys):
    # A tiny model of the main job's shape stands for its model.keras (`--encoder`); the script's own
    # main-job run is the same `train/main.py` as every other run here.
    import keras

    from experiments import transfer_digits

    kwargs = dict(common.TINY_MODEL, resnet_stages=[], patch_size=2)
    encoder, _ = common.build("VisionTransformer", dict(kwargs, initialization="deit"), image_size=32)
    encoder.save(str(tmp_path / "model.keras"))
    figure, markdown, work = tmp_path / "figure.png", tmp_path / "EXPERIMENTS.md", tmp_path / "work"
    assert transfer_digits.main(["--tiny", f"--source_dir={source}", "--seeds=0", f"--workdir={work}",
                                 f"--encoder={tmp_path / 'model.keras'}", "--train_sizes=20", "--steps=2",
                                 "--batch_size=10", f"--figure={figure}", "--write",
                                 f"--experiments_md={markdown}"]) == 0
    out = capsys.readouterr().out
    rows = common.table_rows(out)
    assert [(r[0], r[1]) for r in rows] == [("20", "pre-trained"), ("20", "scratch")]
    assert float(rows[0][5]) == pytest.approx(100 * (accuracy(rows[0][2]) - accuracy(rows[1][2])), abs=0.01)
    assert common.table_rows(markdown.read_text().split(f"## {transfer_digits.TITLE}\n", 1)[1]) == rows
    assert figure.read_bytes().startswith(PNG)
    # The digits as an image folder of gray PNGs: 450 test images, 2 of each digit in train_20.
    digits = work / "digits"
    assert sorted(os.listdir(digits)) == ["test", "train_20"]
    assert sum(len(os.listdir(digits / "test" / d)) for d in os.listdir(digits / "test")) == 450
    assert sorted(len(os.listdir(digits / "train_20" / d)) for d in os.listdir(digits / "train_20")) == [2] * 10
    from PIL import Image

    with Image.open(digits / "test" / "3" / os.listdir(digits / "test" / "3")[0]) as image:
        assert image.mode == "L" and image.size == (8, 8)
    # The fine-tuned start: the encoder's weights with a zero head (ViT App. B.1.1); both runs read one channel.
    zeroed = keras.saving.load_model(str(work / "pretrained_zero_head.keras"))
    for mine, theirs in zip(zeroed.weights, encoder.weights):
        expected = np.zeros(mine.shape) if mine.path.startswith("head/") else keras.ops.convert_to_numpy(theirs)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(mine), expected)
    for start in ("pre-trained", "scratch"):
        summary = json.loads((work / f"{start}_20" / "seed_0" / "summary.json").read_text())
        assert summary["channels"] == 1 and summary["class_names"] == [str(d) for d in range(10)]


@pytest.mark.parametrize("flags, message", [
    (["--train_sizes=5"], r"--train_sizes must be from 10 \(one of each digit\) to the 1347 training digits\. "
                          r"Received: train_sizes=5"),
    (["--train_sizes=20,2000"], r"Received: train_sizes=20,2000"),
    (["--train_sizes=20", "--batch_size=32"], r"--batch_size must be at most the smallest of --train_sizes \(20\)"),
    (["--encoder=/no/model.keras"], r"--encoder must be the main job's model\.keras .*Received: encoder='/no/model"),
])
def test_transfer_digits_refuses_bad_arguments_before_any_run(flags, message, source, capsys):
    from experiments import transfer_digits

    with pytest.raises(SystemExit) as exit_info:
        transfer_digits.main([f"--source_dir={source}", *flags])
    assert exit_info.value.code == 2
    assert re.search(message, capsys.readouterr().err)

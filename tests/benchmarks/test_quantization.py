"""benchmarks/quantization.py runs end to end on a tiny model and prints one row per form."""

import keras
import pytest

import keras_vit
from benchmarks.quantization import main
from tests.train.helpers import make_idx_dataset

FORMS = ["Keras float32", "Keras int8", "LiteRT float32", "LiteRT dynamic-range int8", "LiteRT int8"]


def _rows(text):
    return {cells[0]: cells[1:] for cells in (
        [cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| form"))}


# Over 60 s (about 65 s): every form of the model (float, Keras int8, LiteRT dynamic and int8,
# OpenVINO) is exported and evaluated, which is the script end to end.
@pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")
def test_quantization_table_has_every_form(tmp_path):
    data_dir = make_idx_dataset(tmp_path / "data", train=16, test=24, size=16)
    model = keras_vit.VisionTransformer(image_size=16, patch_size=4, num_channels=1, hidden_size=64, num_layers=1,
                                        num_heads=2, mlp_dim=128, num_classes=10)
    model.save(tmp_path / "model.keras")
    output = tmp_path / "table.md"
    text = main([f"--model={tmp_path / 'model.keras'}", f"--data_dir={data_dir}", "--limit=20", "--calibration=8",
                 "--batch_size=8", "--threads=1", f"--workdir={tmp_path / 'work'}", f"--output={output}"])
    rows = _rows(text)
    assert list(rows) == FORMS, text
    assert "20 test images, batches of 8" in text and output.read_text().strip() == text.strip()
    for form, cells in rows.items():
        if form == "LiteRT int8" and keras.backend.backend() == "jax":
            assert cells[0].startswith("failed: `quantize=\"int8\"` (full-integer) is only exported")
            continue
        accuracy, agreement, megabytes, speed = (float(cell) for cell in cells)
        assert 0 <= accuracy <= 1 and 0 <= agreement <= 1 and megabytes > 0 and speed > 0
    assert float(rows["Keras float32"][1]) == 1.0 and float(rows["LiteRT float32"][1]) == 1.0
    # int8 kernels: a smaller file than the float one in both formats (64-wide: weights outweigh the graph).
    assert float(rows["Keras int8"][2]) < float(rows["Keras float32"][2])
    assert float(rows["LiteRT dynamic-range int8"][2]) < float(rows["LiteRT float32"][2])


def test_quantization_rejects_a_non_positive_limit(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--model=x.keras", "--limit=0"])
    assert exit_info.value.code == 2 and "--limit must be a positive integer. Received: 0" in capsys.readouterr().err

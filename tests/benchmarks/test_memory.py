"""benchmarks/memory.py runs end to end on a two-block ViT and its table adds up."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rows(text):
    """Table rows as {layout: {column: cell}}."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[1:]]
    return {row["layout"]: row for row in rows}


def _mib(cell):
    return float(cell.split()[0].replace(",", ""))


def test_memory_table_adds_up(tmp_path):
    output = tmp_path / "memory.md"
    # The children always run JAX on 8 virtual devices, whatever this session's backend.
    done = subprocess.run(
        [sys.executable, "benchmarks/memory.py", "--variants=ViT_Ti16@224", "--num_layers=2",
         "--layouts=fsdp:2x4,dp:8", "--min_size=4096", "--batch_size=8", f"--output={output}"],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(done.stdout)
    assert set(rows) == {"FSDP, batch 2 x model 4", "data parallel, 8"}, done.stdout
    fsdp, data_parallel = rows["FSDP, batch 2 x model 4"], rows["data parallel, 8"]
    whole = _mib(fsdp["params MiB"])
    # Every kernel is split 4 ways; biases, norms and tokens (under 2% here) are not.
    assert whole / 4 <= _mib(fsdp["params MiB/device"]) <= 1.02 * whole / 4
    assert _mib(data_parallel["params MiB/device"]) == whole
    for row in (fsdp, data_parallel):
        # The optimizer's slots follow their weights' layouts, checked against a real build.
        # (Cells are rounded to 0.1 MiB: twice a rounded value is off by up to 0.15.)
        params = _mib(row["params MiB/device"])
        assert abs(_mib(row["AdamW moments MiB/device"]) - 2 * params) <= 0.15
        assert abs(_mib(row["EMA MiB/device"]) - params) <= 0.1
        assert row["allocated, device 0"] == "built: equal"
        assert row["batch/device"] == ("4" if row is fsdp else "1")
    # Recomputing the blocks needs fewer activations once XLA keeps jax.checkpoint's barriers.
    assert _mib(fsdp["remat (barriers kept)"]) < _mib(fsdp["step temp MiB/device: no remat"])
    assert output.read_text().strip() == done.stdout.strip()


def test_memory_rejects_a_layout_that_does_not_use_every_device():
    done = subprocess.run([sys.executable, "benchmarks/memory.py", "--layouts=fsdp:2x2"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "--layouts: 'fsdp:2x2' must use all 8 devices" in done.stderr
    done = subprocess.run([sys.executable, "benchmarks/memory.py", "--layouts=tp:8"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "--layouts: expected fsdp:BxM or dp:N. Received: 'tp:8'" in done.stderr

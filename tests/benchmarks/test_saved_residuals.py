"""`benchmarks/saved_residuals.py`: the accelerator path keeps at most 30 bytes per token x channel x layer.

The figure is traced, not timed: JAX's list of the residuals a training step
saves is a property of the program, the same on every machine with the same
JAX. ViT-B/16 in `mixed_bfloat16` is traced abstractly (nothing allocated).
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _summary(text):
    """{path: (outside attention, attention matrices, gradient GFLOPs)} from the script's first table."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] in ("cpu", "accelerator"):
            rows[cells[0]] = (float(cells[1]), float(cells[2]), float(cells[4].split()[0].replace(",", "")))
    return rows


def test_vit_b16_keeps_at_most_30_bytes_outside_attention_on_the_accelerator_path(tmp_path):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Activation memory\n\nstale\n\n## Next\n\nkept\n")
    result = subprocess.run(
        [sys.executable, "benchmarks/saved_residuals.py", "--variant=ViT_B16", f"--output={output}"],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _summary(result.stdout)
    assert rows.keys() == {"cpu", "accelerator"}
    (cpu_outside, cpu_attention, cpu_flops), (lean_outside, lean_attention, lean_flops) = rows["cpu"], rows["accelerator"]
    assert lean_outside <= 30.0 < cpu_outside
    assert lean_attention == cpu_attention  # the lean path changes nothing inside attention
    assert lean_flops <= 1.1 * cpu_flops  # bought without recomputing products
    # A by-line table per path (which frame JAX names for a line depends on the installed
    # libraries, so the sources are not checked), and the file's other sections survive.
    assert result.stdout.count("path, by source line:") == 2
    written = output.read_text()
    assert "stale" not in written and "## Next\n\nkept" in written and result.stdout.strip() in written


def test_bad_paths_and_batch_sizes_are_refused():
    for flag, message in (("--paths=gpu", "--paths takes cpu and accelerator"),
                          ("--batch_sizes=4,2", "--batch_sizes takes two increasing positive integers")):
        result = subprocess.run([sys.executable, "benchmarks/saved_residuals.py", flag], capture_output=True,
                                text=True, cwd=ROOT, timeout=120)
        assert result.returncode == 2 and message in result.stderr, result.stderr

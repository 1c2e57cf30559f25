"""`benchmarks/saved_residuals.py`: what the accelerator path keeps, and on a TPU no L x L matrix at all.

The figure is traced, not timed: JAX's list of the residuals a training step
saves is a property of the program, the same on every machine with the same
JAX. ViT-B/16 in `mixed_bfloat16` is traced abstractly (nothing allocated).
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _summary(text):
    """{path: (outside attention, attention matrices, the TPU kernel's, gradient GFLOPs)} from the first table."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("cpu", "accelerator", "tpu"):
            flops = None if cells[5] == "-" else float(cells[5].split()[0].replace(",", ""))
            rows[cells[0]] = (float(cells[1]), float(cells[2]), float(cells[3]), flops)
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
    assert rows.keys() == {"cpu", "accelerator", "tpu"}
    (cpu_outside, cpu_attention, cpu_kernel, cpu_flops) = rows["cpu"]
    (lean_outside, lean_attention, lean_kernel, lean_flops) = rows["accelerator"]
    assert lean_outside <= 30.0 < cpu_outside
    assert lean_attention == cpu_attention > 0 and cpu_kernel == lean_kernel == 0  # nothing changes inside attention
    assert lean_flops <= 1.1 * cpu_flops  # bought without recomputing products
    # On the emulated TPU, Splash keeps no L x L matrix: its padded q, k, v and output, and a
    # log-sum-exp per row (8 of 197 x 64 bytes a head: under 0.1), in place of the q, k, v slices
    # the other paths keep outside attention, and of their matrices.
    tpu_outside, tpu_attention, tpu_kernel, tpu_flops = rows["tpu"]
    assert tpu_attention == 0 < tpu_kernel < lean_attention and tpu_flops is None
    assert tpu_outside <= lean_outside and tpu_outside + tpu_kernel < lean_outside + lean_attention
    # A by-line table per path (which frame JAX names for a line depends on the installed
    # libraries, so the sources are not checked), and the file's other sections survive.
    assert result.stdout.count("path, by source line:") == 3
    written = output.read_text()
    assert "stale" not in written and "## Next\n\nkept" in written and result.stdout.strip() in written


def test_bad_paths_and_batch_sizes_are_refused():
    for flag, message in (("--paths=gpu", "--paths takes cpu, accelerator, tpu"),
                          ("--batch_sizes=4,2", "--batch_sizes takes two increasing positive integers")):
        result = subprocess.run([sys.executable, "benchmarks/saved_residuals.py", flag], capture_output=True,
                                text=True, cwd=ROOT, timeout=120)
        assert result.returncode == 2 and message in result.stderr, result.stderr

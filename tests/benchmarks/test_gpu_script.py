"""`benchmarks/gpu.sh` dry-run on the CPU: every step runs and lands in the table a device session records.

The figures of a dry run mean nothing (toy sizes, a CPU); what is tested is that the
prepared device call goes through from the first step to `table.md` without a failure,
so that a lent GPU's minutes are not spent on a broken script.
"""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = ("attention", "vit_b16_train", "vit_b16_infer", "vit_b16_fit", "deit_s16_train", "swin_t_train")


# Over 60 s (about 85 s): eleven processes (the attention check, five bench.py parents and their
# measuring children), each building a one-block model and compiling its step, as the device call runs them.
def test_dry_run_runs_every_step_and_writes_the_table(tmp_path):
    result = subprocess.run(["bash", "benchmarks/gpu.sh", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "DRY_RUN": "1"}, timeout=900)
    failures = tmp_path / "failures.txt"
    assert result.returncode == 0 and not failures.exists(), (result.stderr[-3000:], failures.exists()
                                                              and failures.read_text())
    table = (tmp_path / "table.md").read_text()
    assert "not measured" not in table
    for name in STEPS:
        assert (tmp_path / f"{name}.md").read_text().strip() in table
    # The attention check: both compiled steps, on the CPU, where no cuDNN kernel can be.
    assert "| train | cpu | cpu |" in table and "| infer | cpu | cpu |" in table
    for variant, mode in (("ViT_Ti16", "train"), ("ViT_Ti16", "infer"), ("ViT_Ti16", "fit"),
                          ("DeiT_Ti16", "train"), ("Swin_T", "train")):
        assert f"| keras | {variant} | 32 | 2 | {mode} |" in table, table

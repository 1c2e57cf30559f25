"""`benchmarks/gpu.sh` dry-run on the CPU: every step runs and lands in the table a device session records.

The figures of a dry run mean nothing (toy sizes, a CPU); what is tested is that the
prepared device call goes through from the first step to `table.md` without a failure,
so that a lent GPU's minutes are not spent on a broken script.
"""

import os
import re
import subprocess
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = ("attention", "profile", "vit_b16_train", "vit_b16_infer", "vit_b16_fit", "deit_s16_train",
         "swin_t_train")


def _gpu_sh(out, timeout=300, **env):
    """Runs `gpu.sh` as a dry run into `out`, with `env` added to this process's environment."""
    return subprocess.run(["bash", "benchmarks/gpu.sh", str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "DRY_RUN": "1", **env}, timeout=timeout)


def _rows(table):
    return [[cell.strip() for cell in line.split("|")] for line in table.splitlines()
            if line.startswith(("| keras", "| timm"))]


# Over 60 s (about 135 s in the suite): eighteen processes (the attention check, the step's
# profile, five bench.py parents and their eleven measuring children, keras_vit's and timm's),
# each building a one-block model and compiling its step, as the device call runs them. The benches against timm were two tests of
# their own until #38 (each a parent and its children on TensorFlow); they are the steps here.
def test_dry_run_runs_every_step_and_writes_the_table(tmp_path):
    result = _gpu_sh(tmp_path, timeout=900)
    failures = tmp_path / "failures.txt"
    assert result.returncode == 0 and not failures.exists(), (result.stderr[-3000:], failures.exists()
                                                              and failures.read_text())
    table = (tmp_path / "table.md").read_text()
    assert "not measured" not in table and "failed" not in table
    # The versions measured with, whether or not timm imports in this process.
    assert "Traceback" not in table and re.search(r"torch \S+ timm \d", table), table[:2000]
    for name in STEPS:
        assert (tmp_path / f"{name}.md").read_text().strip() in table
    # The attention check: both compiled steps, on the CPU, where no cuDNN kernel can be.
    assert "| train | cpu | cpu |" in table and "| infer | cpu | cpu |" in table
    # The step's profile: a row per kind of work (their figures are device_profile's own tests').
    for kind in ("matmul", "attention", "elementwise", "optimizer", "other"):
        assert f"| {kind} | " in table
    rows = _rows(table)
    # keras_vit's row for each step, and timm's beside it except for `fit` (Keras' own loop).
    assert [row[1:6] for row in rows] == [
        ["keras", "ViT_Ti16", "32", "2", "train"], ["timm", "ViT_Ti16", "32", "2", "train"],
        ["keras", "ViT_Ti16", "32", "2", "infer"], ["timm", "ViT_Ti16", "32", "2", "infer"],
        ["keras", "ViT_Ti16", "32", "2", "fit"],
        ["keras", "DeiT_Ti16", "32", "2", "train"], ["timm", "DeiT_Ti16", "32", "2", "train"],
        ["keras", "Swin_T", "32", "2", "train"], ["timm", "Swin_T", "32", "2", "train"],
    ], table
    for keras_row, timm_row in (rows[0:2], rows[2:4], rows[5:7], rows[7:9]):
        assert float(keras_row[7]) > 0 and float(timm_row[7]) > 0  # images/s
        assert keras_row[10] == timm_row[10]  # the same analytic GFLOP/img for both
        assert float(keras_row[14]) > 0  # keras/timm, paired
    # Two repeats of the inference step: each framework's row is the median of its runs.
    for row in rows[2:4]:
        runs = [float(value) for value in row[8].split(",")]
        assert len(runs) == 2 and float(row[7]) in runs, row


def test_a_spent_budget_runs_no_step_and_still_writes_the_table(tmp_path):
    result = _gpu_sh(tmp_path, BUDGET_S="1")
    assert result.returncode == 1
    table = (tmp_path / "table.md").read_text()
    for name in STEPS:
        assert f"{name}: not run (" in table, table
        assert not (tmp_path / f"{name}.md").exists()
    assert (tmp_path / "failures.txt").read_text().count("not run: out of time") == len(STEPS)
    assert "Seconds per step: attention 0;" in table


def _wheel(folder, name, version, files):
    """Writes a pure-Python wheel by hand: the files, and the metadata pip reads."""
    info = f"{name}-{version}.dist-info"
    contents = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    contents[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*contents, f"{info}/RECORD"])
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in contents.items():
            archive.writestr(member, text)
    return path


def test_carried_wheels_are_installed_ahead_of_the_machines_own_packages(tmp_path):
    # The device image lacks Keras, so its call carries the wheels gpu_wheels.sh downloads.
    # A stand-in `keras` wheel with a version no real Keras has shows that every step after
    # the install imports the carried package, not this machine's.
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "keras", "0.0.1", {"keras/__init__.py": "__version__ = '0.0.1+carried'\n"})
    out = tmp_path / "out"
    result = _gpu_sh(out, BUDGET_S="1", WHEELS=str(wheels))
    assert result.returncode == 1, result.stderr[-3000:]  # the spent budget: no step runs
    versions = (out / "gpu.txt").read_text()
    assert "wheels carried: keras-0.0.1-py3-none-any.whl" in versions, versions
    assert "keras 0.0.1+carried" in versions, versions


def test_wheels_that_do_not_install_stop_the_call_before_any_step(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "keras-0.0.1-py3-none-any.whl").write_bytes(b"not a zip archive")
    out = tmp_path / "out"
    result = _gpu_sh(out, WHEELS=str(wheels))
    assert result.returncode == 1
    assert f"the wheels in {wheels} did not install" in result.stderr
    assert not (out / "table.md").exists() and not (out / "seconds.txt").exists()


def test_only_runs_the_steps_it_names_and_refuses_a_step_that_does_not_exist(tmp_path):
    # A second device call for what the first left "not run": only those steps, in the table alone.
    result = _gpu_sh(tmp_path / "second", BUDGET_S="1", ONLY="deit_s16_train,swin_t_train")
    assert result.returncode == 1
    table = (tmp_path / "second" / "table.md").read_text()
    assert "deit_s16_train: not run (" in table and "swin_t_train: not run (" in table
    for name in STEPS[:5]:
        assert name not in table, table
    assert "Seconds per step: deit_s16_train 0; swin_t_train 0" in table

    result = _gpu_sh(tmp_path / "bad", BUDGET_S="1", ONLY="deit_s16_train,swin_b_train")
    assert result.returncode == 2
    assert "Received: ONLY=deit_s16_train,swin_b_train; the steps are: attention profile" in result.stderr
    assert not (tmp_path / "bad").exists()

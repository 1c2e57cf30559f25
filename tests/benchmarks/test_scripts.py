"""The benchmark scripts run end to end on tiny settings and print their tables."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args, env=None):
    result = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=600,
                            env={**os.environ, "KERAS_BACKEND": "tensorflow", **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_peak_flops_are_measured_on_tensorflow_too():
    # gpu.sh's dry run measures on JAX; a user's bench.py on TensorFlow takes the other branch.
    import keras

    from benchmarks import bench

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the TensorFlow branch")
    assert bench.keras_peak_flops("float32", size=64) > 0 and bench.keras_peak_flops("bfloat16", size=64) > 0


def test_repeats_give_the_median_run_and_the_median_paired_ratio():
    from benchmarks.bench import paired_ratio
    from runs.reporting import median_run

    keras_runs = [{"images_per_s": v, "tag": i} for i, v in enumerate([10.0, 30.0, 20.0])]
    timm_runs = [{"images_per_s": v} for v in [20.0, 10.0, 10.0]]
    row = median_run(keras_runs)
    assert row["tag"] == 2 and row["runs"] == [10.0, 30.0, 20.0]
    assert paired_ratio(keras_runs, timm_runs) == 2.0  # ratios 0.5, 3.0, 2.0
    assert paired_ratio(keras_runs, [{"error": "x"}] * 3) is None


def test_a_feature_extractor_is_timed_as_a_classifier_of_timms_size_on_both_sides():
    # DINOv2 is headless by default on both sides: each gets the same 1000-class head.
    import keras

    import keras_vit
    from benchmarks.bench import TIMM_NAMES, classifier_arguments
    from runs.reference import timm

    assert set(TIMM_NAMES) <= set(keras_vit.VARIANTS)
    assert classifier_arguments("ViT_B16") == ({}, {})
    keras_head, timm_head = classifier_arguments("DINOv2_S14")
    assert keras_head == {"include_top": True, "num_classes": 1000} and timm_head == {"num_classes": 1000}
    with keras.StatelessScope(initialize_variables=False):
        model = keras_vit.DINOv2_S14(image_size=224, **keras_head)
    reference = timm.create_model(TIMM_NAMES["DINOv2_S14"], img_size=224, **timm_head)
    assert model.count_params() == sum(p.numel() for p in reference.parameters())


def test_bench_rejects_unknown_variants():
    result = subprocess.run([sys.executable, "benchmarks/bench.py", "--variants=ViT_Q16"], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 2 and "--variants: unknown 'ViT_Q16'" in result.stderr


# About 45-55 s: four measuring processes, as the script runs them (each pinned to one core, three
# tracing DeiT's RandAugment into tf.data, timm's with a DataLoader worker), one per row it prints.
def test_input_pipeline_benchmark_measures_every_source():
    text = run("benchmarks/input_pipeline.py", "--images=24", "--image_size=32", "--batch_size=4", "--batches=2",
               "--warmup=1", "--threads=1")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith(("| ours", "| timm"))]
    assert [row[0].split(",")[0].split(":")[0] for row in rows] == ["ours", "ours", "ours", "timm"], text
    for name, threads, images_per_s, per_core, ratio, per_cpu_second, cpu_ratio, runs in rows:
        assert threads == "1" and float(images_per_s) > 0 and per_core == images_per_s == runs
        assert float(per_cpu_second) > 0
        if name.startswith("ours"):
            assert float(ratio) > 0 and float(cpu_ratio) > 0
        else:
            assert ratio == cpu_ratio == "-"


def _table_rows(text):
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| case")]


# About 55-70 s: each case is a process of its own with an XLA compile, as the script measures them
# (a two-block model); four cases cover the script's kinds (patched, model argument, compile
# argument, distribution scope).
def test_fast_paths_measures_each_case_and_remat_lowers_the_peak(tmp_path):
    output = tmp_path / "fast_paths.md"
    text = run("benchmarks/fast_paths.py", "--model=main_job", "--batch_size=8", "--steps=2", "--depth=2",
               "--steps_per_execution=2", "--cases=shipped,remat,steps_per_execution,xla_mirrored",
               f"--output={output}")
    rows = {row[0]: row for row in _table_rows(text)}
    assert set(rows) == {"shipped", "remat", "steps_per_execution (2)", "xla_mirrored"}, text
    for row in rows.values():
        assert float(row[1]) > 0 and float(row[5]) > 0  # images/s, peak MiB
    assert rows["shipped"][3] == "1.00"
    # Rematerialisation keeps fewer activations for the backward pass: a lower
    # peak in the device allocator (TensorFlow's BFC statistics) for the same batch.
    assert float(rows["remat"][5]) < float(rows["shipped"][5])
    assert output.read_text().strip() == text.strip()


def test_fast_paths_rejects_unknown_cases():
    result = subprocess.run([sys.executable, "benchmarks/fast_paths.py", "--cases=shipped,warp_drive"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 2 and "--cases: unknown ['warp_drive']" in result.stderr


def _dot_rows(text):
    """The rows of profile_step.py's dot table."""
    return [line for line in text.split("| dot output |")[1].splitlines()[2:] if line.startswith("| ")]


def test_profile_step_names_the_hlos_and_rates_the_dots(tmp_path):
    text = run("benchmarks/profile_step.py", "--variant=ViT_Ti16", "--image_size=32", "--batch_size=2", "--top=5",
               "--depth=2", env={"TMPDIR": str(tmp_path)})
    assert not list(tmp_path.glob("profile_step_*"))  # the HLO dump and trace are removed
    assert "kernel CPU" in text
    kinds = text.split("| HLO kind |")[1].split("| dot output |")[0]
    assert len([line for line in kinds.splitlines() if line.startswith("| ") and "---" not in line]) == 5
    dots = _dot_rows(text)
    # Every block's fc1 forward product is one group: (2 x 5 tokens, 768) from 192 inputs, once per block.
    fc1 = [line for line in dots if re.search(r"block_\*[^|]*/mlp[^|]*/fc1[^|]*/", line) and "gradient" not in line]
    assert fc1 and "| 10x768 | 192 |" in fc1[0] and "| 2 |" in fc1[0], dots


def test_profile_step_rates_the_products_jax_hands_to_a_library():
    # Under JAX, XLA:CPU runs the dense products as library fusions (`ynn_fusion`),
    # traced under the fusion's name: they must still be found and rated as dots.
    text = run("benchmarks/profile_step.py", "--backend=jax", "--variant=ViT_Ti16", "--image_size=32",
               "--batch_size=2", "--top=5", "--depth=2")
    assert ", jax, batch 2:" in text
    dots = _dot_rows(text)
    fc1 = [line for line in dots if re.search(r"jvp\(block_\*\)/mlp/fc1/", line) and "transpose(" not in line]
    assert len(fc1) == 1 and "| 10x768 | 192 |" in fc1[0] and "| 2 |" in fc1[0], dots
    assert float(fc1[0].split("|")[-2]) > 0  # GFLOP/s


def test_profile_step_rejects_an_unknown_backend():
    result = subprocess.run([sys.executable, "benchmarks/profile_step.py", "--backend=torch"], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "--backend: invalid choice: 'torch'" in result.stderr


@pytest.mark.parametrize("script, entry, argv, message", [
    ("attention_check", "parse_args", ["--depth=0"], "--depth must be a positive integer. Received: depth=0"),
    ("attention_check", "parse_args", ["--batch_size=-1"],
     "--batch_size must be a positive integer. Received: batch_size=-1"),
    ("serving", "main", ["--depth=-2"], "--depth must be a positive integer. Received: depth=-2"),
])
def test_counts_below_one_are_refused_by_name(script, entry, argv, message, capsys):
    import importlib

    with pytest.raises(SystemExit) as exit_info:
        getattr(importlib.import_module(f"benchmarks.{script}"), entry)(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

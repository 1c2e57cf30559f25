"""Shared pytest setup: deterministic seeds per test, and which backends each test runs on.

The README's test command runs the suite twice: every test on TensorFlow, then on JAX
only those marked `both_backends`, the tests whose result can differ between backends
(numerics of layers, models, the trainer, checkpoints and export). The rest are
`one_backend`: numpy converters and readers, `tf.data` preprocessing, CLI parsing,
docs, and tests whose subprocesses pin their own backend. Every test file is classified
in `BACKENDS` below, by folder or by file (`tests/test_markers.py` checks that none is
missing); a test may override its file with its own marker.

`slow` marks what the development loop, `pytest -m "not slow"`, leaves out: the tests
that took 5 s or more on two cores (`SLOW`: end-to-end subprocess runs, notebooks, the docs build).
"""

import contextlib
import functools
import gc
import os
import pathlib
import shutil
import tempfile

from tests.xla import CPU_PASSES_OFF

# XLA on the CPU, for the JAX backend and the JAX subprocesses that inherit this environment:
# - a compilation cache shared by every process of this run (xdist workers, trainer and
#   resume subprocesses, which compile the same tiny steps again and again);
# - the CPU backend's optimisation passes off: the tests check results, not speed (two model test
#   files on JAX: 68 s with the passes, 50 s without). A run that computes long enough to pay for
#   them turns them on again (`tests.xla.xla_flags(optimized=True)`).
# Set before Keras (and so JAX) is imported. xdist's workers inherit the controller's directory;
# the process that made it removes it when the session ends.
_MADE_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _MADE_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="keras_vit-xla-cache-")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
for _flag in CPU_PASSES_OFF:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

# OpenVINO's converter sends usage telemetry unless told not to, and each event forks the whole
# Python process (`multiprocessing`: 27 forks to export the testing ViT). A fork copies the page
# tables, and each page the process writes while the children live is copied: in an xdist worker
# that had grown to gigabytes, the OpenVINO tests took 212 test-seconds; their file alone, in a
# fresh process, 36 s.
# OpenVINO declines telemetry in CI jobs (`CI=true`), which this run is; the workers and
# subprocesses inherit it.
os.environ.setdefault("CI", "true")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

TESTS = pathlib.Path(__file__).resolve().parent

BOTH = "both_backends"
ONE = "one_backend"

# Longest matching path wins. Why a folder or file is on one backend, or on both:
BACKENDS = {
    # Numerics that each backend computes its own way.
    "layers": BOTH,
    "models": BOTH,
    "models/test_variants.py": ONE,  # parameter counts, from shapes alone
    "models/test_registration.py": ONE,  # tables and the named modules: no numerics
    "analysis": BOTH,  # attention maps, distances and features from the model's own calls
    "analysis/test_published_flops.py": ONE,  # arithmetic on the configuration
    "analysis/test_few_shot.py": ONE,  # numpy
    "pretraining": BOTH,  # targets computed with keras.ops
    "export": BOTH,  # each backend exports through its own path (jax2tf on JAX) or refuses
    "test_feature_extraction.py": BOTH,
    "test_classification.py": BOTH,  # the evaluation transform runs in the model's graph
    "test_schedules.py": BOTH,
    "preprocessing": ONE,  # tf.data ops whatever the backend
    "preprocessing/test_layers.py": BOTH,  # a Keras layer inside the model
    # preprocessing/test_resize_matrices.py: against tf.image.resize, on TensorFlow; its JAX numerics are
    # the classifier's in test_classification.py (both backends), against eval_transform.
    "weights": ONE,  # numpy readers and converters; the models' numerics are checked in models/
    "weights/test_resampling.py": BOTH,  # resampling runs in the model's graph for dynamic sizes
    # The trainer: checkpoints (Keras .h5 on TensorFlow, Orbax on JAX), steps and distribution differ.
    "train": ONE,
    "train/test_main.py": BOTH,
    "train/test_trainer.py": BOTH,
    "train/test_distillation.py": BOTH,
    "train/test_distillation_cli.py": BOTH,
    "train/test_masked_patch_prediction_cli.py": BOTH,
    "train/test_jax.py": BOTH,  # the JAX trainer: skipped on TensorFlow, its references run in-process
    # train/: test_data (tf.data), test_presets and test_swin_cli (configuration), test_analysis_logging
    # (a callback around numerics tested in analysis/), test_strategy, test_multi_worker
    # and test_remote_workdir (TensorFlow's own) stay on one; test_multi_host_jax's two-host test is
    # marked `both_backends` itself and skipped on TensorFlow, as test_jax is.
    "bad_inputs": ONE,  # refused before anything is built or run
    "bad_inputs/test_calls.py": BOTH,  # the image check lives in the model graph
    "bad_inputs/test_cli.py": BOTH,  # some flags are refused on one backend only
    "bad_inputs/test_workdir.py": BOTH,  # checkpoint formats differ
    "bad_inputs/test_workdir_lock.py": BOTH,
    "test_distribution.py": ONE,  # its runs are subprocesses pinned to JAX
    "test_allocator.py": ONE,  # TensorFlow's allocator, in subprocesses
    "test_files.py": ONE,
    "test_catalog.py": ONE,  # tables and counts without weights
    "test_imagenet.py": ONE,
    "test_images.py": ONE,
    "test_import_graph.py": ONE,
    "test_readme.py": ONE,
    "test_typing.py": ONE,
    "test_requirements.py": ONE,
    "test_utils.py": ONE,
    "test_markers.py": ONE,
    # Scripts and documents: plumbing around numerics tested above; their subprocesses pick a backend.
    "benchmarks": ONE,
    "docs": ONE,
    "experiments": ONE,
    "notebooks": ONE,
    "release": ONE,
}


# The tests the development loop leaves out: each took 5 s or more on two cores (a TensorFlow
# run of the whole suite under `-n 2`, 2026-11-28). Every parametrization of a test shares its mark.
SLOW = {
    # analysis/test_published_flops.py
    "analysis/test_published_flops.py::test_convit_costs_its_vit_plus_the_positional_scores",
    "analysis/test_published_flops.py::test_forward_macs_match_published_counts",
    # bad_inputs/test_cli.py
    "bad_inputs/test_cli.py::test_bad_flags_end_to_end_exit_2_without_a_traceback",
    # bad_inputs/test_workdir.py
    "bad_inputs/test_workdir.py::test_a_really_full_file_system_stops_the_run_keeps_the_last_checkpoint_and_resumes",
    "bad_inputs/test_workdir.py::test_a_refused_resume_leaves_the_workdir_byte_for_byte",
    "bad_inputs/test_workdir.py::test_another_runs_workdir_is_refused_before_anything_is_written",
    "bad_inputs/test_workdir.py::test_damaged_latest_checkpoint_falls_back_to_the_older_one_and_resumes_exactly",
    "bad_inputs/test_workdir.py::test_every_kind_of_damage_is_detected",
    "bad_inputs/test_workdir.py::test_full_or_read_only_workdir_is_one_line_and_keeps_the_last_checkpoint",
    "bad_inputs/test_workdir.py::test_leftovers_of_a_killed_save_are_removed_and_strays_are_left_alone",
    "bad_inputs/test_workdir.py::test_sigterm_handler_is_restored_when_training_ends",
    # bad_inputs/test_workdir_lock.py
    "bad_inputs/test_workdir_lock.py::test_a_second_trainer_is_refused_and_a_killed_ones_lock_is_taken_over",
    # benchmarks/test_cpu_isa.py
    "benchmarks/test_cpu_isa.py::test_capped_processes_report_avx2_and_compute_float32_products_in_float32",
    # benchmarks/test_device_profile.py
    "benchmarks/test_device_profile.py::test_a_cpu_run_attributes_the_step_to_every_kind",
    # benchmarks/test_distillation_script.py
    "benchmarks/test_distillation_script.py::test_distillation_prints_the_teacher_and_every_student_row",
    "benchmarks/test_distillation_script.py::test_distillation_rejects_a_missing_source_and_a_used_workdir",
    # benchmarks/test_gpu_script.py
    "benchmarks/test_gpu_script.py::test_dry_run_runs_every_step_and_writes_the_table",
    # benchmarks/test_memory.py
    "benchmarks/test_memory.py::test_memory_table_adds_up",
    # benchmarks/test_quantization.py
    "benchmarks/test_quantization.py::test_quantization_table_has_every_form",
    # benchmarks/test_saved_residuals.py
    "benchmarks/test_saved_residuals.py::test_vit_b16_keeps_at_most_30_bytes_outside_attention_on_the_accelerator_path",
    # benchmarks/test_scripts.py
    "benchmarks/test_scripts.py::test_a_feature_extractor_is_timed_as_a_classifier_of_timms_size_on_both_sides",
    "benchmarks/test_scripts.py::test_fast_paths_measures_each_case_and_remat_lowers_the_peak",
    "benchmarks/test_scripts.py::test_fast_paths_rejects_unknown_cases",
    "benchmarks/test_scripts.py::test_input_pipeline_benchmark_measures_every_source",
    "benchmarks/test_scripts.py::test_profile_step_names_the_hlos_and_rates_the_dots",
    "benchmarks/test_scripts.py::test_profile_step_rates_the_products_jax_hands_to_a_library",
    # benchmarks/test_serving.py
    "benchmarks/test_serving.py::test_tiny_run_measures_each_path_and_writes_its_section",
    # docs/test_browser.py
    "docs/test_browser.py::test_every_page_loads_without_errors_and_fits_a_laptop_window",
    # docs/test_docs_command.py
    "docs/test_docs_command.py::test_the_readme_docs_command_builds_the_site_in_a_new_venv",
    # docs/test_site.py
    "docs/test_site.py::test_python_blocks_run",
    # experiments/test_axial_vit.py
    "experiments/test_axial_vit.py::test_both_models_train_and_report_accuracy_and_compute",
    # experiments/test_convit_ablations.py
    "experiments/test_convit_ablations.py::test_two_rows_train_and_report_beside_the_paper",
    # experiments/test_deit_recipe.py
    "experiments/test_deit_recipe.py::test_both_arms_train_and_report",
    # experiments/test_experiments.py
    "experiments/test_experiments.py::test_attention_distance_smoke",
    "experiments/test_experiments.py::test_hybrid_compute_smoke",
    "experiments/test_experiments.py::test_transfer_digits_smoke",
    "experiments/test_experiments.py::test_locality_smoke",
    "experiments/test_experiments.py::test_sample_efficiency_smoke",
    "experiments/test_experiments.py::test_timm_parity_smoke",
    # experiments/test_masked_patch_prediction.py
    "experiments/test_masked_patch_prediction.py::test_pretrained_arm_fine_tunes_the_encoder_and_reports",
    # experiments/test_swin_ablations.py (every test)
    "experiments/test_swin_ablations.py::test_two_rows_train_and_report_beside_the_paper",
    # experiments/test_vit_position_embeddings.py
    "experiments/test_vit_position_embeddings.py::test_two_rows_train_and_report_beside_table_8",
    # export/test_dequantize.py (every test)
    "export/test_dequantize.py::test_int8_blocks_keras_file_round_trip",
    "export/test_dequantize.py::test_keras_int8_model_exports_to_saved_model_and_litert",
    "export/test_dequantize.py::test_keras_int8_quantizes_every_block_dense",
    # export/test_litert.py
    "export/test_litert.py::test_dynamic_and_int8_files_stay_close_to_float",
    "export/test_litert.py::test_file_batch_size_is_free_on_tensorflow_and_fixed_on_jax",
    # export/test_openvino.py
    "export/test_openvino.py::test_a_failed_export_leaves_the_old_files_and_no_temporary_folder",
    "export/test_openvino.py::test_a_failed_graph_rename_puts_the_old_weights_back",
    "export/test_openvino.py::test_batch_size_is_free_unless_fixed",
    "export/test_openvino.py::test_bfloat16_inference_stays_close_to_float",
    "export/test_openvino.py::test_float_model_computes_the_keras_outputs",
    "export/test_openvino.py::test_jax_backend_is_refused_with_the_way_out",
    "export/test_openvino.py::test_keras_int8_model_exports_its_dequantized_weights",
    # layers/test_tpu_attention.py (each model on both paths, its TPU kernel interpreted: 5-12 s)
    "layers/test_tpu_attention.py::test_float32_features_and_gradients_equal_the_cpu_path",
    "layers/test_tpu_attention.py::test_bfloat16_features_and_gradients_stay_close_to_the_cpu_path",
    "layers/test_tpu_attention.py::test_over_8_devices_the_kernel_runs_per_device_in_shard_map_and_computes_what_one_device_does",
    # layers/test_lean.py
    "layers/test_lean.py::test_fit_takes_the_same_step_on_both_paths",
    # models/test_dynamic_size.py
    "models/test_dynamic_size.py::test_fits_and_predicts_at_several_sizes",
    "models/test_dynamic_size.py::test_saved_model_serves_any_size",
    # models/test_masked_patch_prediction.py
    "models/test_masked_patch_prediction.py::test_distributed_training_steps_as_one_device",
    # models/test_models.py
    "models/test_models.py::test_compiles_and_fits",
    "models/test_models.py::test_mixed_bfloat16_builds_runs_and_saves",
    # models/test_swin.py
    "models/test_swin.py::test_remat_gives_the_same_outputs_and_training_step",
    "models/test_swin.py::test_saved_model_export_serves_same_outputs",
    # notebooks/test_notebooks.py
    "notebooks/test_notebooks.py::test_notebook_runs_twice_and_draws",
    "notebooks/test_notebooks.py::test_train_on_tpu_switched_to_tensorflow_tpu_says_so_when_there_is_no_tpu",
    "notebooks/test_notebooks.py::test_train_on_tpu_trains_data_parallel_over_8_jax_devices",
    # preprocessing/test_layers.py (every test)
    "preprocessing/test_layers.py::test_a_model_with_its_evaluation_transform_in_front_loads_in_a_fresh_process",
    # preprocessing/test_randaugment.py
    "preprocessing/test_randaugment.py::test_a_grayscale_image_stays_grey_with_a_grey_fill",
    "preprocessing/test_randaugment.py::test_compiled_and_graph_operations_agree",
    "preprocessing/test_randaugment.py::test_geometric_operation_matches_timm_inside_and_in_the_fill",
    "preprocessing/test_randaugment.py::test_policy_change_distribution_matches_timms",
    # preprocessing/test_training.py
    "preprocessing/test_training.py::test_deit_transform_follows_timms_create_transform",
    # release/test_wheel.py
    "release/test_wheel.py::test_the_wheel_installs_into_a_new_environment_and_trains",
    # test_allocator.py
    "test_allocator.py::test_import_keras_vit_leaves_the_environment_unchanged",
    # test_catalog.py: the tests that read every checkpoint's row (53 models built without weights, 17 s)
    "test_catalog.py::test_every_known_checkpoint_has_one_row_with_its_parameter_count",
    "test_catalog.py::test_columns_come_from_the_evaluation_transform_and_the_file",
    "test_catalog.py::test_every_classifier_of_imagenet_1k_has_a_reported_top1_or_says_why_not",
    "test_catalog.py::test_the_table_has_a_row_per_checkpoint_and_an_unknown_file_format_is_refused",
    "test_catalog.py::test_the_sites_page_is_the_registrys_table",
    "test_catalog.py::test_the_command_writes_the_page",
    # test_classification.py
    "test_classification.py::test_litert_and_openvino_files_take_photographs_of_any_size_and_give_the_same_top5",
    # test_distribution.py
    "test_distribution.py::test_large_kernels_hold_one_mth_per_device_and_small_weights_are_replicated",
    # train/test_analysis_logging.py
    "train/test_analysis_logging.py::test_cli_logs_analysis",
    "train/test_analysis_logging.py::test_cli_rejects_gates_on_a_vit",
    "train/test_analysis_logging.py::test_logger_records_each_epoch_and_resumes",
    # train/test_data.py
    "train/test_data.py::test_randaugment_and_mixing_of_rgb_images_make_soft_labels",
    "train/test_data.py::test_resume_is_exact_with_every_augmentation_of_the_deit_recipe",
    # train/test_distillation_cli.py
    "train/test_distillation_cli.py::test_a_student_with_a_distillation_token_learns_on_both_heads",
    "train/test_distillation_cli.py::test_hard_distillation_resumes_exactly_and_exports_the_student_alone",
    # train/test_jax.py (every test)
    "train/test_jax.py::test_on_an_emulated_tpu_the_trainer_takes_splash_and_trains_as_the_cpu_path",
    "train/test_jax.py::test_a_tensorflow_checkpoint_resumes_on_jax_and_an_orbax_one_is_refused_on_tensorflow",
    "train/test_jax.py::test_data_parallel_over_8_devices_trains_like_one_device",
    "train/test_jax.py::test_fsdp_with_the_default_model_evaluates_many_batches_like_one_device",
    "train/test_jax.py::test_jax_flag_errors_are_one_line",
    "train/test_jax.py::test_fsdp_over_a_2x4_mesh_trains_like_one_device_and_orbax_checkpoints_move_between_layouts",
    # train/test_main.py
    "train/test_main.py::test_a_short_fine_tune_fits_the_presets_warmup_and_ema_to_its_length_and_learns",
    "train/test_serving_cli.py::test_every_exported_file_serves_the_runs_evaluation_of_a_photo",
    "train/test_main.py::test_default_path_trains_evaluates_and_exports",
    "train/test_main.py::test_dinov2_fine_tunes_from_the_command_line_with_its_head",
    "train/test_main.py::test_default_preset_is_the_hybrid_on_32_pixel_images",
    "train/test_main.py::test_dry_run_checks_the_flags_and_writes_nothing",
    "train/test_main.py::test_finetune_from_a_generated_checkpoint_at_higher_resolution",
    "train/test_main.py::test_image_folder_with_a_corrupt_file_and_sgd_linear",
    "train/test_main.py::test_killed_runs_resume_at_the_checkpointed_step_and_match",
    # train/test_multi_host_jax.py
    "train/test_multi_host_jax.py::test_two_hosts_train_like_one_process_and_resume_from_their_orbax_checkpoint",
    # train/test_masked_patch_prediction_cli.py
    "train/test_masked_patch_prediction_cli.py::test_pretrain_then_fine_tune_the_exported_encoder",
    # train/test_multi_worker.py (every test)
    "train/test_multi_worker.py::test_a_killed_worker_stops_the_job_which_resumes_and_trains_like_one_process",
    # train/test_presets.py
    "train/test_presets.py::test_a_run_of_the_command_line_checks_its_configuration_once",
    "train/test_presets.py::test_remat_with_the_presets_stochastic_depth_builds_and_trains_a_step",
    # train/test_remote_workdir.py (every test)
    "train/test_remote_workdir.py::test_a_run_writes_resumes_and_exports_on_ram",
    "train/test_remote_workdir.py::test_damaged_checkpoint_on_ram_is_set_aside_and_the_older_one_resumed",
    # train/test_strategy.py
    "train/test_strategy.py::test_mirrored_on_two_cpus_matches_one_device",
    # train/test_swin_cli.py (every test)
    "train/test_swin_cli.py::test_swin_preset_trains_a_tiny_swin_and_exports_it",
    # weights/test_ablation_checkpoints.py
    "weights/test_ablation_checkpoints.py::test_load_weights_refuses_an_ablation_before_downloading",
}
# Test files none of whose tests is quick: each is one end-to-end run in subprocesses.
ALL_SLOW = {
    "docs/test_docs_command.py",
    "experiments/test_swin_ablations.py",
    "export/test_dequantize.py",
    "preprocessing/test_layers.py",
    "train/test_jax.py",
    "train/test_multi_worker.py",
    "train/test_remote_workdir.py",
    "train/test_swin_cli.py",
}


# The longest tests, longest first (measured 2026-11-30, a whole TensorFlow run and the JAX phase
# under `-n 2`), run before all others. xdist's worksteal hands each worker a contiguous half of
# the collection and rebalances by taking queued tests from the end: a long test left near the
# end of a half ran alone while the other worker had finished (the TensorFlow phase's wall time
# was 108 s over half its summed test time). On that VM the order made no measurable difference
# (1,286 s either way: the long multi-process tests slowed each other at the start; BENCHMARKS.md),
# but no phase ends on one worker's minute-long test. Only tests whose fixtures are function-scoped or
# cheap module-scoped ones move, so that no costly fixture is set up twice.
FIRST = (
    "docs/test_docs_command.py::test_the_readme_docs_command_builds_the_site_in_a_new_venv",  # installs: minutes
    "benchmarks/test_gpu_script.py::test_dry_run_runs_every_step_and_writes_the_table",  # 164 s
    "train/test_main.py::test_killed_runs_resume_at_the_checkpointed_step_and_match",  # 67 s; JAX 88 s
    "train/test_jax.py::test_fsdp_with_the_default_model_evaluates_many_batches_like_one_device",  # JAX 80 s
    "train/test_multi_worker.py::test_a_killed_worker_stops_the_job_which_resumes_and_trains_like_one_process",
    "benchmarks/test_scripts.py::test_fast_paths_measures_each_case_and_remat_lowers_the_peak",  # 68 s
    "docs/test_browser.py::test_every_page_loads_without_errors_and_fits_a_laptop_window",  # 60 s
    "train/test_multi_host_jax.py::test_two_hosts_train_like_one_process_and_resume_from_their_orbax_checkpoint",
    "benchmarks/test_scripts.py::test_input_pipeline_benchmark_measures_every_source",  # 55 s
    "train/test_jax.py::test_fsdp_over_a_2x4_mesh_trains_like_one_device_and_orbax_checkpoints_move_between_layouts",
    "notebooks/test_notebooks.py::test_notebook_runs_twice_and_draws",  # 51 s, 25 s, 17 s
    "benchmarks/test_distillation_script.py::test_distillation_prints_the_teacher_and_every_student_row",  # 39 s
    "train/test_jax.py::test_data_parallel_over_8_devices_trains_like_one_device",  # JAX 31 s
    "train/test_strategy.py::test_mirrored_on_two_cpus_matches_one_device",  # 30 s
    "train/test_distillation_cli.py::test_hard_distillation_resumes_exactly_and_exports_the_student_alone",  # 29 s
)


def backend_class(path):
    """`BOTH` or `ONE` for a test file (a path under tests/), or None when unclassified."""
    relative = pathlib.Path(path).resolve().relative_to(TESTS).as_posix()
    matches = [key for key in BACKENDS if relative == key or relative.startswith(key + "/")]
    return BACKENDS[max(matches, key=len)] if matches else None


def entry(item):
    """A collected test as `SLOW` and `FIRST` name it: `path/under/tests.py::name`, every parametrization alike."""
    return f"{item.path.resolve().relative_to(TESTS).as_posix()}::{item.originalname}"


def run_first(items):
    """`items` with those of `FIRST` ahead, in its order; every other test keeps its place (a stable sort)."""
    rank = {name: position for position, name in enumerate(FIRST)}
    return sorted(items, key=lambda item: rank.get(entry(item), len(FIRST)))


def pytest_collection_modifyitems(config, items):
    unclassified = set()
    for item in items:
        if entry(item) in SLOW:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker(BOTH) or item.get_closest_marker(ONE):
            continue  # the test's own marker overrides its file's
        kind = backend_class(item.path)
        if kind is None:
            unclassified.add(str(item.path))
        else:
            item.add_marker(kind)
    items[:] = run_first(items)
    if unclassified:
        raise pytest.UsageError(
            f"Test files without a backend class in tests/conftest.py BACKENDS: {sorted(unclassified)}")


@pytest.fixture(autouse=True, scope="session")
def _optimizer_variables_made_at_compile():
    """Builds a built model's optimizer when it is compiled, as `train/trainer.py` does.

    Keras on TensorFlow otherwise makes the optimizer's variables while tracing the
    first training step, each behind a guard `tf.cond` whose branch functions
    TensorFlow keeps registered for the life of the process: one `fit` of a tiny
    ViT left 84 functions and 31,000 objects alive, and after the model tests a
    worker held 1,500 such functions, which made each later trace and export
    (SavedModel, OpenVINO, LiteRT) about twice as slow. The variables are the same
    either way. A test marked `optimizer_built_by_keras` keeps Keras' own path, the one
    a user's plain `compile` and `fit` take.
    """
    if keras.backend.backend() != "tensorflow":
        yield
        return
    # Replaced on the class that defines it: Keras' loading compares a model's `compile`
    # with that one to tell a custom `compile` from its own.
    owner = next(cls for cls in keras.Model.__mro__ if "compile" in vars(cls))
    compile_model = owner.compile

    @functools.wraps(compile_model)
    def compile_and_build(self, *args, **kwargs):
        compile_model(self, *args, **kwargs)
        if keras_builds_the_optimizer:
            return
        if self.built and self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)

    owner.compile = compile_and_build
    yield
    owner.compile = compile_model


keras_builds_the_optimizer = False


@pytest.fixture(autouse=True)
def _optimizer_built_by_keras(request):
    """The marker `optimizer_built_by_keras`: this test's models build their optimizers as Keras does."""
    global keras_builds_the_optimizer
    keras_builds_the_optimizer = request.node.get_closest_marker("optimizer_built_by_keras") is not None
    yield
    keras_builds_the_optimizer = False


@pytest.fixture(autouse=True)
def _collector_sees_only_this_test():
    # What earlier tests left alive (imported modules, module fixtures, Keras' and TensorFlow's
    # caches: about a million objects in a worker) is moved out of the collector's sight, after
    # collecting what is garbage. Without this every full collection scans all of it: Keras runs one
    # for each variable a layer deletes (`Layer.__delattr__`, which `Model.quantize` calls for every
    # kernel), and a run of the model, layer and int8 tests spent half its time in them (209 s
    # against 120 s with this, the same peak memory).
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(0)
    np.random.seed(0)
    yield
    keras.config.set_dtype_policy("float32")


def pytest_sessionfinish(session, exitstatus):
    if _MADE_CACHE is not None:
        shutil.rmtree(_MADE_CACHE, ignore_errors=True)



@pytest.fixture
def emulated_tpu(monkeypatch):
    """A context manager: within it the process is a TPU host to JAX, Pallas kernels interpreted; JAX only.

    `runs/tpu_emulator.py` says what is emulated (and what `devices=False` leaves as it is). Within it `keras.ops.dot_product_attention`
    fails the test: Keras 3.15's TPU branch is causal and mis-scaled (`docs/guides/tpu.md`), and
    keras_vit's TPU attention must never be routed through it again. Each test sees its own
    once-per-reason warnings.
    """
    if keras.backend.backend() != "jax":
        pytest.skip("the TPU emulator is JAX's: runs in the suite's JAX phase")
    from keras_vit.layers import tpu_attention
    from runs.tpu_emulator import emulated_tpu as emulate

    def refused(*args, **kwargs):
        raise AssertionError("TPU attention was routed through keras.ops.dot_product_attention")

    monkeypatch.setattr(tpu_attention, "_warned", set())

    @contextlib.contextmanager
    def context(devices=True):
        with pytest.MonkeyPatch.context() as patch, emulate(devices):
            patch.setattr(keras.ops, "dot_product_attention", refused)
            yield

    return context

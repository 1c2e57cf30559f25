"""The workdir of a run: refuse another run's folder, clear a killed run's leftovers.

A workdir holds one run: `config.json` (its configuration), `checkpoints/`,
TensorBoard `logs/`, and at the end `model.keras`, `saved_model/` and
`summary.json`. Running the same command again resumes that run; a different
configuration is refused before anything in the folder is written.
"""

import dataclasses
import json
import os
import re
import sys
from keras_vit.files import write_text_atomically
from train import files
from train.checkpoints import CheckpointManager

CONFIG_FILE = "config.json"
# What a run leaves behind once it has made progress worth protecting.
RESULTS = ("checkpoints", "model.keras", "saved_model", "summary.json")
# Settings that change how a run is executed or logged but not what it computes:
# a resumed run may change them.
RESUMABLE_FIELDS = ("checkpoint_every_steps", "eval_batch_size", "steps_per_execution", "jit_compile", "data_dir",
                    "log_analysis", "analysis_images")
# Temporary names of the atomic writes in the workdir (`keras_vit.files`: `staging_path`, `write_atomically`,
# `replace_folder`).
LEFTOVER_NAME = re.compile(r"^(\.tmp-\d+-.+|.+\.tmp-\d+|.+\.old-\d+)$")


def config_dict(config):
    """The configuration as `config.json` stores it (JSON types: tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def differences(stored, config):
    """`(field, stored value, new value)` for each field that a resumed run may not change."""
    current = config_dict(config)
    fields = sorted(set(stored) | set(current))
    return [
        (field, stored.get(field), current.get(field))
        for field in fields
        if field not in RESUMABLE_FIELDS and stored.get(field) != current.get(field)
    ]


def has_results(workdir):
    return any(files.exists(os.path.join(workdir, name)) for name in RESULTS)


def check_workdir(workdir, config):
    """Refuses a workdir that holds a run of another configuration; writes nothing.

    A workdir on TensorFlow's in-process file system (`ram://`) is refused on
    JAX, whose Orbax checkpoints cannot be written there, and warned about on
    TensorFlow: what a run writes there vanishes when the process exits.

    Raises:
        ValueError: naming the workdir and the settings that differ.
    """
    if str(workdir).startswith("ram://"):
        import keras

        if keras.backend.backend() == "jax":
            raise ValueError(
                "--workdir must be a local directory or a persistent file system (gs://, s3://, hdfs://) on the "
                "JAX backend: ram:// is TensorFlow's in-process memory, where Orbax cannot write checkpoints. "
                f"Received: workdir={workdir!r}")
        print(f"warning: --workdir={workdir} is TensorFlow's in-process file system: the checkpoints, logs and "
              "exported models written there vanish when this process exits.", file=sys.stderr, flush=True)
    if files.exists(workdir) and not files.isdir(workdir):
        raise ValueError(f"--workdir must be a directory. Received: workdir={workdir!r} (a file)")
    path = os.path.join(workdir, CONFIG_FILE)
    if not (files.isfile(path) and has_results(workdir)):
        return  # a new workdir, or one whose run stopped before it saved anything
    try:
        with files.open_file(path) as f:
            stored = json.load(f)
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        raise ValueError(
            f"--workdir {workdir!r} holds results but its {CONFIG_FILE} is unreadable ({error}), so it cannot "
            "be resumed safely. Use another --workdir, or delete this one to start over."
        ) from None
    changed = differences(stored, config)
    if changed:
        listed = "; ".join(f"{field}: {old!r} in the workdir, {new!r} now" for field, old, new in changed[:6])
        more = f"; and {len(changed) - 6} more" if len(changed) > 6 else ""
        raise ValueError(
            f"--workdir {workdir!r} holds a run of another configuration ({listed}{more}). Resume it with "
            "the same flags, use another --workdir, or delete this one to start over."
        )


def remove_leftovers(workdir):
    """Removes the temporary files of writes that a killed run left half-done."""
    removed = []
    if files.isdir(workdir):
        for name in files.listdir(workdir):
            if LEFTOVER_NAME.match(name):
                files.remove_any(os.path.join(workdir, name))
                removed.append(name)
    removed += CheckpointManager(os.path.join(workdir, "checkpoints")).remove_leftovers()
    return removed


def prepare_workdir(workdir, config):
    """Checks the workdir against `config`, clears leftovers, then records the configuration.

    Raises:
        ValueError: if the workdir holds a run of another configuration.
        OSError: if the workdir cannot be written (read-only, full).
    """
    check_workdir(workdir, config)
    files.makedirs(workdir)
    remove_leftovers(workdir)
    write_text_atomically(os.path.join(workdir, CONFIG_FILE), json.dumps(config_dict(config), indent=2))

"""Checkpoints that survive preemption, crashes and damage: resume at the saved step.

A checkpoint is a directory `checkpoints/ckpt-<step>/` holding the model weights,
every optimizer variable (step counter, moments, EMA weights) and a manifest of
the files' sizes and sha256. It is written under a temporary name and renamed
into place, and `checkpoints/latest` is replaced atomically after it, so a crash
at any moment leaves the previous checkpoint intact and never a half-written one.

On restore the newest checkpoint whose files match their manifest is used; a
damaged one (truncated, corrupted, emptied) is moved aside to `damaged-ckpt-<step>`
(never deleted) and the next older one is tried. Anything else in the folder
(temporary folders of a killed save excepted, which are removed) is left alone.
"""

import io
import json
import os
import re
import signal
import sys
import tempfile
import threading

import keras
import numpy as np

from keras_vit.files import file_sha256, write_text_atomically
from train import files

KEEP = 2
CHECKPOINT_NAME = re.compile(r"^ckpt-(\d+)$")
# Temporary names of an interrupted save: `.ckpt-<step>.tmp-<pid>`, `latest.tmp-<pid>`, and
# `.ckpt-<step>.tmp-orbax` (JAX: one name that every host of a job writes into).
LEFTOVER_NAME = re.compile(r"^(\.ckpt-\d+\.tmp-(\d+|orbax)|latest\.tmp-\d+)$")
WEIGHTS_FILE = "model.weights.h5"
OPTIMIZER_FILE = "optimizer.npz"
MANIFEST_FILE = "manifest.json"
# A checkpoint's layout: the Keras weights file and the optimizer's arrays (TensorFlow
# backend), or Orbax's folder of every array (JAX backend; `train.orbax_checkpoints`).
H5_FORMAT = "keras-h5"
ORBAX_FORMAT = "orbax"
ORBAX_STATE = "state"
REQUIRED_FILES = {H5_FORMAT: (WEIGHTS_FILE, OPTIMIZER_FILE), ORBAX_FORMAT: (f"{ORBAX_STATE}/_METADATA",)}


class DamagedCheckpointError(ValueError):
    """A checkpoint's files do not match its manifest (or cannot be read)."""


class CheckpointManager:
    """Saves and restores `(model weights, optimizer state)` under `directory`.

    Args:
        directory: str. The `checkpoints/` folder of a workdir.
        keep: int. How many of the newest checkpoints to keep. Defaults to 2.
        log: callable taking a str, for warnings about damaged checkpoints.
            Defaults to printing on stderr.
        writer: bool. `False` for the non-chief workers of a multi-worker
            job: they restore from the folder but never write, rename or
            remove anything in it. Defaults to `True`.
        check_held: callable or None. Called before each save and each
            commit; it raises to stop the write (`WorkdirLock.check_held`:
            another run has taken the workdir over). Defaults to None. Also
            settable as an attribute, for a subclass that does not take it.
    """

    def __init__(self, directory, keep=KEEP, log=None, writer=True, check_held=None):
        self.directory = directory
        self.keep = keep
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.writer = writer
        self.check_held = check_held
        self.restored_from = None

    def check_before_write(self):
        """Raises (through `check_held`) if this run may no longer write the folder."""
        if self.writer and self.check_held is not None:
            self.check_held()

    # ---- what is in the folder ---------------------------------------------------

    def checkpoints(self):
        """`(step, path)` of every `ckpt-<step>` folder, oldest first."""
        if not files.isdir(self.directory):
            return []
        found = []
        for name in files.listdir(self.directory):
            match = CHECKPOINT_NAME.match(name)
            if match and files.isdir(os.path.join(self.directory, name)):
                found.append((int(match.group(1)), os.path.join(self.directory, name)))
        return sorted(found)

    def latest(self):
        """Path that the `latest` pointer names, or None if it names no checkpoint in this folder."""
        pointer = os.path.join(self.directory, "latest")
        if not files.isfile(pointer):
            return None
        with files.open_file(pointer) as f:
            name = f.read().strip()
        # Only a plain `ckpt-<step>` name: a pointer can never lead out of the folder.
        if not CHECKPOINT_NAME.match(name):
            self.log(f"warning: ignoring {pointer!r}: it names {name[:80]!r}, not a checkpoint of this folder.")
            return None
        path = os.path.join(self.directory, name)
        return path if files.isdir(path) else None

    def remove_leftovers(self):
        """Removes the temporary files and folders of a save that was killed."""
        if not self.writer or not files.isdir(self.directory):
            return []
        removed = []
        for name in files.listdir(self.directory):
            if LEFTOVER_NAME.match(name):
                files.remove_any(os.path.join(self.directory, name))
                removed.append(name)
        return removed

    # ---- saving -----------------------------------------------------------------

    def save(self, model):
        """Writes a checkpoint at the optimizer's current step; returns its path (None if not the writer)."""
        self.check_before_write()
        step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        name = f"ckpt-{step}"
        final = os.path.join(self.directory, name)
        if self.writer and not self._intact(final):
            return self._write(model, step, final)
        # Nothing to keep (a non-chief worker, or this step is saved already), yet the
        # same saving runs into a scratch folder: under MultiWorkerMirroredStrategy
        # saving runs collective ops that every worker must join (TensorFlow's own
        # recipe for multi-worker saving), and a worker that skipped them would hang
        # the others.
        self._scratch_save(model)
        return final if self.writer else None

    def _scratch_save(self, model):
        with tempfile.TemporaryDirectory(prefix="keras_vit-scratch-") as scratch:
            self._write_files(model, scratch)

    def _intact(self, path):
        if not files.isdir(path):
            return False
        try:
            verify_checkpoint(path)
            return True
        except DamagedCheckpointError as error:
            if self.writer:
                self._set_aside(path, error)
            return False

    def _write(self, model, step, final):
        files.makedirs(self.directory)
        tmp = os.path.join(self.directory, f".{os.path.basename(final)}.tmp-{os.getpid()}")
        files.rmtree(tmp)
        files.makedirs(tmp)
        try:
            self._write_files(model, tmp)
        except BaseException:
            files.rmtree(tmp)
            raise
        self._commit(tmp, final, step, H5_FORMAT)
        return final

    def _commit(self, tmp, final, step, format):
        """Lists `tmp`'s files in a manifest, moves it to `final`, points `latest` at it, prunes."""
        # Orbax's save in flight commits here, perhaps long after it started: the
        # workdir may have been taken over since. Its `tmp` stays, a leftover.
        self.check_before_write()
        try:
            manifest = {"step": step, "format": format, "files": {}}
            for name in files.walk_files(tmp):
                path = os.path.join(tmp, name)
                files.sync(path)
                manifest["files"][name] = {"bytes": files.getsize(path), "sha256": file_sha256(path)}
            write_text_atomically(os.path.join(tmp, MANIFEST_FILE), json.dumps(manifest, indent=2))
            files.move_folder(tmp, final, last=MANIFEST_FILE)
        except BaseException:
            files.rmtree(tmp)
            raise
        write_text_atomically(os.path.join(self.directory, "latest"), os.path.basename(final))
        self._prune(keep=final)

    def finish(self):
        """Completes the saves in flight (none here: this manager writes synchronously)."""

    @staticmethod
    def _write_files(model, folder):
        model.save_weights(os.path.join(folder, WEIGHTS_FILE))
        # Keys keep the order (restore relies on it) and the names (for inspection).
        optimizer_values = {
            f"{i:05d}:{v.path}": keras.ops.convert_to_numpy(v) for i, v in enumerate(model.optimizer.variables)
        }
        path = os.path.join(folder, OPTIMIZER_FILE)
        if files.is_remote(path):
            # zipfile needs a seekable file, which not every remote file system offers.
            buffer = io.BytesIO()
            np.savez(buffer, **optimizer_values)
            with files.open_file(path, "wb") as f:
                f.write(buffer.getvalue())
        else:
            np.savez(path, **optimizer_values)  # an OSError then names the file

    def _prune(self, keep):
        for _, path in self.checkpoints()[: -self.keep]:
            if path != keep:
                files.rmtree(path)

    def _set_aside(self, path, error):
        """Renames a damaged checkpoint to `damaged-<name>` (kept for inspection, never deleted)."""
        base = os.path.join(self.directory, f"damaged-{os.path.basename(path)}")
        target, count = base, 1
        while files.exists(target):
            count += 1
            target = f"{base}-{count}"
        files.move_folder(path, target)
        self.log(f"warning: checkpoint {os.path.basename(path)!r} is damaged ({error}); "
                 f"moved to {os.path.basename(target)!r}.")

    # ---- restoring --------------------------------------------------------------
    def set_aside_damaged(self):
        """Moves damaged checkpoints, newest first, aside until an intact one is found.

        `restore` does the same; the chief of a multi-worker job calls this
        first, so that the other workers, which never rename anything, find
        the same newest intact checkpoint.
        """
        damaged = False
        for _, path in reversed(self.checkpoints()):
            try:
                verify_checkpoint(path)
            except DamagedCheckpointError as error:
                self._set_aside(path, error)
                damaged = True
                continue
            if damaged:
                self.log(f"Resuming from the newest intact checkpoint, {os.path.basename(path)!r}.")
            return path
        return None


    def restore(self, model):
        """Loads the newest intact checkpoint into a compiled model; returns its step (0 if none).

        Damaged checkpoints are set aside and the next older one is tried.

        Raises:
            ValueError: if an intact checkpoint does not fit the model (the
                workdir holds a run of another configuration).
        """
        self.latest()  # warns about a pointer that names something else
        damaged = False
        for step, path in reversed(self.checkpoints()):
            try:
                verify_checkpoint(path)
            except DamagedCheckpointError as error:
                if self.writer:
                    self._set_aside(path, error)
                damaged = True
                continue
            if damaged:
                self.log(f"Resuming from the newest intact checkpoint, {os.path.basename(path)!r}.")
            self._load(model, path)
            self.restored_from = os.path.basename(path)
            return int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        return 0

    def _load(self, model, path):
        format = checkpoint_format(path)
        if format != H5_FORMAT:
            raise ValueError(
                f"The checkpoint {path!r} was written by the JAX backend with Orbax: resume this run with "
                "KERAS_BACKEND=jax (or start it anew in another --workdir)."
            )
        try:
            model.load_weights(os.path.join(path, WEIGHTS_FILE))
        except ValueError:
            raise ValueError(
                f"The checkpoint {path!r} does not fit this model: the workdir holds a run "
                "of another configuration. Use another --workdir, or remove this one."
            ) from None
        optimizer = model.optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        with files.open_file(os.path.join(path, OPTIMIZER_FILE), "rb") as f:
            content = f.read()
        with np.load(io.BytesIO(content)) as data:
            values = [data[key] for key in sorted(data.files)]
        if len(values) != len(optimizer.variables) or any(
            tuple(v.shape) != tuple(value.shape) for v, value in zip(optimizer.variables, values)
        ):
            raise ValueError(
                f"Checkpoint {path!r} has {len(values)} optimizer variables that do not fit the "
                f"optimizer's {len(optimizer.variables)}: was it written by another configuration?"
            )
        for variable, value in zip(optimizer.variables, values):
            variable.assign(value)


def checkpoint_format(path):
    """The format a checkpoint's manifest names (`"keras-h5"` when it names none)."""
    with files.open_file(os.path.join(path, MANIFEST_FILE)) as f:
        return json.load(f).get("format", H5_FORMAT)


def verify_checkpoint(path):
    """Checks a checkpoint's files against its manifest.

    Raises:
        DamagedCheckpointError: naming the first file that is missing, of
            another size, or of another sha256, or a missing/unreadable manifest.
    """
    manifest_path = os.path.join(path, MANIFEST_FILE)
    if not files.isfile(manifest_path):
        raise DamagedCheckpointError(f"{MANIFEST_FILE} is missing or unreadable: it does not exist")
    try:
        with files.open_file(manifest_path) as f:
            manifest = json.load(f)
        listed = manifest["files"]
        expected = {name: (int(entry["bytes"]), str(entry["sha256"])) for name, entry in listed.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise DamagedCheckpointError(f"{MANIFEST_FILE} is missing or unreadable: {type(error).__name__}") from None
    format = manifest.get("format", H5_FORMAT) if isinstance(manifest, dict) else None
    if format not in REQUIRED_FILES:
        raise DamagedCheckpointError(f"{MANIFEST_FILE} names an unknown format {format!r}")
    for required in REQUIRED_FILES[format]:
        if required not in expected:
            raise DamagedCheckpointError(f"{MANIFEST_FILE} does not list {required}")
    for name, (size, sha256) in expected.items():
        file = os.path.join(path, name)
        if not files.isfile(file):
            raise DamagedCheckpointError(f"{name} is missing")
        if files.getsize(file) != size:
            raise DamagedCheckpointError(f"{name} has {files.getsize(file)} bytes, the manifest says {size}")
        if file_sha256(file) != sha256:
            raise DamagedCheckpointError(f"{name} does not match its sha256 in the manifest")


class PreemptionCheckpoint(keras.callbacks.Callback):
    """Checkpoints every epoch, every `every_steps` steps, and when SIGTERM arrives.

    On SIGTERM (how Cloud TPUs, Kubernetes and batch schedulers preempt) the
    current step finishes, a checkpoint is written, and training stops;
    `preempted` tells the caller to exit non-zero. The handler is installed for
    the run only: `restore_signal_handler` puts the previous one back.
    """

    def __init__(self, manager, every_steps=0, total_steps=None):
        super().__init__()
        self.manager = manager
        self.every_steps = every_steps
        self.total_steps = total_steps
        self.preempted = False
        self._signalled = False
        self._last_saved_step = 0
        self._previous_handler = None
        self._installed = False

    def install_signal_handler(self):
        # Python delivers signals to the main thread only; elsewhere (a notebook's
        # worker thread) the run is simply not preemptible.
        if threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
            self._installed = True

    def restore_signal_handler(self):
        if self._installed:
            # None: the previous handler was not set from Python; the default is what it was.
            previous = self._previous_handler
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            self._installed = False

    def _on_sigterm(self, signum, frame):
        self._signalled = True

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        self._last_saved_step = self._step()

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        if self._signalled:
            self.manager.save(self.model)
            self.preempted = True
            self.model.stop_training = True
        elif self.every_steps and step - self._last_saved_step >= self.every_steps:
            # ">=", not "%": with steps_per_execution the counter moves in jumps.
            self.manager.save(self.model)
            self._last_saved_step = step
        if self.total_steps is not None and step >= self.total_steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        if not self.preempted:
            self.manager.save(self.model)

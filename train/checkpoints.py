"""Checkpoints that survive preemption: atomic writes, resume at the saved step.

A checkpoint is a directory `checkpoints/ckpt-<step>/` holding the model weights
and every optimizer variable (step counter, moments, EMA weights). It is written
under a temporary name and renamed into place, and `checkpoints/latest` is
replaced atomically after it, so a crash at any moment leaves the previous
checkpoint intact and never a half-written one.
"""

import os
import shutil
import signal

import keras
import numpy as np

KEEP = 2


def write_text_atomically(path, text):
    """Writes `text` to a temporary file, syncs it, and renames it onto `path`."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointManager:
    """Saves and restores `(model weights, optimizer state)` under `directory`."""

    def __init__(self, directory):
        self.directory = directory

    def latest(self):
        """Path of the newest complete checkpoint, or None."""
        pointer = os.path.join(self.directory, "latest")
        if not os.path.exists(pointer):
            return None
        with open(pointer) as f:
            path = os.path.join(self.directory, f.read().strip())
        return path if os.path.isdir(path) else None

    def save(self, model):
        """Writes a checkpoint at the optimizer's current step; returns its path."""
        step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        name = f"ckpt-{step}"
        final = os.path.join(self.directory, name)
        if os.path.isdir(final):
            return final
        os.makedirs(self.directory, exist_ok=True)
        tmp = os.path.join(self.directory, f".{name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        model.save_weights(os.path.join(tmp, "model.weights.h5"))
        # Keys keep the order (restore relies on it) and the names (for inspection).
        optimizer_values = {
            f"{i:05d}:{v.path}": keras.ops.convert_to_numpy(v) for i, v in enumerate(model.optimizer.variables)
        }
        np.savez(os.path.join(tmp, "optimizer.npz"), **optimizer_values)
        os.replace(tmp, final)
        write_text_atomically(os.path.join(self.directory, "latest"), name)
        self._prune(keep=name)
        return final

    def _prune(self, keep):
        checkpoints = sorted(
            (d for d in os.listdir(self.directory) if d.startswith("ckpt-")),
            key=lambda d: int(d.split("-")[1]),
        )
        for old in checkpoints[:-KEEP]:
            if old != keep:
                shutil.rmtree(os.path.join(self.directory, old), ignore_errors=True)

    def restore(self, model):
        """Loads the latest checkpoint into a compiled model; returns its step (0 if none)."""
        path = self.latest()
        if path is None:
            return 0
        try:
            model.load_weights(os.path.join(path, "model.weights.h5"))
        except ValueError:
            raise ValueError(
                f"The checkpoint {path!r} does not fit this model: the workdir holds a run "
                "of another configuration. Use another --workdir, or remove this one."
            ) from None
        optimizer = model.optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        with np.load(os.path.join(path, "optimizer.npz")) as data:
            values = [data[key] for key in sorted(data.files)]
        if len(values) != len(optimizer.variables):
            raise ValueError(
                f"Checkpoint {path!r} has {len(values)} optimizer variables but the "
                f"optimizer has {len(optimizer.variables)}: was it written by another configuration?"
            )
        for variable, value in zip(optimizer.variables, values):
            variable.assign(value)
        return int(keras.ops.convert_to_numpy(optimizer.iterations))


class PreemptionCheckpoint(keras.callbacks.Callback):
    """Checkpoints every epoch, every `every_steps` steps, and when SIGTERM arrives.

    On SIGTERM (how Cloud TPUs, Kubernetes and batch schedulers preempt) the
    current step finishes, a checkpoint is written, and training stops;
    `preempted` tells the caller to exit non-zero.
    """

    def __init__(self, manager, every_steps=0, total_steps=None):
        super().__init__()
        self.manager = manager
        self.every_steps = every_steps
        self.total_steps = total_steps
        self.preempted = False
        self._signalled = False
        self._last_saved_step = 0

    def install_signal_handler(self):
        signal.signal(signal.SIGTERM, self._on_sigterm)

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

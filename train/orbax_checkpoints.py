"""Checkpoints of JAX runs, written by Orbax: sharded, multi-host and asynchronous.

The workdir keeps the layout of `train.checkpoints`: `checkpoints/ckpt-<step>/`
with a manifest of every file's size and sha256, the `latest` pointer, damaged
checkpoints set aside and the newest intact one resumed. What changes is how the
arrays are written. Orbax writes each variable as the devices hold it: every
host writes its own shards of a sharded (FSDP) array, nothing is gathered on one
host, and the write runs in the background while training goes on. Restoring
reads each array straight into the sharding of the variable it fills, so a
checkpoint written sharded restores unsharded, and the reverse.

A save goes to `.ckpt-<step>.tmp-orbax/state`; once Orbax has finished it (at
the next save, or when the run ends or is preempted), the manifest is written
and the folder renamed into place: a checkpoint is either complete and listed,
or it is a leftover that the next start removes.
"""

import os

import keras

from train import files
from train.checkpoints import (
    MANIFEST_FILE,
    ORBAX_FORMAT,
    ORBAX_STATE,
    CheckpointManager,
    checkpoint_format,
)


def _state(model):
    """Every variable the run needs to resume, in a fixed order: the model's, then the optimizer's."""
    return {
        "model": {f"{i:05d}": v for i, v in enumerate(model.weights)},
        "optimizer": {f"{i:05d}": v for i, v in enumerate(model.optimizer.variables)},
    }


def _is_primary():
    import jax

    return jax.process_index() == 0


def _sync(name):
    """All hosts wait here (nothing to wait for on one host)."""
    import jax

    if jax.process_count() > 1:
        from orbax.checkpoint import multihost

        multihost.sync_global_processes(name)


class OrbaxCheckpointManager(CheckpointManager):
    """`CheckpointManager` for the JAX backend, with Orbax writing the arrays.

    Every host calls `save` (Orbax coordinates the hosts); the first host
    writes the manifest and the `latest` pointer. Call `finish` before the
    process ends, so that the last save in flight is completed and committed.

    Args:
        directory: str. The `checkpoints/` folder of a workdir.
        keep: int. How many of the newest checkpoints to keep.
        log: callable taking a str, for warnings about damaged checkpoints.
    """

    def __init__(self, directory, keep=2, log=None):
        super().__init__(directory, keep=keep, log=log, writer=_is_primary())
        self._checkpointer = None
        self._pending = None  # (tmp, final, step) of the save in flight

    def checkpointer(self):
        if self._checkpointer is None:
            import orbax.checkpoint as ocp

            self._checkpointer = ocp.StandardCheckpointer()
        return self._checkpointer

    # ---- saving -----------------------------------------------------------------

    def save(self, model):
        """Starts writing a checkpoint at the optimizer's step; returns the path it will have."""
        self.check_before_write()  # as the base class's `save`: nothing is written once the lock is lost
        self.finish()
        step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        final = os.path.join(self.directory, f"ckpt-{step}")
        # Every host takes the same decision: they all see the same folder.
        if self._intact(final):
            return final
        # The same name on every host: Orbax's hosts write into one folder.
        tmp = os.path.join(self.directory, f".ckpt-{step}.tmp-orbax")
        if self.writer:
            files.makedirs(self.directory)
            files.rmtree(tmp)
            # Created here, not by Orbax: a full or read-only disk fails this call, before
            # Orbax starts threads that would wait minutes for a folder that never comes.
            files.makedirs(tmp)
        _sync("keras_vit_checkpoint_start")
        values = {group: {key: v.value for key, v in variables.items()} for group, variables in _state(model).items()}
        # The blocking part copies the arrays off the devices; the files are
        # written in the background while the next steps run.
        try:
            self.checkpointer().save(os.path.join(tmp, ORBAX_STATE), values)
        except BaseException:
            if self.writer:
                files.rmtree(tmp)
            raise
        self._pending = (tmp, final, step)
        return final

    def finish(self):
        """Waits for the save in flight, then commits it (manifest, rename, `latest`, pruning)."""
        if self._pending is None:
            return
        tmp, final, step = self._pending
        self._pending = None
        try:
            self.checkpointer().wait_until_finished()
        except BaseException:
            if self.writer:
                files.rmtree(tmp)
            raise
        if self.writer:
            self._commit(tmp, final, step, ORBAX_FORMAT)
        _sync("keras_vit_checkpoint_commit")

    # ---- restoring --------------------------------------------------------------

    def _load(self, model, path):
        if checkpoint_format(path) != ORBAX_FORMAT:
            return super()._load(model, path)  # written by the TensorFlow backend: its format loads here too
        import jax

        optimizer = model.optimizer
        if not optimizer.built:
            optimizer.build(model.trainable_variables)
        state = _state(model)
        target = {
            group: {key: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.value.sharding)
                    for key, v in variables.items()}
            for group, variables in state.items()
        }
        try:
            restored = self.checkpointer().restore(os.path.join(path, ORBAX_STATE), target)
        except (ValueError, KeyError) as error:
            raise ValueError(
                f"The checkpoint {path!r} does not fit this model ({type(error).__name__}): the workdir holds a "
                "run of another configuration. Use another --workdir, or remove this one."
            ) from None
        for group, variables in state.items():
            for key, variable in variables.items():
                variable.assign(restored[group][key])


__all__ = ["OrbaxCheckpointManager", "MANIFEST_FILE"]

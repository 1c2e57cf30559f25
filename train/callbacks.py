"""The trainer's own Keras callbacks: throughput, and batch ends kept in the training loop."""

import time

import keras

from train.strategy import JaxDistribution


class Throughput(keras.callbacks.Callback):
    """Training images per second, leaving out the first epoch (tracing and compilation).

    Steps are read from the optimizer's counter, so that `steps_per_execution`
    (one callback call per several steps) is counted right.
    """

    def __init__(self, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.epochs = []  # (steps, seconds) per epoch

    def _iterations(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()
        self._start_step = self._iterations()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append((self._iterations() - self._start_step, time.perf_counter() - self._start))

    @property
    def timed_steps(self):
        return sum(s for s, _ in (self.epochs[1:] or self.epochs))

    @property
    def images_per_second(self):
        seconds = sum(t for _, t in (self.epochs[1:] or self.epochs))
        return self.timed_steps * self.batch_size / seconds if seconds else float("nan")


class SynchronousBatchEnds(keras.callbacks.Callback):
    """Makes Keras call the batch-end callbacks in the training loop, not on a worker thread.

    On JAX, Keras hands the batch-end callbacks to a thread pool when no
    callback defines them (`CallbackList`'s asynchronous dispatch). On virtual
    XLA:CPU devices, that thread's reading of the last batch's sharded logs
    then runs beside the next step's collectives, which share the same few CPU
    threads: the all-reduce rendezvous waits for participants that never get a
    thread, and XLA aborts the process after 40 s. Defining the three hooks (as
    no-ops) keeps every call in the loop. Only multi-device CPU runs need it;
    accelerators run their collectives off the host's threads.
    """

    def on_train_batch_end(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass


def needs_synchronous_batch_ends(strategy):
    """Whether `strategy` is a JAX distribution over several CPU devices (see `SynchronousBatchEnds`)."""
    return isinstance(strategy, JaxDistribution) and strategy.platform == "cpu" and len(strategy.devices) > 1

"""Where a run computes: TPU, GPUs or CPU, through `tf.distribute` or `keras.distribution`.

(About 400 lines: choosing the device and the strategy or distribution is one
decision, made in one place for both backends.)

On TensorFlow a `tf.distribute.Strategy` (TPUStrategy, MirroredStrategy, or the
default). On JAX (what Colab's TPU runtimes ship) a `JaxDistribution`: data
parallelism (`keras.distribution.DataParallel`) or FSDP-style sharding
(`keras.distribution.ModelParallel` with `keras_vit.layout_map`) over a
`(batch, model)` device mesh. Both offer `scope()` and `num_replicas_in_sync`, so
the trainer treats them alike.
"""

import dataclasses
import os

import keras

DISTRIBUTIONS = ("auto", "data", "fsdp")
STRATEGIES = ("auto", "mirrored", "multi_worker")
# Where `keras.distribution.initialize` reads the hosts of a JAX job outside a
# managed cluster: the coordinator's `host:port`, the number of hosts, this host's index.
HOST_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                  "KERAS_DISTRIBUTION_PROCESS_ID")


class TPUUnavailableError(RuntimeError):
    """No TPU could be reached; the message says which and why."""


def accelerator():
    """`"tpu"`, `"gpu"` or `"cpu"`: what the Keras backend in use computes on.

    On JAX this is the platform of `jax.devices()`; on TensorFlow a TPU is only
    found through `tpu_strategy`, so this says `"gpu"` or `"cpu"`.
    """
    if keras.backend.backend() == "jax":
        import jax

        return jax.devices()[0].platform
    import tensorflow as tf

    return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"


def parse_mesh(text, device_count):
    """`"batch:N,model:M"` as `(N, M)`; `None` or `""` means all devices on the batch axis.

    Raises:
        ValueError: for another form, unknown axes, or N * M != device_count.
    """
    if not text:
        return device_count, 1
    sizes = {}
    for part in str(text).split(","):
        name, _, size = part.partition(":")
        if name.strip() not in ("batch", "model") or not size.strip().isdigit() or int(size) <= 0:
            raise ValueError(
                "--mesh must look like 'batch:N,model:M' with positive integers N and M. "
                f"Received: mesh={text!r}"
            )
        sizes[name.strip()] = int(size)
    batch, model = sizes.get("batch"), sizes.get("model")
    if batch is None and model is None:
        raise ValueError(f"--mesh must name the batch and/or model axis. Received: mesh={text!r}")
    batch = batch or device_count // model
    model = model or device_count // batch
    if batch * model != device_count:
        raise ValueError(
            f"--mesh must use all {device_count} devices (batch x model = {device_count}). "
            f"Received: mesh={text!r}"
        )
    return batch, model


@dataclasses.dataclass
class JaxDistribution:
    """A run on the JAX backend over `devices`.

    Attributes:
        kind: str. `"single"` (one device), `"data"` (`DataParallel`) or
            `"fsdp"` (`ModelParallel`: large kernels sharded over the model axis).
        devices: list of device names (`keras.distribution.list_devices()`).
        mesh_shape: tuple `(batch, model)`.
        platform: str. `"tpu"`, `"gpu"` or `"cpu"`.
    """

    kind: str
    devices: list
    mesh_shape: tuple
    platform: str
    distribution: object = None

    @property
    def num_replicas_in_sync(self):
        """Devices along the batch axis: the global batch must divide into them."""
        return self.mesh_shape[0]

    def mesh(self):
        return keras.distribution.DeviceMesh(self.mesh_shape, ["batch", "model"], devices=self.devices)

    def activate(self, model_template=None):
        """Creates the `keras.distribution` for this run and makes it the global one.

        Args:
            model_template: a model built without distribution, whose variable
                paths and shapes `keras_vit.layout_map` reads (FSDP only).
        """
        if self.kind == "data":
            self.distribution = keras.distribution.DataParallel(devices=self.devices)
        elif self.kind == "fsdp":
            import keras_vit

            mesh = self.mesh()
            self.distribution = keras.distribution.ModelParallel(
                layout_map=keras_vit.layout_map(model_template, mesh), batch_dim_name="batch"
            )
        if self.distribution is not None:
            keras.distribution.set_distribution(self.distribution)
        return self.distribution

    def scope(self):
        import contextlib

        return self.distribution.scope() if self.distribution is not None else contextlib.nullcontext()

    def describe(self):
        if self.kind == "single":
            return f"1 {self.platform} device"
        if self.kind == "data":
            return f"data parallel (keras.distribution.DataParallel) over {len(self.devices)} {self.platform} devices"
        batch, model = self.mesh_shape
        return (f"FSDP (keras.distribution.ModelParallel) over {len(self.devices)} {self.platform} devices, "
                f"mesh batch:{batch} x model:{model}")


def _keep_tensorflow_off_the_gpus():
    """Under JAX, TensorFlow only feeds `tf.data`: a GPU build must not take the GPUs' memory."""
    try:
        import tensorflow as tf
    except ImportError:
        return
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:
        pass  # TensorFlow has run already; its devices are fixed for this process


def _jax_detects_a_cluster():
    """Whether JAX finds the hosts by itself: a Cloud TPU pod slice, a SLURM, Open MPI or Kubernetes job."""
    try:
        # JAX's own detection (private, so guarded), as `jax.distributed.initialize` runs it.
        from jax._src import clusters

        environments = clusters.ClusterEnv._cluster_types
    except (ImportError, AttributeError):
        return True  # another JAX: let its own initialization decide
    return any(not env.opt_in_only_method and env.is_env_present() for env in environments)


def check_multihost_environment():
    """Raises a one-line `ValueError` unless `--multihost` can find the other hosts of the job.

    Outside a cluster JAX detects, the hosts come from `HOST_VARIABLES` (or
    `JAX_COORDINATOR_ADDRESS` for the coordinator); JAX's own error without them
    ("coordinator_address should be defined") names neither the flag nor them.
    """
    names = dict(zip(("coordinator", "count", "index"), HOST_VARIABLES))
    values = {key: os.environ.get(name) for key, name in names.items()}
    values["coordinator"] = values["coordinator"] or os.environ.get("JAX_COORDINATOR_ADDRESS")
    if all(values.values()):
        count, index = values["count"], values["index"]
        if not (count.isdigit() and index.isdigit() and int(index) < int(count)):
            raise ValueError(
                f"--multihost reads {names['count']} (the number of hosts, a positive integer) and {names['index']} "
                f"(this host's index, from 0 to the number of hosts - 1). "
                f"Received: {names['count']}={count!r}, {names['index']}={index!r}"
            )
        return
    if _jax_detects_a_cluster():
        return
    unset = ", ".join(names[key] for key, value in values.items() if not value)
    raise ValueError(
        "--multihost joins the hosts of a JAX job, and finds none here: outside a Cloud TPU pod slice (or a SLURM, "
        f"Open MPI or Kubernetes job) set on every host {names['coordinator']} (the coordinator's host:port, "
        f"the same on every host), {names['count']} (the number of hosts) and {names['index']} (this host's "
        f"index, 0 on the coordinator). Received: multihost=True with {unset} unset"
    )


def join_hosts():
    """Joins this process to a multi-host JAX job (`keras.distribution.initialize`).

    On a Cloud TPU pod slice the hosts are found from the TPU's environment;
    elsewhere from `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator's
    `host:port`), `KERAS_DISTRIBUTION_NUM_PROCESSES` and
    `KERAS_DISTRIBUTION_PROCESS_ID`. Must run before JAX computes anything.

    Raises:
        ValueError: if the other hosts cannot be found (`check_multihost_environment`).
    """
    check_multihost_environment()
    import jax

    # CPU hosts (a test on one machine, a CPU cluster) exchange collectives over gloo;
    # TPUs and GPUs ignore this setting.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize()


def jax_distribution(use_tpu=False, tpu_name=None, distribution="auto", mesh=None, multihost=False):
    """The `JaxDistribution` for the flags; with `--tpu`, insists on TPU devices."""
    import jax

    _check_distribution(distribution)
    _keep_tensorflow_off_the_gpus()
    if multihost:
        join_hosts()
    if tpu_name:
        raise TPUUnavailableError(
            "--tpu_name names a TPU for TensorFlow's TPUStrategy; under JAX the TPU devices of this "
            "host are used: pass --tpu alone (on a pod slice, run the same command on every host)."
        )
    platform = jax.devices()[0].platform
    if use_tpu and platform != "tpu":
        found = sorted({f"{d.platform} x{sum(e.platform == d.platform for e in jax.devices())}" for d in jax.devices()})
        raise TPUUnavailableError(
            f"--tpu was given but JAX sees no TPU devices (it sees {', '.join(found)}). On Colab choose "
            "Runtime > Change runtime type > TPU; on a TPU VM install jax[tpu]."
        )
    devices = keras.distribution.list_devices()
    batch, model = parse_mesh(mesh, len(devices))
    if distribution == "data" and model != 1:
        raise ValueError(f"--distribution=data puts every device on the batch axis. Received: mesh={mesh!r}")
    if distribution == "fsdp":
        if mesh is None:
            batch, model = 1, len(devices)
        kind = "fsdp"
    elif len(devices) > 1:
        kind = "data"
    else:
        kind = "single"
    return JaxDistribution(kind, devices, (batch, model), platform)


# How long a remote TPU (`grpc://host:port`) may take to accept a connection:
# TensorFlow's own connection waits without a deadline.
TPU_CONNECT_DEADLINE_S = 30.0


def grpc_address(tpu_name):
    """`(host, port)` of a `grpc://host:port` TPU name, None for other names; a ValueError if malformed."""
    import urllib.parse

    if not tpu_name or not tpu_name.startswith("grpc://"):
        return None
    address = urllib.parse.urlsplit(tpu_name)
    try:
        host, port = address.hostname, address.port
    except ValueError:  # a port that is not a number, or out of range
        host, port = None, None
    if not host or not port:
        raise ValueError(f"--tpu_name must be a TPU name or grpc://host:port. Received: tpu_name={tpu_name!r}")
    return host, port


def check_tpu_address(tpu_name, deadline=TPU_CONNECT_DEADLINE_S):
    """Raises `TPUUnavailableError` when a `grpc://host:port` TPU does not answer within `deadline` seconds."""
    import socket

    address = grpc_address(tpu_name)
    if address is None:
        return
    host, port = address
    try:
        socket.create_connection((host, port), timeout=deadline).close()
    except OSError as error:
        raise TPUUnavailableError(
            f"--tpu_name={tpu_name}: nothing accepted a connection at {host}:{port} within {deadline:g} s "
            f"({type(error).__name__}: {error}). Check the address and that the TPU is running."
        ) from None


def tpu_strategy(tpu_name="local"):
    """Connects to a TPU, initializes it and returns a `TPUStrategy`.

    Args:
        tpu_name: str. `"local"` (or `""`) for the TPU attached to this TPU VM or
            Colab TPU runtime; a name or `grpc://host:port` for a remote one.

    Raises:
        TPUUnavailableError: if no TPU is reachable.
    """
    import tensorflow as tf

    # On a TPU VM (every Colab TPU runtime since 2025) the resolver needs "local":
    # an empty name asks for TPU_NAME or the metadata server of the old TPU nodes.
    tpu_name = tpu_name or "local"
    check_tpu_address(tpu_name)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_name)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except Exception as error:  # noqa: BLE001 - TF raises many types here
        where = f"TPU {tpu_name!r}" if tpu_name != "local" else "a local TPU (Colab runtime or TPU VM)"
        raise TPUUnavailableError(
            f"--tpu was given but {where} is not reachable: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no details'}"
        ) from None


def _cluster_from_tf_config():
    """The parsed `TF_CONFIG` of a multi-worker job, checked; a one-line `ValueError` otherwise."""
    import json
    import os

    text = os.environ.get("TF_CONFIG")
    example = ('{"cluster": {"worker": ["host0:port", "host1:port"]}, "task": {"type": "worker", "index": 0}}')
    if not text:
        raise ValueError(f"--strategy=multi_worker reads the cluster from the TF_CONFIG environment variable, "
                         f"which is not set. Set it on every worker, e.g. TF_CONFIG='{example}'")
    try:
        config = json.loads(text)
        workers = config["cluster"]["worker"]
        task_type, index = config["task"]["type"], int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"TF_CONFIG must be JSON like '{example}' ({type(error).__name__}: {error}). "
                         f"Received: TF_CONFIG={text!r}") from None
    jobs = config["cluster"]
    if task_type not in jobs or not 0 <= index < len(jobs[task_type]):
        raise ValueError(f"TF_CONFIG's task {task_type}:{index} is not in its cluster {sorted(jobs)} "
                         f"(indices from 0). Received: TF_CONFIG={text!r}")
    return config, workers


def multi_worker_strategy():
    """A `MultiWorkerMirroredStrategy` over the workers that `TF_CONFIG` names.

    Every worker runs the same command with its own `TF_CONFIG` task; worker 0
    (or the `chief` task, if the cluster has one) writes the workdir's files.
    """
    _cluster_from_tf_config()
    return _keras_multi_worker_strategy_class()()


def _keras_multi_worker_strategy_class():
    import tensorflow as tf

    class KerasMultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        """`MultiWorkerMirroredStrategy` whose `reduce` takes what Keras 3's trainer gives it.

        Keras' TensorFlow trainer (3.15 and earlier; keras-team/keras#20585)
        reduces its per-replica logs, scalars, with `axis=0`, and its first
        batch, a tuple, in one call; this strategy's `reduce` accepts neither,
        so `fit` fails on any multi-worker cluster. Here scalars reduce over
        the replicas alone (the mean over workers is what `axis=0` meant for
        them) and nested values one leaf at a time; all else is the parent's.
        """

        def reduce(self, reduce_op, value, axis=None):
            parent = super().reduce

            def one(leaf):
                local = self.experimental_local_results(leaf)
                if axis is not None and all(getattr(v, "shape", None) is not None and v.shape.rank == 0
                                            for v in local):
                    return parent(reduce_op, leaf, axis=None)
                return parent(reduce_op, leaf, axis=axis)

            return tf.nest.map_structure(one, value)

    return KerasMultiWorkerMirroredStrategy


def is_chief(strategy):
    """Whether this process writes checkpoints, logs and exports.

    True for a single-process run; in a multi-worker job, for the `chief` task
    or, if the cluster has none, for worker 0 (TensorFlow's convention); on
    JAX, for the first host.
    """
    if isinstance(strategy, JaxDistribution):
        import jax

        return jax.process_index() == 0  # the first host of a pod slice
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    jobs = resolver.cluster_spec().jobs
    return resolver.task_type == "worker" and int(resolver.task_id) == 0 and "chief" not in jobs


def is_multi_worker(strategy):
    """Whether `strategy` spans several processes (a `TF_CONFIG` cluster of more than one task)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return False
    spec = resolver.cluster_spec()
    return sum(spec.num_tasks(job) for job in spec.jobs if job in ("chief", "worker")) > 1


def worker_failure(error):
    """A one-line description if `error` means a worker of a multi-worker job stopped, else None.

    TensorFlow's coordination service notices a worker that stops sending
    heartbeats (killed, preempted, its machine gone) and aborts every
    collective op on the others with an `UnavailableError`.
    """
    import sys

    tf = sys.modules.get("tensorflow")
    if tf is None or not isinstance(error, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
                                            tf.errors.AbortedError)):
        return None
    message = str(error)
    if "unhealthy" in message or "Collective ops is aborted" in message or "heartbeat" in message:
        lines = [line.strip() for line in message.splitlines()]
        tasks = [line for line in lines if line.startswith("/job:")]
        who = f" ({', '.join(tasks)})" if tasks else ""
        return f"a worker of the multi-worker job stopped or cannot be reached{who}"
    return None


def barrier(strategy):
    """Waits until every worker (TensorFlow) or host (JAX) of a multi-process job gets here."""
    if isinstance(strategy, JaxDistribution):
        import jax

        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("keras_vit_barrier")
        return
    if not is_multi_worker(strategy):
        return
    import tensorflow as tf

    strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)


def _check_distribution(distribution):
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"--distribution must be one of {DISTRIBUTIONS}. Received: distribution={distribution!r}")


def check_strategy_flags(use_tpu=False, tpu_name=None, distribution="auto", mesh=None, strategy="auto",
                         multihost=False):
    """Checks the flags of `get_strategy` for the backend in use, without touching a device.

    The trainer runs it with the other flag checks, so that a refused run writes
    nothing; `get_strategy` runs it too. Arguments as in `get_strategy`.

    Raises:
        ValueError: one line naming the flag, the value received and what is accepted.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy must be one of {STRATEGIES}. Received: strategy={strategy!r}")
    # Checked on both backends: TensorFlow ignores it, so a typo would pass unnoticed there.
    _check_distribution(distribution)
    if keras.backend.backend() == "jax":
        if strategy != "auto":
            raise ValueError(
                "--strategy picks a tf.distribute strategy, for the TensorFlow backend. On JAX use "
                "--distribution=data|fsdp (keras.distribution; on a pod slice the same command on every host). "
                f"Received: strategy={strategy!r}"
            )
        if multihost:
            check_multihost_environment()
        return
    if multihost:
        raise ValueError("--multihost joins the hosts of a JAX job (KERAS_BACKEND=jax); on TensorFlow run "
                         "several machines with --strategy=multi_worker and TF_CONFIG. Received: multihost=True")
    grpc_address(tpu_name)
    if strategy != "auto" and (use_tpu or tpu_name):
        raise ValueError(f"--strategy={strategy} cannot be combined with --tpu or --tpu_name (TPUStrategy). "
                         f"Received: strategy={strategy!r}")
    if distribution == "fsdp" or mesh:
        raise ValueError(
            "--distribution=fsdp and --mesh shard the model through keras.distribution, which needs the JAX "
            f"backend (KERAS_BACKEND=jax). Received: distribution={distribution!r}, mesh={mesh!r}"
        )
    if strategy == "multi_worker":
        _cluster_from_tf_config()


def get_strategy(use_tpu=False, tpu_name=None, distribution="auto", mesh=None, strategy="auto", multihost=False):
    """Where to train, for the backend in use.

    TensorFlow: `TPUStrategy` with `--tpu`, `MultiWorkerMirroredStrategy` with
    `strategy="multi_worker"`, `MirroredStrategy` over several GPUs (or with
    `strategy="mirrored"`), else the default strategy. JAX: a `JaxDistribution`
    over every device (the TPU's with `--tpu`), data parallel or, with
    `distribution="fsdp"`, sharded.

    Args:
        use_tpu: bool. Insist on a TPU; `TPUUnavailableError` without one.
        tpu_name: str or None. A named or remote TPU (TensorFlow only).
        distribution: `"auto"`, `"data"` or `"fsdp"` (JAX only).
        mesh: str or None. `"batch:N,model:M"` (JAX only).
        strategy: `"auto"`, `"mirrored"` or `"multi_worker"` (TensorFlow only).
        multihost: bool. Join a multi-host JAX job first (`join_hosts`; JAX only).

    Raises:
        ValueError: for flags `check_strategy_flags` refuses.
    """
    check_strategy_flags(use_tpu, tpu_name, distribution, mesh, strategy, multihost)
    if keras.backend.backend() == "jax":
        return jax_distribution(use_tpu, tpu_name, distribution, mesh, multihost)
    import tensorflow as tf

    if strategy == "multi_worker":
        return multi_worker_strategy()
    if use_tpu or tpu_name:
        return tpu_strategy(tpu_name or "local")
    if strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()

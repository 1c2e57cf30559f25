"""Choosing the distribution strategy: TPU, several GPUs, or the default."""

import keras


class TPUUnavailableError(RuntimeError):
    """No TPU could be reached; the message says which and why."""


def tpu_strategy(tpu_name=""):
    """Connects to a TPU, initializes it and returns a `TPUStrategy`.

    Args:
        tpu_name: str. `""` for the TPU attached to this VM or Colab runtime; a
            name or `grpc://host:port` for a remote one.

    Raises:
        TPUUnavailableError: if no TPU is reachable.
    """
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_name)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except Exception as error:  # noqa: BLE001 - TF raises many types here
        where = f"TPU {tpu_name!r}" if tpu_name else "a local TPU (Colab runtime or TPU VM)"
        raise TPUUnavailableError(
            f"--tpu was given but {where} is not reachable: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no details'}"
        ) from None


def get_strategy(use_tpu=False, tpu_name=None):
    """TPUStrategy with `--tpu`, MirroredStrategy over several GPUs, else the default.

    Under the JAX backend there is no tf.distribute: several devices are used
    through `keras.distribution.DataParallel`, and `None` is returned.
    """
    if keras.backend.backend() == "jax":
        if use_tpu or tpu_name:
            raise TPUUnavailableError("--tpu trains with the TensorFlow backend; set KERAS_BACKEND=tensorflow.")
        devices = keras.distribution.list_devices()
        if len(devices) > 1:
            keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        return None
    import tensorflow as tf

    if use_tpu or tpu_name:
        return tpu_strategy(tpu_name or "")
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()

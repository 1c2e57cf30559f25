"""Which code path the layers take in training: the CPU's or the accelerators'.

Some layers compute the same function two ways in training, each tuned for
where it runs:

- `"cpu"`: XLA:CPU's path. Layer normalization takes its row statistics as
  matrix-vector products with its gradient by hand (`layers/normalization.py`),
  which XLA:CPU runs at memory speed; everything else is Keras's own.
- `"accelerator"`: the GPU's and TPU's path, lean in memory. Layer normalization
  and the MLP's GELU have hand-written gradients that keep only the activations
  they need, in the compute dtype (`layers/lean.py`): under `mixed_bfloat16` a
  ViT's training step keeps no float32 copy of an activation, and the MLP keeps
  its hidden layer once instead of four times (BENCHMARKS.md, "Activation memory").

The default follows the devices: `"cpu"` when the process sees no GPU or TPU,
`"accelerator"` otherwise. The environment variable `KERAS_VIT_CODE_PATH`
overrides it (`auto`, `cpu` or `accelerator`), so that the accelerators' path
can be traced and tested on a CPU. It is read at every trace, not cached: a
TPU system initialized after the first model was built still counts, and a
test may switch paths between two calls. Inference takes neither: it is
Keras's own layers, so every export is the same whatever the path.
"""

import os

import keras

ENVIRONMENT_VARIABLE = "KERAS_VIT_CODE_PATH"
CODE_PATHS = ("auto", "cpu", "accelerator")


def device_platform():
    """`"cpu"`, `"gpu"` or `"tpu"`: where the backend runs its computations.

    Torch and numpy answer `"cpu"`: the layers take their own paths on JAX and
    TensorFlow only, and Keras's layers elsewhere.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend()
    if backend == "tensorflow":
        import tensorflow as tf

        for kind in ("TPU", "GPU"):
            if tf.config.list_logical_devices(kind):
                return kind.lower()
    return "cpu"


def code_path():
    """Returns `"cpu"` or `"accelerator"`: the path the layers take in training.

    Returns:
        str. `KERAS_VIT_CODE_PATH` when it names a path, otherwise (`auto` or
        unset) `"accelerator"` if the process sees a GPU or TPU, else `"cpu"`.

    Raises:
        ValueError: if `KERAS_VIT_CODE_PATH` is set to anything else.
    """
    chosen = os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower() or "auto"
    if chosen not in CODE_PATHS:
        raise ValueError(
            f"The environment variable {ENVIRONMENT_VARIABLE} must be one of {', '.join(CODE_PATHS)}. "
            f"Received: {ENVIRONMENT_VARIABLE}={os.environ[ENVIRONMENT_VARIABLE]!r}"
        )
    if chosen == "auto":
        return "cpu" if device_platform() == "cpu" else "accelerator"
    return chosen

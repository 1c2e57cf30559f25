"""Export to LiteRT (`.tflite`), float or quantized, and running the files.

`litert` converts a model with TensorFlow's LiteRT converter to builtin LiteRT ops
only, so the file runs in the standalone `ai-edge-litert` interpreter (no
TensorFlow kernels, "Flex" ops, needed). Quantization (`quantize`):

- `None`: float32 weights and activations; outputs equal the Keras model's to
  float32 rounding.
- `"dynamic"`: dynamic-range quantization. Kernels of dense and convolution
  layers are stored as int8 with a scale per output channel; at run time the
  activations entering them are quantized on the fly, everything else stays
  float. A quarter of the float file's weight bytes, no calibration data.
- `"int8"`: full-integer post-training quantization. Activations get fixed int8
  ranges measured on `representative_data` (a few hundred training images), so
  matrix products, additions and most element-wise ops run in int8; the input
  and output stay float32, so the file is called like the float one. Ops without
  an int8 kernel fall back to float.

A model quantized in Keras (`model.quantize("int8")`) is exported from its int8
kernels (`keras_vit.export.dequantize`).

Backends: on TensorFlow the model is traced into a SavedModel (batch size left
free: the interpreter can resize it; a model that takes images of any height and
width, a classifier with its evaluation transform in front, keeps them free too). On JAX it is lowered with `jax2tf` to
StableHLO, which the converter legalizes to LiteRT ops only for static shapes, so
the file has a fixed batch size (`batch_size`, 1 by default), a model of free
height or width is refused, and full-integer
`"int8"` is refused there (the runtime cannot run what the converter makes of
it): export under TensorFlow from the `.keras` file instead.
"""

import tempfile

import keras
import numpy as np

from keras_vit.export.dequantize import dequantized_copy, keras_quantization_mode
from keras_vit.export.inputs import (
    check_image_batch,
    check_positive_or_none,
    check_single_input,
    predict_in_chunks,
)
from keras_vit.export.saved_model_format import inference_saved_model
from keras_vit.files import write_atomically

QUANTIZE_MODES = (None, "dynamic", "int8")
"""The accepted `quantize=` values of `litert`: none (float32), dynamic-range int8 weights, or full
int8 with a representative dataset.
"""


def check_quantize(quantize):
    """Raises a ValueError unless `quantize` is one of `QUANTIZE_MODES`."""
    if quantize not in QUANTIZE_MODES:
        raise ValueError(
            f"`quantize` must be one of {QUANTIZE_MODES}. Received: quantize={quantize!r}"
        )


def litert(model, path, quantize=None, representative_data=None, batch_size=None):
    """Writes `model` as a LiteRT (`.tflite`) file, float or quantized.

    The file is written to a temporary file beside `path` and renamed onto it,
    so `path` holds the old file or the complete new one, never a partial write.

    Args:
        model: A built single-input Keras model (a keras_vit classifier or
            feature extractor), float or quantized by `model.quantize("int8")`.
        path: str. The `.tflite` file to write (replaced if it exists).
        quantize: `None` (float32), `"dynamic"` (int8 weights, float
            activations) or `"int8"` (int8 weights and activations, calibrated
            on `representative_data`). Defaults to `None`; a model quantized in
            Keras is exported with its int8 weights as `"dynamic"`.
        representative_data: Required with `quantize="int8"`, else unused.
            Inputs to calibrate the activation ranges on: an array of images
            `(num_images, height, width, channels)` as the model takes them, or
            an iterable of such arrays (batches, e.g. a `tf.data.Dataset` of
            images). A few hundred images are enough.
        batch_size: int or None. Batch dimension of the file's input. `None`
            leaves it free on TensorFlow (resize it in the interpreter) and
            fixes it to 1 on JAX, whose exported graphs convert only with
            static shapes. Defaults to `None`.

    Returns:
        str. `path`.

    Raises:
        ValueError: for a `quantize` mode not in `QUANTIZE_MODES`, `"int8"`
            without `representative_data` or on JAX, a backend other than
            TensorFlow and JAX, a model of several inputs, or on JAX a model
            whose height or width is free (a classifier with its evaluation
            transform in front: export it under TensorFlow).
    """
    check_quantize(quantize)
    if quantize == "int8" and representative_data is None:
        raise ValueError(
            '`quantize="int8"` calibrates the activation ranges on example inputs: pass '
            "`representative_data` (an array of images or an iterable of image batches). "
            "Received: representative_data=None"
        )
    check_positive_or_none(batch_size, "batch_size")
    backend = keras.backend.backend()
    if backend not in ("tensorflow", "jax"):
        raise ValueError(
            "LiteRT export traces the model with TensorFlow (Keras on TensorFlow) or "
            "jax2tf (Keras on JAX). Save the model as `.keras`, load it under "
            f"KERAS_BACKEND=tensorflow and export there. Received: backend={backend!r}"
        )
    if backend == "jax" and quantize == "int8":
        # The converter writes such a file, but the LiteRT runtime aborts the process
        # when it allocates its tensors (TF 2.21, ai-edge-litert 2.3).
        raise ValueError(
            '`quantize="int8"` (full-integer) is only exported with Keras on TensorFlow: '
            "from a JAX-lowered model the converter writes a file LiteRT cannot run. Save "
            "the model as `.keras`, load it under KERAS_BACKEND=tensorflow and export there, "
            f'or use quantize="dynamic". Received: quantize="int8" with backend={backend!r}'
        )
    check_single_input(model, "LiteRT")
    if backend == "jax" and None in tuple(model.input_shape[1:]):
        # jax2tf lowers for LiteRT with static shapes only; a free height or width (a model with
        # its evaluation transform in front) fails deep inside it.
        raise ValueError(
            "LiteRT export from Keras on JAX needs the model's height and width fixed: jax2tf lowers "
            "static shapes only. Save the model as `.keras`, load it under KERAS_BACKEND=tensorflow "
            "(which keeps them free) and export there, or build it with a fixed input size. "
            f"Received: input_shape={tuple(model.input_shape)} with backend='jax'"
        )
    if quantize == "int8" and hasattr(representative_data, "shape"):
        _check_images(representative_data.shape[1:], model.input_shape[1:])
    if keras_quantization_mode(model) == "int8":
        model = dequantized_copy(model)
        quantize = quantize or "dynamic"

    import tensorflow as tf

    if backend == "jax" and batch_size is None:
        batch_size = 1
    input_shape = (batch_size, *model.input_shape[1:])
    with tempfile.TemporaryDirectory() as workdir:
        if backend == "tensorflow":
            converter = _tensorflow_converter(model, input_shape, workdir)
        else:
            converter = _jax_converter(model, input_shape)
        # Builtin ops only: TensorFlow-kernel ("Flex") ops would need TensorFlow
        # in the interpreter, which the standalone LiteRT runtime has not.
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize is not None:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "int8":
            # Calibration runs the float model on these batches: they need the
            # file's batch size where it is fixed.
            converter.representative_dataset = lambda: (
                [batch] for batch in _calibration_batches(representative_data, input_shape)
            )
        flatbuffer = converter.convert()
    write_atomically(path, flatbuffer)
    return path


def _tensorflow_converter(model, input_shape, workdir):
    """A LiteRT converter from a SavedModel of `model`'s inference call."""
    import tensorflow as tf

    inference_saved_model(model, input_shape, workdir)
    return tf.lite.TFLiteConverter.from_saved_model(workdir)


def _jax_converter(model, input_shape):
    """A LiteRT converter from `model`'s inference call lowered by jax2tf (`_jax_function`)."""
    import tensorflow as tf

    function = _jax_function(model, input_shape)
    return tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function()])


def _jax_function(model, input_shape):
    """`model`'s inference call lowered by jax2tf into a `tf.function`, weights as constants.

    The weights are closed over rather than passed as variables: a model's
    variables include uint32 random-generator states, which LiteRT's variable
    ops cannot hold.
    """
    import tensorflow as tf
    from jax.experimental import jax2tf

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def infer(images):
        outputs, _ = model.stateless_call(trainable, non_trainable, images, training=False)
        return outputs

    return tf.function(
        jax2tf.convert(infer, with_gradient=False),
        input_signature=[tf.TensorSpec(input_shape, model.inputs[0].dtype, name="images")],
        autograph=False,
    )


def _calibration_batches(data, input_shape):
    """Yields float32 batches of `input_shape[0]` images (1 if free) from `data`."""
    batch_size = input_shape[0] or 1
    batches = [data] if isinstance(data, np.ndarray) or hasattr(data, "shape") else data
    pending = []
    for batch in batches:
        batch = np.asarray(keras.ops.convert_to_numpy(batch), dtype="float32")
        _check_images(batch.shape[1:], input_shape[1:])
        pending.extend(batch)
        while len(pending) >= batch_size:
            yield np.stack(pending[:batch_size])
            pending = pending[batch_size:]


def _check_images(shape, expected):
    if tuple(shape) != tuple(expected):
        raise ValueError(
            f"`representative_data` must hold images of the model's input shape {tuple(expected)}. "
            f"Received: images of shape {tuple(shape)}"
        )


def litert_interpreter(path, num_threads=None):
    """A LiteRT interpreter for a `.tflite` file.

    The standalone runtime (`pip install ai-edge-litert`) when it is installed,
    else TensorFlow's `tf.lite.Interpreter` (deprecated there, same runtime).

    Args:
        path: str. The `.tflite` file.
        num_threads: int or None. CPU threads; None for the runtime's default.

    Returns:
        An interpreter, with its tensors not yet allocated.
    """
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        import tensorflow as tf

        Interpreter = tf.lite.Interpreter
    return Interpreter(model_path=str(path), num_threads=num_threads)


def litert_predict(interpreter, images):
    """Runs a single-input, single-output LiteRT model on a batch of images.

    A file with a free batch dimension is resized to the whole batch; one with
    a fixed batch size runs the images in chunks of it (the last one padded).

    Args:
        interpreter: From `litert_interpreter`.
        images: Array `(batch, height, width, channels)`, of the file's
            height, width and channels; where the file leaves the height and
            width free (a model with its transform in front), any.

    Returns:
        numpy array, the model's output for every image.

    Raises:
        ValueError: if `images` is not a non-empty batch of the file's image shape.
    """
    images = np.asarray(images)
    (input_detail,) = interpreter.get_input_details()
    (output_detail,) = interpreter.get_output_details()
    # -1 marks a free size in the file's signature.
    signature = [None if size == -1 else int(size) for size in input_detail["shape_signature"]]
    check_image_batch(images, signature)
    images = images.astype(input_detail["dtype"])
    chunk = signature[0] or len(images)
    # A free size (the batch, or the height and width of a model with its transform inside) takes
    # this batch's; a fixed batch size runs chunks of it.
    shape = (chunk, *images.shape[1:])
    if None in signature and tuple(input_detail["shape"]) != shape:
        interpreter.resize_tensor_input(input_detail["index"], shape)
    interpreter.allocate_tensors()

    def run(batch):
        interpreter.set_tensor(input_detail["index"], batch)
        interpreter.invoke()
        return interpreter.get_tensor(output_detail["index"])

    return predict_in_chunks(run, images, chunk)

"""Export to LiteRT (`.tflite`), float or quantized, and to OpenVINO; and running the files.

`openvino` writes an OpenVINO model (`.xml` + `.bin`, float32 weights) for serving
on x86 CPUs; `openvino_compiled` compiles it in float32 or bfloat16 (OpenVINO's
kernels use AMX and AVX512-BF16 where the CPU has them), `openvino_predict` runs it.
Needs Keras on TensorFlow for the export (from JAX: save `.keras`, export under TensorFlow).

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

A model quantized in Keras (`model.quantize("int8")`: int8 kernels with a scale per
output unit, inputs quantized per token) is exported from its int8 kernels: the
converter sees them dequantized, and dynamic-range quantization (at least; `"int8"`
also works) requantizes each to the same int8 values, since LiteRT's per-channel
symmetric scale is the same abs-max rule as Keras'.

Backends: on TensorFlow the model is traced into a SavedModel (batch size left
free: the interpreter can resize it). On JAX it is lowered with `jax2tf` to
StableHLO, which the converter legalizes to LiteRT ops only for static shapes, so
the file has a fixed batch size (`batch_size`, 1 by default); full-integer
`"int8"` is refused there (the runtime cannot run what the converter makes of
it): export under TensorFlow from the `.keras` file instead.
"""

import os
import tempfile

import keras
import numpy as np

from keras_vit.utils import write_atomically

QUANTIZE_MODES = (None, "dynamic", "int8")


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
    """
    check_quantize(quantize)
    if quantize == "int8" and representative_data is None:
        raise ValueError(
            '`quantize="int8"` calibrates the activation ranges on example inputs: pass '
            "`representative_data` (an array of images or an iterable of image batches). "
            "Received: representative_data=None"
        )
    _check_positive_or_none(batch_size, "batch_size")
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
    if len(model.inputs) != 1:
        raise ValueError(
            "LiteRT export takes a model with one image input. "
            f"Received: a model with {len(model.inputs)} inputs"
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


def keras_quantization_mode(model):
    """The Keras quantization of `model`'s layers: `None` (float) or `"int8"`.

    Raises:
        ValueError: for another mode (`int4`, `float8`, `gptq`), which the
            export does not translate.
    """
    modes = {
        layer.quantization_mode
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "quantization_mode", None) is not None
    }
    if not modes:
        return None
    if modes != {"int8"}:
        raise ValueError(
            "LiteRT export translates float models and models quantized with "
            f'`model.quantize("int8")`. Received: quantization modes {sorted(modes)}'
        )
    return "int8"


def dequantized_copy(model):
    """A float copy of a model quantized by `model.quantize("int8")`.

    Each int8 kernel becomes `kernel / kernel_scale` (the Keras int8 layers'
    own dequantization), other weights are copied as they are. The copy
    computes the int8 model's function with float matrix products, a form the
    LiteRT converter can quantize again.

    Args:
        model: A functional Keras model.

    Returns:
        A new float model.
    """
    config = _float_config(keras.saving.serialize_keras_object(model))
    copy = keras.saving.deserialize_keras_object(config)
    targets = {variable.path: variable for variable in copy.variables}
    done = set()
    for layer in model._flatten_layers(include_self=False):
        if getattr(layer, "quantization_mode", None) != "int8":
            continue
        if type(layer) is not keras.layers.Dense:
            raise ValueError(
                "Only int8 `Dense` layers are dequantized for export. "
                f"Received: an int8 {type(layer).__name__} ({layer.path})"
            )
        # Kernel (in, units) int8, kernel_scale (units,): the float kernel is q / scale.
        kernel = keras.ops.convert_to_numpy(layer._kernel).astype("float32")
        scale = keras.ops.convert_to_numpy(layer.kernel_scale).astype("float32")
        targets[layer._kernel.path].assign(kernel / scale)
        done.update((layer._kernel.path, layer.kernel_scale.path))
    for variable in model.variables:
        if variable.path in done:
            continue
        if variable.path in targets:
            targets[variable.path].assign(variable)
        elif "seed_generator" not in variable.path:
            # Random-generator states are named by instance count and unused at inference.
            raise ValueError(
                f"The float copy of the model has no variable {variable.path!r}."
            )
    return copy


def _float_config(config):
    """`config` with every quantized dtype policy replaced by its float source.

    A policy map (the int8 sublayers of one of our layers) becomes its default.
    """
    if isinstance(config, dict):
        if config.get("class_name") == "QuantizedDTypePolicy":
            return config["config"]["source_name"]
        if config.get("class_name") == "DTypePolicyMap":
            return _float_config(config["config"]["default_policy"])
        return {
            key: _float_config(value)
            for key, value in config.items()
            if key != "quantization_config"
        }
    if isinstance(config, list):
        return [_float_config(value) for value in config]
    return config


def _tensorflow_converter(model, input_shape, workdir):
    """A LiteRT converter from a SavedModel of `model`'s inference call."""
    import tensorflow as tf

    _write_saved_model(model, input_shape, workdir)
    return tf.lite.TFLiteConverter.from_saved_model(workdir)


def _write_saved_model(model, input_shape, workdir):
    """Writes a SavedModel of `model`'s inference call (`serve`) into `workdir` (TensorFlow backend)."""
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "serve",
        lambda images: model(images, training=False),
        input_signature=[tf.TensorSpec(input_shape, model.inputs[0].dtype, name="images")],
    )
    archive.write_out(workdir, verbose=False)


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


def _check_positive_or_none(value, name):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"`{name}` must be a positive integer or None. Received: {name}={value!r}")


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
        images: Array `(batch, height, width, channels)`.

    Returns:
        numpy array, the model's output for every image.
    """
    images = np.asarray(images)
    (input_detail,) = interpreter.get_input_details()
    (output_detail,) = interpreter.get_output_details()
    images = images.astype(input_detail["dtype"])
    fixed = int(input_detail["shape_signature"][0])
    chunk = len(images) if fixed == -1 else fixed
    if fixed == -1 and tuple(input_detail["shape"]) != images.shape:
        interpreter.resize_tensor_input(input_detail["index"], images.shape)
    interpreter.allocate_tensors()

    def run(batch):
        interpreter.set_tensor(input_detail["index"], batch)
        interpreter.invoke()
        return interpreter.get_tensor(output_detail["index"])

    return _predict_in_chunks(run, images, chunk)


def _predict_in_chunks(run, images, chunk):
    """`run` on `images` in batches of `chunk`, the last one padded with its last image; outputs cut back."""
    outputs = []
    for start in range(0, len(images), chunk):
        batch = images[start : start + chunk]
        count = len(batch)
        if count < chunk:
            batch = np.concatenate([batch, np.repeat(batch[-1:], chunk - count, axis=0)])
        outputs.append(run(batch)[:count])
    return np.concatenate(outputs)


# ---- OpenVINO -----------------------------------------------------------------------------

# Inference precisions of `openvino_compiled`: OpenVINO's `INFERENCE_PRECISION_HINT`.
OPENVINO_PRECISIONS = (None, "f32", "bf16", "f16")


def openvino(model, path, batch_size=None):
    """Writes `model` as an OpenVINO model (IR): `path` (`.xml`) and its weights beside it (`.bin`).

    OpenVINO (`pip install openvino`, the `openvino` extra) converts the
    model's inference call, traced into a SavedModel, to its own graph with
    float32 weights; this needs Keras on TensorFlow (from JAX, save the model
    as `.keras` and export it from a TensorFlow process). The
    precision it runs in is chosen when the file is compiled
    (`openvino_compiled`): float32, or bfloat16 on CPUs with AMX or AVX512-BF16
    (OpenVINO's own kernels, which use those units). Both files are written into
    a temporary folder beside `path` and renamed onto their names, the `.xml`
    last; if that last rename fails the old `.bin` is put back.

    Args:
        model: A built single-input Keras model, float or quantized by
            `model.quantize("int8")` (then exported with its int8 weights
            dequantized to float32).
        path: str. The `.xml` file to write; the weights go to the same name
            with `.bin`. Both are replaced if they exist.
        batch_size: int or None. Batch dimension of the input; `None` leaves
            it free. Defaults to `None`.

    Returns:
        str. `path`.
    """
    path = str(path)
    if not path.endswith(".xml"):
        raise ValueError(
            "An OpenVINO model is an `.xml` file with its weights in a `.bin` file "
            f"beside it: `path` must end in `.xml`. Received: path={path!r}"
        )
    _check_positive_or_none(batch_size, "batch_size")
    backend = keras.backend.backend()
    if backend != "tensorflow":
        # From JAX, jax2tf's graphs hold the model as one StableHLO call (XlaCallModule),
        # which OpenVINO's TensorFlow reader cannot convert, and OpenVINO's own JAX
        # reader fails on ops these models use (openvino 2026.4).
        raise ValueError(
            "OpenVINO export reads the model through TensorFlow: save it as `.keras`, load it "
            f"under KERAS_BACKEND=tensorflow and export there. Received: backend={backend!r}"
        )
    if len(model.inputs) != 1:
        raise ValueError(
            "OpenVINO export takes a model with one image input. "
            f"Received: a model with {len(model.inputs)} inputs"
        )
    ov = _import_openvino()
    if keras_quantization_mode(model) == "int8":
        model = dequantized_copy(model)
    input_shape = (batch_size, *model.input_shape[1:])
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".tmp-openvino-") as workdir:
        saved_model = os.path.join(workdir, "saved_model")
        _write_saved_model(model, input_shape, saved_model)
        converted = ov.convert_model(saved_model)
        staged = os.path.join(workdir, "model.xml")
        # Keep float32 weights: the precision is chosen at compile time.
        ov.save_model(converted, staged, compress_to_fp16=False)
        _replace_pair(staged, path, workdir)
    return path


def _replace_pair(staged, path, workdir):
    """Moves the staged `.bin` and `.xml` onto `path`'s pair, the `.xml` last.

    The `.xml` names no weights file (OpenVINO reads the `.bin` of the same name).
    Two renames are not one atomic step: if the second fails, the old `.bin`
    (kept aside as a hard link, or a copy) goes back, so the pair on disk is
    the old one or the new one. A reader opening the files between the two
    renames can still see the new weights with the old graph.
    """
    weights = path[:-4] + ".bin"
    backup = None
    if os.path.exists(weights):
        backup = os.path.join(workdir, "previous.bin")
        try:
            os.link(weights, backup)
        except OSError:
            import shutil

            shutil.copy2(weights, backup)
    os.replace(staged[:-4] + ".bin", weights)
    try:
        os.replace(staged, path)
    except BaseException:
        if backup is not None:
            os.replace(backup, weights)
        else:
            os.remove(weights)
        raise


def openvino_compiled(path, precision=None, num_threads=None):
    """Compiles an OpenVINO model (from `openvino`) for this machine's CPU.

    The model is compiled for latency (`PERFORMANCE_HINT="LATENCY"`: one
    inference stream using every thread), as a server answering one batch at
    a time runs it.

    Args:
        path: str. The `.xml` file.
        precision: str or None. `None` (OpenVINO's choice: bfloat16 on CPUs
            with AMX, else float32), `"f32"`, `"bf16"` (bfloat16 matrix
            products and activations) or `"f16"`. A CPU without the matching
            instructions (AVX512-BF16/AMX for bf16, AVX512-FP16/AMX-FP16 for
            f16) runs float32 instead: `openvino_precision(compiled)` tells
            which one it got. Defaults to `None`.
        num_threads: int or None. CPU threads; `None` for every core.
            Defaults to `None`.

    Returns:
        An `openvino.CompiledModel`; `openvino_predict` runs it.
    """
    if precision not in OPENVINO_PRECISIONS:
        raise ValueError(
            f"`precision` must be one of {OPENVINO_PRECISIONS}. Received: precision={precision!r}"
        )
    _check_positive_or_none(num_threads, "num_threads")
    ov = _import_openvino()
    config = {"PERFORMANCE_HINT": "LATENCY"}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    if num_threads is not None:
        config["INFERENCE_NUM_THREADS"] = num_threads
    core = ov.Core()
    return core.compile_model(core.read_model(str(path)), "CPU", config)


def openvino_precision(compiled):
    """The precision a compiled OpenVINO model runs in: `"f32"`, `"bf16"` or `"f16"`."""
    return compiled.get_property("INFERENCE_PRECISION_HINT").to_string()


def openvino_predict(compiled, images):
    """Runs a single-input, single-output compiled OpenVINO model on a batch of images.

    A model with a free batch dimension takes the whole batch at once; one with a
    fixed batch size runs the images in chunks of it (the last one padded).

    Args:
        compiled: From `openvino_compiled`.
        images: Array `(batch, height, width, channels)`.

    Returns:
        numpy array, the model's output for every image (float32).
    """
    images = np.asarray(images, dtype="float32")
    if images.ndim != 4 or not len(images):
        raise ValueError(
            "`images` must be a non-empty batch `(batch, height, width, channels)`. "
            f"Received: images of shape {images.shape}"
        )
    batch = compiled.input(0).get_partial_shape()[0]
    chunk = len(images) if batch.is_dynamic else batch.get_length()
    return _predict_in_chunks(
        lambda part: np.asarray(compiled(part)[compiled.output(0)], dtype="float32"), images, chunk
    )


def _import_openvino():
    try:
        import openvino
    except ImportError:
        raise ImportError(
            "OpenVINO export and inference need the `openvino` package: "
            "`pip install openvino` (or keras_vit's `openvino` extra)."
        ) from None
    return openvino

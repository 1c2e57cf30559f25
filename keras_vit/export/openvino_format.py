"""Export to OpenVINO (`.xml` + `.bin`, float32 weights), and compiling and running the files.

`openvino` writes an OpenVINO model for serving on x86 CPUs; `openvino_compiled`
compiles it in float32 or bfloat16 (OpenVINO's kernels use AMX and AVX512-BF16
where the CPU has them), `openvino_predict` runs it. Needs Keras on TensorFlow
for the export (from JAX: save `.keras`, export under TensorFlow).
"""

import os
import shutil
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
from keras_vit.files import replace_file

# Inference precisions of `openvino_compiled`: OpenVINO's `INFERENCE_PRECISION_HINT`.
OPENVINO_PRECISIONS = (None, "f32", "bf16", "f16")
"""The accepted inference precisions of `openvino_compiled`: the device's default (None), float32,
bfloat16 or float16.
"""


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

    OpenVINO's converter sends usage telemetry unless declined (`opt_in_out
    --opt_out`, or `CI=true` in the environment), each event from a forked copy
    of this process: in a process holding gigabytes those forks can be most of
    the export's time (the export guide has figures). keras_vit leaves the
    choice to you.

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
    check_positive_or_none(batch_size, "batch_size")
    backend = keras.backend.backend()
    if backend != "tensorflow":
        # From JAX, jax2tf's graphs hold the model as one StableHLO call (XlaCallModule),
        # which OpenVINO's TensorFlow reader cannot convert, and OpenVINO's own JAX
        # reader fails on ops these models use (openvino 2026.4).
        raise ValueError(
            "OpenVINO export reads the model through TensorFlow: save it as `.keras`, load it "
            f"under KERAS_BACKEND=tensorflow and export there. Received: backend={backend!r}"
        )
    check_single_input(model, "OpenVINO")
    ov = _import_openvino()
    if keras_quantization_mode(model) == "int8":
        model = dequantized_copy(model)
    input_shape = (batch_size, *model.input_shape[1:])
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".tmp-openvino-") as workdir:
        saved_model = os.path.join(workdir, "saved_model")
        inference_saved_model(model, input_shape, saved_model)
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
            shutil.copy2(weights, backup)
    replace_file(staged[:-4] + ".bin", weights)
    try:
        replace_file(staged, path)
    except BaseException:
        if backup is not None:
            replace_file(backup, weights)
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
    check_positive_or_none(num_threads, "num_threads")
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
        images: Array `(batch, height, width, channels)`, of the model's
            height, width and channels.

    Returns:
        numpy array, the model's output for every image (float32).

    Raises:
        ValueError: if `images` is not a non-empty batch of the model's image shape.
    """
    images = np.asarray(images, dtype="float32")
    shape = [None if size.is_dynamic else size.get_length() for size in compiled.input(0).get_partial_shape()]
    check_image_batch(images, shape)
    chunk = shape[0] or len(images)
    return predict_in_chunks(
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

"""keras_vit.export.litert: float, dynamic-range and full-int8 files, run by the LiteRT interpreter."""

import os

import keras
import numpy as np
import pytest

import keras_vit.export
from tests.export.helpers import BACKEND, FLOAT_ATOL, build, forward, relative_error, run_file, smooth_images
from tests.testing import to_numpy


# ---- float32 ------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["hybrid", "convit", "swin"])  # ViT: the next test
def test_float_file_computes_the_keras_outputs(family, tmp_path):
    model = build(family)
    images = smooth_images(model, 3)
    expected = forward(model, images)
    assert np.abs(expected).max() > 0.01
    path = keras_vit.export.litert(model, str(tmp_path / "model.tflite"))
    assert path == str(tmp_path / "model.tflite") and os.listdir(tmp_path) == ["model.tflite"]
    np.testing.assert_allclose(run_file(path, images), expected, atol=FLOAT_ATOL, rtol=0)


def test_file_batch_size_is_free_on_tensorflow_and_fixed_on_jax(tmp_path):
    model = build("vit")
    images = smooth_images(model, 3)
    expected = forward(model, images)
    free = keras_vit.export.litert(model, str(tmp_path / "free.tflite"))
    interpreter = keras_vit.export.litert_interpreter(free)
    batch = interpreter.get_input_details()[0]["shape_signature"][0]
    assert batch == (-1 if BACKEND == "tensorflow" else 1)
    np.testing.assert_allclose(keras_vit.export.litert_predict(interpreter, images), expected, atol=FLOAT_ATOL)
    # A fixed batch of 2 runs 3 images as 2 + (1 padded to 2).
    fixed = keras_vit.export.litert(model, str(tmp_path / "fixed.tflite"), batch_size=2)
    interpreter = keras_vit.export.litert_interpreter(fixed)
    assert list(interpreter.get_input_details()[0]["shape_signature"]) == [2, 32, 32, 3]
    np.testing.assert_allclose(keras_vit.export.litert_predict(interpreter, images), expected, atol=FLOAT_ATOL)


# ---- quantized ----------------------------------------------------------------------


def _int8_tensors(path):
    interpreter = keras_vit.export.litert_interpreter(path)
    return sum(detail["dtype"] == np.int8 for detail in interpreter.get_tensor_details())


def test_dynamic_and_int8_files_stay_close_to_float(tmp_path):
    model = build("vit")
    images = smooth_images(model, 32)
    expected = forward(model, images)
    paths = {None: keras_vit.export.litert(model, str(tmp_path / "float.tflite"))}
    for quantize in ("dynamic", "int8") if BACKEND == "tensorflow" else ("dynamic",):
        # Calibration data as batches from an iterable (an array works as well).
        batches = (images[i : i + 10] for i in range(0, len(images), 10))
        paths[quantize] = keras_vit.export.litert(
            model, str(tmp_path / f"{quantize}.tflite"), quantize=quantize, representative_data=batches
        )
        # int8 kernels (the graph itself is a large part of so small a file).
        assert os.path.getsize(paths[quantize]) < 0.8 * os.path.getsize(paths[None])
    # Dynamic range: int8 weights, float activations; measured ~0.7% of the logit spread.
    dynamic = run_file(paths["dynamic"], images)
    assert relative_error(dynamic, expected) < 0.03
    assert (dynamic.argmax(-1) == expected.argmax(-1)).mean() >= 0.95
    if BACKEND != "tensorflow":
        with pytest.raises(ValueError, match="only exported with Keras on TensorFlow.*backend='jax'"):
            keras_vit.export.litert(model, str(tmp_path / "int8.tflite"), quantize="int8", representative_data=images)
        return
    # Full int8: every activation rounded to 256 levels calibrated on these images; on
    # this random 2-block model ~20% of the spread, 97% top-1 agreement (a trained
    # Fashion-MNIST ViT keeps its accuracy within 0.5 points: benchmarks/quantization.py).
    full = run_file(paths["int8"], images)
    assert np.corrcoef(full.ravel(), expected.ravel())[0, 1] > 0.95
    assert (full.argmax(-1) == expected.argmax(-1)).mean() >= 0.8
    # Its activations are int8 tensors, where dynamic range keeps them float.
    assert _int8_tensors(paths["int8"]) > 2 * _int8_tensors(paths["dynamic"])


# ---- arguments and atomic writes ----------------------------------------------------


def test_bad_quantize_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"`quantize` must be one of \(None, 'dynamic', 'int8'\). "
                                         r"Received: quantize='float16'"):
        keras_vit.export.litert(None, str(tmp_path / "m.tflite"), quantize="float16")
    with pytest.raises(ValueError, match="representative_data.*Received: representative_data=None"):
        keras_vit.export.litert(None, str(tmp_path / "m.tflite"), quantize="int8")
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        keras_vit.export.litert(None, str(tmp_path / "m.tflite"), batch_size=0)
    assert os.listdir(tmp_path) == []


def test_a_failed_export_leaves_the_old_file_and_no_temporary_one(tmp_path, monkeypatch):
    model = build("vit")
    path = tmp_path / "model.tflite"
    path.write_bytes(b"old")
    if BACKEND == "tensorflow":  # JAX refuses full int8 first
        wrong = np.zeros((2, 16, 16, 3), "float32")
        with pytest.raises(ValueError, match=r"input shape \(32, 32, 3\). Received: images of shape \(16, 16, 3\)"):
            keras_vit.export.litert(model, str(path), quantize="int8", representative_data=wrong)

    def fail(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        keras_vit.export.litert(model, str(path))
    assert os.listdir(tmp_path) == ["model.tflite"] and path.read_bytes() == b"old"


# ---- Swin's cyclic shift without tf.Roll ----------------------------------------------


@pytest.mark.parametrize("shift", [(0, 0), (1, 2), (-1, -3), (5, -7)])
def test_cyclic_shift_is_a_roll(shift):
    from keras_vit.models.swin.window_attention import cyclic_shift

    x = np.arange(2 * 4 * 6 * 3, dtype="float32").reshape(2, 4, 6, 3)
    np.testing.assert_array_equal(to_numpy(cyclic_shift(keras.ops.convert_to_tensor(x), shift)),
                                  np.roll(x, shift, axis=(1, 2)))

"""LiteRT export (float, dynamic-range, full int8) and Keras int8 weights, run by the LiteRT interpreter."""

import os

import keras
import numpy as np
import pytest

import keras_vit
import keras_vit.export
from keras_vit.layers import SwinTransformerBlock, TransformerBlock
from keras_vit.models.variants import TESTING_VARIANTS
from tests.testing import set_random_weights, to_numpy

# `Model.quantize` warns once for every layer without weights to quantize.
pytestmark = pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")

BACKEND = keras.backend.backend()
SWIN = (keras_vit.SwinTransformer, dict(image_size=32, patch_size=4, embed_dim=16, depths=(2, 2),
                                        num_heads=(2, 2), window_size=4, num_classes=10, drop_path_rate=0.0))
# Float32 export: the same ops in another order (XNNPACK's kernels), on logits of size ~1.
FLOAT_ATOL = 1e-4


# The testing hybrid at 32 px, one ResNet stage, one block: the same export path, in a third of the time.
HYBRID = (TESTING_VARIANTS["hybrid"][0],
          dict(TESTING_VARIANTS["hybrid"][1], image_size=32, num_layers=1, resnet_stages=(1,)))


def build(family):
    builder, config = {"swin": SWIN, "hybrid": HYBRID}.get(family) or TESTING_VARIANTS[family]
    model = builder(**config)
    # The head is zero-initialized: random weights make the comparisons real.
    set_random_weights(model, scale=0.1)
    return model


def smooth_images(model, count, seed=0):
    """Images that are colour gradients, one per image: features that vary across the batch.

    On uniform noise a random model's logits differ by less than an int8 step of
    its activations, which says nothing about the quantization.
    """
    height, width, channels = model.input_shape[1:]
    rng = np.random.default_rng(seed)
    rows, cols = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    coef = rng.uniform(0, 1, (count, 3, channels))
    coef = coef[:, None, None]  # (count, 1, 1, 3, channels)
    images = coef[..., 0, :] * rows[..., None] + coef[..., 1, :] * cols[..., None] + coef[..., 2, :]
    return (255 / 3 * images).astype("float32")


def forward(model, images):
    # The compiled predict step: on JAX an eager call of these models takes seconds.
    return np.asarray(model.predict_on_batch(images))


def run_file(path, images):
    return keras_vit.export.litert_predict(keras_vit.export.litert_interpreter(path), images)


def relative_error(got, expected):
    """Largest error over the spread of the reference logits."""
    return float(np.abs(got - expected).max() / (expected.max() - expected.min()))


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


def _int8_constants(path):
    """The int8 weight arrays of a `.tflite` file."""
    interpreter = keras_vit.export.litert_interpreter(path)
    interpreter.allocate_tensors()
    for detail in interpreter.get_tensor_details():
        if detail["dtype"] == np.int8:
            try:
                yield interpreter.get_tensor(detail["index"])
            except ValueError:  # an activation, not allocated as a constant
                continue


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


# ---- Keras int8 weights (model.quantize("int8")) --------------------------------------


def _block_denses(model):
    """Every Dense/EinsumDense inside the transformer blocks."""
    blocks = [layer for layer in model._flatten_layers(include_self=False)
              if isinstance(layer, (TransformerBlock, SwinTransformerBlock))]
    assert blocks
    return [layer for block in blocks for layer in block._flatten_layers(include_self=False)
            if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense))]


# Dense layers per block: qkv, out, fc1, fc2; GPSA: qk, v, out, pos_proj, fc1, fc2.
DENSES_PER_MODEL = {"vit": 2 * 4, "convit": 2 * 6 + 1 * 4, "swin": 4 * 4}


@pytest.mark.parametrize("family", sorted(DENSES_PER_MODEL))
def test_keras_int8_quantizes_every_block_dense(family):
    model = build(family)
    images = smooth_images(model, 8)
    expected = forward(model, images)
    model.quantize("int8")
    denses = _block_denses(model)
    assert len(denses) == DENSES_PER_MODEL[family]
    for layer in denses:
        assert layer.quantization_mode == "int8", layer.path
        assert layer._kernel.dtype == "int8" and {"kernel", "kernel_scale"} <= {v.name for v in layer.weights}
    # The patch embedding (a Dense in ViT and ConViT) and the head are quantized too.
    others = {layer.name for layer in model._flatten_layers(include_self=False)
              if layer.quantization_mode == "int8" and layer not in denses}
    assert "head" in others and (family == "swin" or "projection" in others)
    # int8 weights and per-token int8 inputs of every product: measured under 3% of the spread.
    quantized = forward(model, images)
    assert relative_error(quantized, expected) < 0.05
    assert (quantized.argmax(-1) == expected.argmax(-1)).mean() >= 0.9


@pytest.mark.parametrize("family, scope", [("convit", "blocks"), ("vit", "model"), ("swin", "model")])
def test_int8_model_keras_file_round_trip(family, scope, tmp_path):
    # ConViT's blocks hold both attentions (GPSA, then multi-head) and the MLP.
    model = build(family)
    images = smooth_images(model, 4)
    denses = _block_denses(model)
    model.quantize("int8", filters=(lambda layer: layer in denses) if scope == "blocks" else None)
    quantized = forward(model, images)
    modes = [layer.quantization_mode for layer in model._flatten_layers(include_self=False)]
    for generation in range(2):  # a restored model saves again
        path = str(tmp_path / f"int8_{generation}.keras")
        model.save(path)
        model = keras.saving.load_model(path)
        assert [layer.quantization_mode for layer in model._flatten_layers(include_self=False)] == modes
        np.testing.assert_array_equal(forward(model, images), quantized)


def test_keras_int8_model_exports_to_saved_model_and_litert(tmp_path):
    import tensorflow as tf

    from train.export import export_saved_model

    model = build("vit")
    images = np.round(smooth_images(model, 16))  # the SavedModel takes uint8 images
    model.quantize("int8")
    quantized = forward(model, images)

    export_saved_model(model, str(tmp_path / "saved_model"))
    loaded = tf.saved_model.load(str(tmp_path / "saved_model"))
    served = loaded.serve(tf.constant(images.astype("uint8")))
    np.testing.assert_allclose(served.numpy(), to_numpy(keras.ops.softmax(quantized)), atol=1e-5)

    # LiteRT gets the int8 kernels as dynamic-range weights: the same int8 values (LiteRT's
    # per-channel abs-max scale is Keras'), the fused qkv kernel among them.
    path = keras_vit.export.litert(model, str(tmp_path / "int8.tflite"))
    got = run_file(path, images)
    assert relative_error(got, quantized) < 0.03
    assert (got.argmax(-1) == quantized.argmax(-1)).mean() >= 0.95
    qkv = next(layer for layer in model._flatten_layers() if layer.path == "encoderblock_0/attention/qkv")
    assert any(np.array_equal(weights, to_numpy(qkv._kernel).T) for weights in _int8_constants(path))
    float_model = keras_vit.export.dequantized_copy(model)
    assert float_model.get_layer("head").quantization_mode is None
    np.testing.assert_allclose(
        to_numpy(float_model.get_layer("head").kernel),
        to_numpy(model.get_layer("head")._kernel) / to_numpy(model.get_layer("head").kernel_scale),
    )


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
    from keras_vit.layers.window_attention import cyclic_shift

    x = np.arange(2 * 4 * 6 * 3, dtype="float32").reshape(2, 4, 6, 3)
    np.testing.assert_array_equal(to_numpy(cyclic_shift(keras.ops.convert_to_tensor(x), shift)),
                                  np.roll(x, shift, axis=(1, 2)))

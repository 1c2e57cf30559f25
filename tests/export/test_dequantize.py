"""Keras int8 models (`model.quantize("int8")`), and their export from the int8 kernels (`dequantized_copy`)."""

import keras
import numpy as np
import pytest

import keras_vit.export
from keras_vit.layers import TransformerBlock
from keras_vit.models.swin import SwinTransformerBlock
from tests.export.helpers import build, forward, relative_error, run_file, smooth_images
from tests.testing import to_numpy

# `Model.quantize` warns once for every layer without weights to quantize.
pytestmark = pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")


def _block_denses(model):
    """Every Dense/EinsumDense inside the transformer blocks."""
    blocks = [layer for layer in model._flatten_layers(include_self=False)
              if isinstance(layer, (TransformerBlock, SwinTransformerBlock))]
    assert blocks
    return [layer for block in blocks for layer in block._flatten_layers(include_self=False)
            if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense))]


# Dense layers per block: qkv, out, fc1, fc2; GPSA: qk, v, out, pos_proj, fc1, fc2.
DENSES_PER_MODEL = {"vit": 2 * 4, "convit": 2 * 6 + 1 * 4, "swin": 4 * 4}


# Over 60 s on JAX for ConViT (about 64 s): two compiled predict steps of a model whose GPSA and
# self-attention blocks are all quantized; the int8 products differ between backends, so both run it.
@pytest.mark.parametrize("family", sorted(DENSES_PER_MODEL))
def test_keras_int8_quantizes_every_block_dense(family, tmp_path):
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
    if family != "convit":  # ConViT's file round trip, of its blocks alone, is the test below
        _assert_round_trip(model, images, quantized, tmp_path)


def _assert_round_trip(model, images, quantized, tmp_path):
    """The int8 model saves to `.keras` and loads with the same quantized layers and outputs, twice."""
    modes = [layer.quantization_mode for layer in model._flatten_layers(include_self=False)]
    for generation in range(2):  # a restored model saves again
        path = str(tmp_path / f"int8_{generation}.keras")
        model.save(path)
        model = keras.saving.load_model(path)
        assert [layer.quantization_mode for layer in model._flatten_layers(include_self=False)] == modes
        np.testing.assert_array_equal(forward(model, images), quantized)


# The whole-model round trip of ViT and Swin runs inside the test above, on the model it has
# quantized (it was a test of its own that built and quantized the model again, #38).
def test_int8_blocks_keras_file_round_trip(tmp_path):
    # ConViT's blocks hold both attentions (GPSA, then multi-head) and the MLP.
    model = build("convit")
    images = smooth_images(model, 4)
    denses = _block_denses(model)
    model.quantize("int8", filters=lambda layer: layer in denses)
    _assert_round_trip(model, images, forward(model, images), tmp_path)


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


def test_keras_int8_model_exports_to_saved_model_and_litert(tmp_path):
    import tensorflow as tf

    model = build("vit")
    images = np.round(smooth_images(model, 16))  # the SavedModel takes uint8 images
    model.quantize("int8")
    quantized = forward(model, images)

    keras_vit.export.saved_model(model, str(tmp_path / "saved_model"))
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

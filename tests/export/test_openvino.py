"""keras_vit.export.openvino: the IR files, their outputs against Keras', and bad input."""

import os

import keras
import numpy as np
import pytest

import keras_vit.export
from tests.export.helpers import BACKEND, FLOAT_ATOL, build, forward, relative_error, smooth_images

# OpenVINO reads the model through TensorFlow; under JAX the export is refused (last test).
tensorflow_only = pytest.mark.skipif(BACKEND != "tensorflow", reason="OpenVINO export needs Keras on TensorFlow")
# `Model.quantize` warns once for every layer without weights to quantize.
pytestmark = pytest.mark.filterwarnings("ignore:Layer .* does not have a `quantize` method")

# bfloat16 keeps 8 bits of mantissa: each product's inputs are rounded by up to 2^-9
# relative, and a few blocks compound that; 3% of the logits' spread bounds it here.
BF16_RELATIVE = 0.03


def export_and_run(model, tmp_path, images, precision="f32", **kwargs):
    path = keras_vit.export.openvino(model, str(tmp_path / "model.xml"), **kwargs)
    compiled = keras_vit.export.openvino_compiled(path, precision=precision)
    return path, compiled, keras_vit.export.openvino_predict(compiled, images)


@pytest.fixture(scope="module")
def vit_export(tmp_path_factory):
    """The testing ViT, its Keras outputs on 4 images, and its file with a free batch, exported
    once for the tests that read it (an export takes about 15 s on 2 cores)."""
    if BACKEND != "tensorflow":
        pytest.skip("OpenVINO export needs Keras on TensorFlow")
    folder = tmp_path_factory.mktemp("openvino_vit")
    model = build("vit")
    images = smooth_images(model, 4)
    path = keras_vit.export.openvino(model, str(folder / "model.xml"))
    return model, images, forward(model, images), path


@pytest.mark.parametrize("family", ["vit", "hybrid", "convit", "swin"])
@tensorflow_only
def test_float_model_computes_the_keras_outputs(family, tmp_path, request):
    if family == "vit":
        _, images, expected, path = request.getfixturevalue("vit_export")
        folder = os.path.dirname(path)
        got = keras_vit.export.openvino_predict(keras_vit.export.openvino_compiled(path, precision="f32"), images)
    else:
        model = build(family)
        images = smooth_images(model, 3)
        expected = forward(model, images)
        path, _, got = export_and_run(model, tmp_path, images)
        folder = str(tmp_path)
    assert np.abs(expected).max() > 0.01
    assert path == os.path.join(folder, "model.xml")
    assert sorted(os.listdir(folder)) == ["model.bin", "model.xml"]  # no temporary folder left
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=FLOAT_ATOL, rtol=0)


@tensorflow_only
def test_bfloat16_inference_stays_close_to_float(vit_export):
    _, images, expected, path = vit_export
    compiled = keras_vit.export.openvino_compiled(path, precision="bf16")
    got = keras_vit.export.openvino_predict(compiled, images)
    if keras_vit.export.openvino_precision(compiled) == "bf16":
        assert relative_error(got, expected) < BF16_RELATIVE
    else:  # a CPU without bf16 instructions: OpenVINO runs float32
        assert keras_vit.export.openvino_precision(compiled) == "f32"
        np.testing.assert_allclose(got, expected, atol=FLOAT_ATOL, rtol=0)


@tensorflow_only
def test_batch_size_is_free_unless_fixed(vit_export, tmp_path):
    model, images, expected, free = vit_export
    images, expected = images[:3], expected[:3]
    compiled = keras_vit.export.openvino_compiled(free, precision="f32")
    assert keras_vit.export.openvino_precision(compiled) == "f32"
    with pytest.raises(ValueError, match=r"non-empty batch .* Received: images of shape \(0, 32, 32, 3\)"):
        keras_vit.export.openvino_predict(compiled, images[:0])
    assert compiled.input(0).get_partial_shape()[0].is_dynamic
    for count in (1, 3):  # one compiled model, two batch sizes
        np.testing.assert_allclose(keras_vit.export.openvino_predict(compiled, images[:count]), expected[:count],
                                   atol=FLOAT_ATOL, rtol=0)
    # A fixed batch of 2 runs 3 images as 2 + (1 padded to 2).
    fixed = keras_vit.export.openvino(model, str(tmp_path / "fixed.xml"), batch_size=2)
    compiled = keras_vit.export.openvino_compiled(fixed, precision="f32", num_threads=1)
    assert list(compiled.input(0).get_shape()) == [2, 32, 32, 3]
    np.testing.assert_allclose(keras_vit.export.openvino_predict(compiled, images), expected, atol=FLOAT_ATOL, rtol=0)


# Forks of this process (`multiprocessing`, `os.fork`) since the module was imported.
_forks = []
os.register_at_fork(before=lambda: _forks.append(1))


@tensorflow_only
def test_an_export_in_the_test_run_forks_nothing(tmp_path):
    # OpenVINO's converter forks the process for each telemetry event (27 for this export)
    # unless it declines them, which it does under tests/conftest.py's `CI=true`: in a worker
    # grown to gigabytes the forks made these tests ten times slower. This fails if the
    # setting is dropped, or an OpenVINO release stops reading it.
    model = build("vit")
    before = len(_forks)
    keras_vit.export.openvino(model, str(tmp_path / "model.xml"))
    assert len(_forks) == before


@tensorflow_only
def test_keras_int8_model_exports_its_dequantized_weights(tmp_path):
    model = build("vit")
    images = smooth_images(model, 3)
    model.quantize("int8")
    # The file holds the int8 kernels as float32; activations are not quantized in it.
    expected = forward(keras_vit.export.dequantized_copy(model), images)
    _, _, got = export_and_run(model, tmp_path, images)
    np.testing.assert_allclose(got, expected, atol=FLOAT_ATOL, rtol=0)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda p: keras_vit.export.openvino(None, str(p / "model.onnx")),
         r"`path` must end in `.xml`. Received: path='.*model.onnx'"),
        (lambda p: keras_vit.export.openvino(None, str(p / "model.xml"), batch_size=0),
         r"`batch_size` must be a positive integer or None. Received: batch_size=0"),
        (lambda p: keras_vit.export.openvino_compiled(str(p / "model.xml"), precision="fp16"),
         r"`precision` must be one of \(None, 'f32', 'bf16', 'f16'\). Received: precision='fp16'"),
        (lambda p: keras_vit.export.openvino_compiled(str(p / "model.xml"), num_threads=0),
         r"`num_threads` must be a positive integer or None. Received: num_threads=0"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(call, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        call(tmp_path)
    assert os.listdir(tmp_path) == []


def _tiny_model():
    """A two-layer model: the file handling under test does not depend on the model, and it
    exports in a fraction of a ViT's time."""
    inputs = keras.Input((8, 8, 3))
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling2D()(inputs)))


def _write_old_pair(folder):
    (folder / "model.xml").write_text("old graph")
    (folder / "model.bin").write_bytes(b"old weights")


def _assert_old_pair_kept(folder):
    """The earlier export is there, unchanged, and nothing else (no temporary files)."""
    assert sorted(os.listdir(folder)) == ["model.bin", "model.xml"]
    assert (folder / "model.xml").read_text() == "old graph"
    assert (folder / "model.bin").read_bytes() == b"old weights"


@tensorflow_only
def test_a_failed_export_leaves_the_old_files_and_no_temporary_folder(tmp_path, monkeypatch):
    model = _tiny_model()
    _write_old_pair(tmp_path)

    def fail(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        keras_vit.export.openvino(model, str(tmp_path / "model.xml"))
    _assert_old_pair_kept(tmp_path)


@tensorflow_only
def test_a_failed_graph_rename_puts_the_old_weights_back(tmp_path, monkeypatch):
    # The .bin is renamed first; when the .xml's rename then fails, the old pair is restored.
    model = _tiny_model()
    _write_old_pair(tmp_path)
    replace = os.replace

    def fail_on_graph(source, target):
        if str(target).endswith(".xml"):
            raise OSError("disk full")
        replace(source, target)

    monkeypatch.setattr(os, "replace", fail_on_graph)
    with pytest.raises(OSError, match="disk full"):
        keras_vit.export.openvino(model, str(tmp_path / "model.xml"))
    _assert_old_pair_kept(tmp_path)


# On TensorFlow the same call exports (`test_float_model_computes_the_keras_outputs`); it ran that
# export a second time here until #38.
@pytest.mark.skipif(BACKEND != "jax", reason="the refusal of the JAX backend")
def test_jax_backend_is_refused_with_the_way_out(tmp_path):
    model = build("vit")
    with pytest.raises(ValueError, match=r"load it under KERAS_BACKEND=tensorflow .* Received: backend='jax'"):
        keras_vit.export.openvino(model, str(tmp_path / "model.xml"))
    assert os.listdir(tmp_path) == []

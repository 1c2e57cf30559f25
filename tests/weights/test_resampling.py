"""Position-embedding resampling in every mode, against the references the checkpoints' code uses.

`"bilinear"` and `"bicubic"` (with and without `antialias`) against
`torch.nn.functional.interpolate(..., align_corners=False)`; `"bilinear_scipy"`
against `scipy.ndimage.zoom(grid, zoom, order=1)` (the ViT authors' code). Each
at 1e-5, enlarging and shrinking, square and not, both for the float64 numpy
path of `load_weights` and for the in-graph path of models of dynamic image
size, whose sizes are symbolic (a TensorFlow graph with unknown sizes, a JAX
shape-polymorphic export).
"""

import keras
import numpy as np
import pytest
import scipy.ndimage

import keras_vit
from keras_vit.layers.position import INTERPOLATIONS, interpolation_matrix, resample_grid
from keras_vit.weights.position_embedding import resample_position_embedding
from runs.reference import torch
from tests.testing import to_numpy

TOLERANCE = 1e-5
RESIZES = [((7, 7), (12, 12)), ((12, 12), (5, 5)), ((6, 9), (11, 4)), ((14, 14), (24, 24)), ((5, 3), (2, 7))]
TORCH_MODES = [("bilinear", False), ("bilinear", True), ("bicubic", False), ("bicubic", True)]
ALL_MODES = TORCH_MODES + [("bilinear_scipy", False)]


def grid_of(size, seed=0):
    return np.random.default_rng(seed).normal(size=(*size, 5)).astype("float32")


def reference(grid, size, interpolation, antialias):
    """The checkpoints' own code: scipy's zoom or PyTorch's interpolate."""
    if interpolation == "bilinear_scipy":
        zoom = (size[0] / grid.shape[0], size[1] / grid.shape[1], 1)
        out = scipy.ndimage.zoom(grid, zoom, order=1)
        assert out.shape[:2] == tuple(size)
        return out
    tensor = torch.from_numpy(grid).permute(2, 0, 1)[None]
    out = torch.nn.functional.interpolate(
        tensor, size=size, mode=interpolation, align_corners=False, antialias=antialias
    )
    return out[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("interpolation,antialias", ALL_MODES)
@pytest.mark.parametrize("source,target", RESIZES)
def test_load_time_resampling_matches_the_reference(source, target, interpolation, antialias):
    grid = grid_of(source)
    ours = resample_position_embedding(grid, target, interpolation=interpolation, antialias=antialias)
    assert ours.dtype == np.float32 and ours.shape == (*target, 5)
    np.testing.assert_allclose(ours, reference(grid, target, interpolation, antialias), atol=TOLERANCE, rtol=0)


def test_the_modes_really_differ():
    # Otherwise the tests above could not tell the modes apart. Enlarging, only
    # antialiased bilinear is plain bilinear (its widened filter is the same
    # triangle); shrinking, it differs too.
    grid = grid_of((7, 7))
    results = [resample_position_embedding(grid, (12, 12), i, a) for i, a in ALL_MODES]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            same = {ALL_MODES[i], ALL_MODES[j]} == {("bilinear", False), ("bilinear", True)}
            assert (np.abs(results[i] - results[j]).max() < 1e-6) == same, (ALL_MODES[i], ALL_MODES[j])
    shrunk = [resample_position_embedding(grid, (4, 4), "bilinear", a) for a in (False, True)]
    assert np.abs(shrunk[0] - shrunk[1]).max() > 1e-2


@pytest.mark.parametrize("interpolation,antialias", ALL_MODES)
def test_same_size_is_the_identity(interpolation, antialias):
    np.testing.assert_array_equal(interpolation_matrix(6, 6, interpolation, antialias), np.eye(6))


def _symbolic_resample(grid, size, interpolation, antialias):
    """`resample_grid` with the new size unknown to Python while tracing."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        @tf.function(input_signature=[tf.TensorSpec(grid.shape), tf.TensorSpec((2,), tf.int32)])
        def resample(x, new_size):
            return resample_grid(x, (new_size[0], new_size[1]), interpolation, antialias)

        return resample(grid, np.array(size, "int32")).numpy()
    import jax
    from jax import export

    def resample(x, like):
        return resample_grid(x, like.shape, interpolation, antialias)

    shapes = (jax.ShapeDtypeStruct(grid.shape, "float32"), jax.ShapeDtypeStruct(export.symbolic_shape("(a, b)"), "float32"))
    exported = export.export(jax.jit(resample))(*shapes)
    return np.asarray(exported.call(grid, np.zeros(size, "float32")))


@pytest.mark.parametrize("interpolation,antialias", ALL_MODES)
@pytest.mark.parametrize("source,target", [((7, 7), (12, 12)), ((6, 9), (11, 4))])
def test_in_graph_resampling_of_symbolic_size_matches_the_reference(source, target, interpolation, antialias):
    grid = grid_of(source)
    ours = _symbolic_resample(grid, target, interpolation, antialias)
    np.testing.assert_allclose(ours, reference(grid, target, interpolation, antialias), atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("interpolation,antialias", [("bicubic", True), ("bilinear_scipy", False)])
def test_in_graph_resampling_of_static_size(interpolation, antialias):
    grid = grid_of((6, 9))
    ours = to_numpy(resample_grid(keras.ops.convert_to_tensor(grid), (11, 4), interpolation, antialias))
    np.testing.assert_allclose(ours, reference(grid, (11, 4), interpolation, antialias), atol=TOLERANCE, rtol=0)
    same = keras.ops.convert_to_tensor(grid)
    assert resample_grid(same, (6, 9), interpolation, antialias) is same  # nothing computed


def test_bad_modes_are_named():
    grid = grid_of((4, 4))
    with pytest.raises(ValueError, match=r"`interpolation` must be one of \('bilinear', 'bicubic', 'bilinear_scipy'\). Received: interpolation='nearest'"):
        resample_position_embedding(grid, (5, 5), interpolation="nearest")
    with pytest.raises(ValueError, match=r"`antialias=True` needs interpolation='bilinear' or 'bicubic'.*Received: interpolation='bilinear_scipy', antialias=True"):
        resample_position_embedding(grid, (5, 5), interpolation="bilinear_scipy", antialias=True)
    with pytest.raises(ValueError, match=r"`antialias` must be a bool. Received: antialias='yes'"):
        resample_position_embedding(grid, (5, 5), interpolation="bicubic", antialias="yes")
    with pytest.raises(ValueError, match=r"`new_grid_size` must be two positive integers. Received: new_grid_size=None"):
        resample_position_embedding(grid, None)
    assert INTERPOLATIONS == ("bilinear", "bicubic", "bilinear_scipy")


def test_load_weights_resamples_in_the_mode_asked(tmp_path):
    from tests.weights.checkpoints import TINY, official_npz_arrays, save_npz

    arrays = official_npz_arrays()
    path = save_npz(tmp_path / "vit.npz", arrays)
    grid = arrays["Transformer/posembed_input/pos_embedding"][0, 1:].reshape(4, 4, 32)
    model = keras_vit.VisionTransformer(**{**TINY, "image_size": (48, 64)}, preprocessing=None)
    keras_vit.load_weights(model, path, position_interpolation="bilinear_scipy")
    loaded = to_numpy(model.get_layer("patch_encoder").position_embedding)
    np.testing.assert_allclose(loaded, reference(grid, (6, 8), "bilinear_scipy", False), atol=TOLERANCE, rtol=0)
    with pytest.raises(ValueError, match=r"`position_interpolation` must be one of .* Received: position_interpolation='cubic'"):
        keras_vit.load_weights(model, path, position_interpolation="cubic")

"""Resizing as two matrix products, for graphs that every runtime can run.

`tf.image.resize` with antialiasing is TensorFlow's `ScaleAndTranslate` op, which
LiteRT has no builtin kernel for and OpenVINO does not read; JAX's resize needs
its sizes when it traces. A resize is linear and separable, though: each output
row is a weighted sum of input rows, and each output column of input columns.
`resize_matrix` builds those weights from the input and output lengths (Python
ints, or tensors on TensorFlow for sizes known only at run time), and `resize`
applies them with two `einsum`s: matrix products, which every converter and
runtime has. The weights are those of the TensorFlow ops `tf.image.resize`
runs, so the result is `tf.image.resize`'s to float32 rounding:

- antialiased bilinear and bicubic (`ScaleAndTranslate`): the triangle and
  Keys' cubic kernel (a = -0.5), widened by the downscaling factor and
  normalised over the taps inside the image;
- plain bilinear (`ResizeBilinear`, half-pixel centres): the triangle at unit
  width, which at the borders repeats the edge pixel, as the op's clamped
  indices do;
- plain bicubic (`ResizeBicubic`, half-pixel centres, Keys' a = -0.5): the
  cubic at unit width, normalised over the taps inside the image as the op
  does, at the op's sample positions: it reads its weights from a table of
  1024 steps per pixel, so the fraction of each position is rounded to 1/1024;
- nearest (`ResizeNearestNeighbor`, half-pixel centres): one input pixel per
  output pixel, at `floor((i + 0.5) * input / output)`.

Two costs of the dense form. Precision: the products must run in float32. On JAX
they are asked for at full precision; TensorFlow on an Ampere or newer GPU runs
float32 matrix products in TensorFloat-32 unless
`tf.config.experimental.enable_tensor_float_32_execution(False)`, and a TPU in
bfloat16 passes, which moves pixels by tenths of a grey level (and the rounding to
uint8 of many). Work: about `out_h * H * W * C` multiply-adds, every input pixel
weighted for every output row, where the sparse ops touch only the taps: 10 billion
for a 4,000 x 3,000 photograph resized to 256 px (ViT-B/16's forward pass is 17.6
billion), 0.24 billion for a 640 x 480 one. Shrink very large images beforehand
where that matters.
"""

import keras

from keras_vit.preprocessing.checkpoints import INTERPOLATIONS

MATRIX_INTERPOLATIONS = ("bicubic", "bilinear", "nearest")
"""The interpolations `resize_matrix` builds ("area" is TensorFlow's `ResizeArea` only)."""

_KEYS_A = -0.5  # Keys' cubic as TensorFlow's kernels and PIL use it


def _triangle(x):
    return keras.ops.maximum(1.0 - keras.ops.abs(x), 0.0)


def _keys_cubic(x):
    x = keras.ops.abs(x)
    a = _KEYS_A
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    outer = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return keras.ops.where(x < 1.0, inner, keras.ops.where(x < 2.0, outer, 0.0))


def _check_interpolation(interpolation):
    if interpolation not in MATRIX_INTERPOLATIONS:
        raise ValueError(
            f"`interpolation` must be one of {MATRIX_INTERPOLATIONS} for a resize by matrix products "
            f"(of {INTERPOLATIONS}, 'area' is TensorFlow's ResizeArea op only). "
            f"Received: interpolation={interpolation!r}"
        )


def resize_matrix(input_size, output_size, interpolation="bicubic", antialias=True):
    """The `(output_size, input_size)` float32 weights of a resize along one axis.

    Args:
        input_size: int, or an int scalar tensor (TensorFlow, a size known at
            run time only).
        output_size: int or int scalar tensor, likewise.
        interpolation: str. `"bicubic"`, `"bilinear"` or `"nearest"`.
            Defaults to `"bicubic"`.
        antialias: bool. Widen the kernel by the downscaling factor, as
            `tf.image.resize(..., antialias=True)` and PIL do. Ignored for
            `"nearest"`. Defaults to True.

    Returns:
        float32 tensor `(output_size, input_size)`; `matrix @ x` resizes `x`
        along its first axis as `tf.image.resize` does.

    Raises:
        ValueError: for another interpolation.
    """
    _check_interpolation(interpolation)
    scale = keras.ops.cast(input_size, "float32") / keras.ops.cast(output_size, "float32")
    # Input pixel i covers [i, i + 1); output pixel o samples the input at (o + 0.5) * scale.
    samples = (keras.ops.cast(keras.ops.arange(output_size), "float32") + 0.5) * scale
    centres = keras.ops.cast(keras.ops.arange(input_size), "float32") + 0.5
    if interpolation == "nearest":
        index = keras.ops.minimum(keras.ops.floor(samples), keras.ops.cast(input_size, "float32") - 1.0)
        return keras.ops.cast(keras.ops.equal(index[:, None], centres[None, :] - 0.5), "float32")
    kernel = _keys_cubic if interpolation == "bicubic" else _triangle
    if interpolation == "bicubic" and not antialias:
        # ResizeBicubic's weight table: the offset from the pixel to the left, to 1/1024.
        left = keras.ops.floor(samples - 0.5)
        samples = left + keras.ops.round((samples - 0.5 - left) * 1024.0) / 1024.0 + 0.5
    width = keras.ops.maximum(scale, 1.0) if antialias else 1.0
    weights = kernel((centres[None, :] - samples[:, None]) / width)
    # Normalised over the taps inside the image, as ScaleAndTranslate and ResizeBicubic do;
    # for the plain triangle this is ResizeBilinear's clamped edge.
    return weights / keras.ops.sum(weights, axis=1, keepdims=True)


def resize(images, size, interpolation="bicubic", antialias=True):
    """Resizes a batch `(batch, height, width, channels)` to `size` by two matrix products.

    Args:
        images: float tensor `(batch, height, width, channels)`; height and
            width may be unknown until run time on TensorFlow.
        size: `(height, width)`: ints, or int scalar tensors on TensorFlow.
        interpolation: str. `"bicubic"`, `"bilinear"` or `"nearest"`.
            Defaults to `"bicubic"`.
        antialias: bool. As in `tf.image.resize`. Defaults to True.

    Returns:
        float32 tensor `(batch, size[0], size[1], channels)`: `tf.image.resize`'s
        result to float32 rounding.
    """
    images = keras.ops.cast(images, "float32")
    shape = keras.ops.shape(images)
    rows = resize_matrix(shape[1], size[0], interpolation, antialias)
    columns = resize_matrix(shape[2], size[1], interpolation, antialias)
    if keras.backend.backend() == "jax":
        # Full float32 products: JAX's default on a GPU or TPU rounds their inputs (TF32, bfloat16).
        import jax

        def einsum(*args):
            return jax.numpy.einsum(*args, precision=jax.lax.Precision.HIGHEST)
    else:
        einsum = keras.ops.einsum
    images = einsum("oh,bhwc->bowc", rows, images)
    return einsum("pw,bowc->bopc", columns, images)

"""RandAugment's geometric operations as PIL's `Image.transform`, on one uint8 image.

Rotation, shear and translation are affine transforms resampled as PIL
resamples them (pixel centres at +0.5, the a = -1 cubic of its affine filter,
truncation to uint8, the fill colour outside the image), by our own sampling:
TensorFlow's `ImageProjectiveTransformV3` has no bicubic mode.
"""

import math
import numbers

import tensorflow as tf

# timm's `img_mean` for RandAugment: ImageNet's mean colour, min(255, round(255 * m)).
DEFAULT_FILL = (124, 116, 104)
# The resampling filters of PIL's `Image.transform`.
INTERPOLATIONS = ("bicubic", "bilinear", "nearest")


def float64(value):
    """A Python float straight to float64 (tf.cast would round it through float32 first)."""
    return tf.cast(tf.convert_to_tensor(value, dtype_hint=tf.float64), tf.float64)


def check_fill(fill):
    """Returns `fill` as 3 ints in [0, 255], or raises a ValueError."""
    try:
        values = tuple(fill)
    except TypeError:
        values = ()
    if len(values) != 3 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v <= 255 for v in values):
        raise ValueError(f"`fill` must be 3 integers in [0, 255] (an RGB colour). Received: fill={fill!r}")
    return tuple(int(v) for v in values)


def check_interpolation(interpolation):
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"`interpolation` must be one of {INTERPOLATIONS} (PIL's transform filters). "
                         f"Received: interpolation={interpolation!r}")


# Geometric operations: PIL's `Image.transform(size, AFFINE, matrix)`, output pixel
# (x, y) read at (a0 (x + 0.5) + a1 (y + 0.5) + a2, a3 (x + 0.5) + a4 (y + 0.5) + a5).

# The filters run in float64, as PIL's: in float32, 1-2% of the pixels of a
# translation come out one grey level off (PIL truncates, and many filtered values
# are integers up to rounding).
_SAMPLING_DTYPE = tf.float64


def _linear(v1, v2, d):
    return v1 + (v2 - v1) * d


def _cubic(v1, v2, v3, v4, d):
    # PIL's affine bicubic (a = -1), in its order of operations.
    p3 = 2.0 * (v1 - v2) + v3 - v4
    p4 = (v2 - v1) - v3 + v4
    return v2 + d * ((v3 - v1) + d * (p3 + d * p4))


def _nearest_positions(a0, a1, a2, a3, a4, a5, x_in, y_in, height, width):
    # PIL reads a pure scaling or translation at the floor of the float position,
    # and any other matrix in 16.16 fixed point (its `affine_fixed`, used for
    # images under 32768 pixels a side).
    def fixed(value):
        return tf.cast(tf.floor(value * 65536.0 + 0.5), tf.int64)

    xs = tf.range(tf.cast(width, tf.int64))[None, :]
    ys = tf.range(tf.cast(height, tf.int64))[:, None]
    x_fixed = (fixed(a2 + a0 * 0.5 + a1 * 0.5) + ys * fixed(a1) + xs * fixed(a0)) // 65536
    y_fixed = (fixed(a5 + a3 * 0.5 + a4 * 0.5) + ys * fixed(a4) + xs * fixed(a3)) // 65536
    scaling = (a1 == 0.0) & (a3 == 0.0)
    x_index = tf.where(scaling, tf.cast(tf.floor(tf.clip_by_value(x_in, -1.0, tf.cast(width, tf.float64))), tf.int64),
                       tf.clip_by_value(x_fixed, -1, tf.cast(width, tf.int64)))
    y_index = tf.where(scaling, tf.cast(tf.floor(tf.clip_by_value(y_in, -1.0, tf.cast(height, tf.float64))), tf.int64),
                       tf.clip_by_value(y_fixed, -1, tf.cast(height, tf.int64)))
    return tf.cast(x_index, tf.int32), tf.cast(y_index, tf.int32)


def _filter_start(position, size, exact):
    """The first source index a filter reads along one axis, and the fraction past it (None when `exact`).

    `exact`: positions known to be pixel centres, where the filter returns its
    centre tap unchanged; then only that tap is read.
    """
    start = tf.floor(position - 0.5)
    fraction = None if exact else tf.cast(position - 0.5 - start, _SAMPLING_DTYPE)
    # Positions outside the image are filled, so any index in the padded image will do for them.
    start = tf.cast(tf.clip_by_value(start, -1.0, tf.cast(size, tf.float64) - 1.0), tf.int32)
    if fraction is not None:
        # Broadcast once: TensorFlow's elementwise kernels are slow when broadcasting.
        fraction = tf.broadcast_to(fraction[..., None], tf.concat([tf.shape(fraction), [3]], 0))
    return start, fraction


def _source_pixels(image, fill):
    """The pixels the filters read, flattened: the image with 2 edge pixels repeated on each side
    (the taps beyond the border, as PIL clips them), then 4 rows of the fill colour, where
    the positions outside the image read, so that their filters return the fill exactly."""
    image = tf.concat([image[:1], image[:1], image, image[-1:], image[-1:]], axis=0)
    image = tf.concat([image[:, :1], image[:, :1], image, image[:, -1:], image[:, -1:]], axis=1)
    fill = tf.broadcast_to(tf.cast(fill, tf.uint8), tf.stack([4, tf.shape(image)[1], 3]))
    return tf.reshape(tf.concat([image, fill], axis=0), [-1, 3])


def affine_transform(image, matrix, fill=DEFAULT_FILL, interpolation="bicubic"):
    """PIL's `image.transform(image.size, Image.AFFINE, matrix, resample, fillcolor=fill)`.

    Output pixel (x, y) reads the source at (a0 (x + 0.5) + a1 (y + 0.5) + a2,
    a3 (x + 0.5) + a4 (y + 0.5) + a5), in pixel units with pixel centres at
    +0.5; positions outside the image take `fill`, and the filter's taps beyond
    the border repeat the edge pixels, as PIL's do.

    Args:
        image: uint8 tensor `(H, W, 3)`.
        matrix: 6 floats or float64 scalars `(a0, ..., a5)`.
        fill: 3 ints, or a uint8 tensor `(3,)`. Colour outside the source image. Defaults to `DEFAULT_FILL`.
        interpolation: str. One of `INTERPOLATIONS`. Defaults to `"bicubic"`.

    Returns:
        uint8 tensor `(H, W, 3)`.
    """
    # Shears and translations along one axis keep the other at pixel centres:
    # sampling along the moving axis only gives the same pixels for 1/4 of the work.
    columns_exact = all(isinstance(a, (int, float)) for a in matrix[:3]) and tuple(matrix[:3]) == (1, 0, 0)
    rows_exact = all(isinstance(a, (int, float)) for a in matrix[3:]) and tuple(matrix[3:]) == (0, 1, 0)
    a0, a1, a2, a3, a4, a5 = [float64(a) for a in matrix]
    height, width = tf.shape(image)[0], tf.shape(image)[1]
    xs = tf.cast(tf.range(width), tf.float64)[None, :] + 0.5
    ys = tf.cast(tf.range(height), tf.float64)[:, None] + 0.5
    x_in = a0 * xs + a1 * ys + a2
    y_in = a3 * xs + a4 * ys + a5
    pixels = _source_pixels(image, fill)
    padded_width = width + 4
    outside_index = (height + 4) * padded_width
    if interpolation == "nearest":
        cols, rows = _nearest_positions(a0, a1, a2, a3, a4, a5, x_in, y_in, height, width)
        outside = (cols < 0) | (cols >= width) | (rows < 0) | (rows >= height)
        first, dx, dy, taps = (rows + 2) * padded_width + cols + 2, None, None, 1
    else:
        outside = (x_in < 0.0) | (x_in >= tf.cast(width, tf.float64)) | (y_in < 0.0) | (
            y_in >= tf.cast(height, tf.float64))
        taps = 4 if interpolation == "bicubic" else 2
        col, dx = _filter_start(x_in, width, columns_exact)
        row, dy = _filter_start(y_in, height, rows_exact)
        # The taps run from start - 1 (bicubic) to start + 2, inside the padding.
        first = (row + 2 - (taps // 2 - 1)) * padded_width + col + 2 - (taps // 2 - 1)
    # Integer arithmetic rather than tf.where, which is slow on CPU.
    first += (outside_index - first) * tf.cast(outside, tf.int32)
    centre = 1 if taps == 4 else 0
    col_taps = [centre] if dx is None else range(taps)
    row_taps = [centre] if dy is None else range(taps)
    interpolate = _cubic if taps == 4 else _linear
    sampled = []
    for i in row_taps:
        values = [tf.gather(pixels, first + (i * padded_width + j)) for j in col_taps]
        if dx is not None:
            values = [interpolate(*[tf.cast(v, _SAMPLING_DTYPE) for v in values], dx)]
        sampled.append(values[0])
    if dy is None:
        return _to_uint8(sampled[0])
    return _to_uint8(interpolate(*[tf.cast(v, _SAMPLING_DTYPE) for v in sampled], dy))


def _to_uint8(values):
    if values.dtype == tf.uint8:
        return values
    return tf.cast(tf.clip_by_value(values, 0.0, 255.0), tf.uint8)  # truncates, as PIL's cast


def _size(image):
    return tf.shape(image)[0], tf.shape(image)[1]


# Each operation's affine matrix, from its argument and the image's height and width.
# Python numbers in a matrix are known exactly, which `affine_transform` uses.

def rotation_matrix(degrees, height, width):
    """PIL's `rotate` matrix: counter-clockwise by `degrees` about the image's centre."""
    angle = -(tf.math.floormod(float64(degrees), 360.0) * (math.pi / 180.0))
    # PIL rounds to 15 decimals, making quarter turns exact.
    cos, sin = [tf.round(v * 1e15) / 1e15 for v in (tf.cos(angle), tf.sin(angle))]
    center_x = tf.cast(width, tf.float64) / 2.0
    center_y = tf.cast(height, tf.float64) / 2.0
    offset_x = cos * -center_x + sin * -center_y + 0.0 + center_x
    offset_y = -sin * -center_x + cos * -center_y + 0.0 + center_y
    return (cos, sin, offset_x, -sin, cos, offset_y)


def shear_x_matrix(factor, height, width):
    return (1.0, factor, 0.0, 0.0, 1.0, 0.0)


def shear_y_matrix(factor, height, width):
    return (1.0, 0.0, 0.0, factor, 1.0, 0.0)


def translate_x_matrix(fraction, height, width):
    return (1.0, 0.0, float64(fraction) * tf.cast(width, tf.float64), 0.0, 1.0, 0.0)


def translate_y_matrix(fraction, height, width):
    return (1.0, 0.0, 0.0, 0.0, 1.0, float64(fraction) * tf.cast(height, tf.float64))


def rotate(image, degrees, fill=DEFAULT_FILL, interpolation="bicubic"):
    """PIL's `image.rotate(degrees, resample, fillcolor=fill)`: counter-clockwise about the centre, same size."""
    return affine_transform(image, rotation_matrix(degrees, *_size(image)), fill, interpolation)


def shear_x(image, factor, fill=DEFAULT_FILL, interpolation="bicubic"):
    """timm's `shear_x`: the affine matrix (1, factor, 0, 0, 1, 0)."""
    return affine_transform(image, shear_x_matrix(factor, *_size(image)), fill, interpolation)


def shear_y(image, factor, fill=DEFAULT_FILL, interpolation="bicubic"):
    """timm's `shear_y`: the affine matrix (1, 0, 0, factor, 1, 0)."""
    return affine_transform(image, shear_y_matrix(factor, *_size(image)), fill, interpolation)


def translate_x_relative(image, fraction, fill=DEFAULT_FILL, interpolation="bicubic"):
    """timm's `translate_x_rel`: the content moves left by `fraction` of the width (right if negative)."""
    return affine_transform(image, translate_x_matrix(fraction, *_size(image)), fill, interpolation)


def translate_y_relative(image, fraction, fill=DEFAULT_FILL, interpolation="bicubic"):
    """timm's `translate_y_rel`: the content moves up by `fraction` of the height (down if negative)."""
    return affine_transform(image, translate_y_matrix(fraction, *_size(image)), fill, interpolation)


# The matrix of each geometric operation.
AFFINE_MATRICES = {
    rotate: rotation_matrix,
    shear_x: shear_x_matrix,
    shear_y: shear_y_matrix,
    translate_x_relative: translate_x_matrix,
    translate_y_relative: translate_y_matrix,
}

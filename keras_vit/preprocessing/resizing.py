"""Resizing as the reference pipelines resize: PIL's antialiased filters, or TensorFlow's plain ones.

timm and the DeiT, ConViT and Swin code resize PIL images: a filter whose support
widens with the downscaling factor (antialiasing) and a result rounded to uint8.
`tf.image.resize(..., antialias=True)` uses the same kernels (Keys' cubic with
a = -0.5, the triangle, the box), so resizing in float32 and rounding as PIL
rounds gives PIL's pixels within a fraction of a grey level. vit_jax and
big_vision resize with `tf.image.resize` and no antialiasing, in float.
"""

import numbers

import tensorflow as tf

from keras_vit.preprocessing.checkpoints import INTERPOLATIONS, check_interpolation  # noqa: F401


def resize(image, size, interpolation="bicubic", antialias=True, round_to_uint8=True):
    """Resizes one image `(H, W, C)` or a batch `(B, H, W, C)` to `size`.

    Args:
        image: uint8 or float tensor, values in [0, 255].
        size: `(height, width)`, ints or int tensors.
        interpolation: str. One of `INTERPOLATIONS`. Defaults to `"bicubic"`.
        antialias: bool. Widen the filter when downscaling, as PIL does. Defaults to True.
        round_to_uint8: bool. Round to integers and clip to [0, 255], as PIL's uint8
            result is; False keeps the float result (vit_jax, big_vision). Defaults to True.

    Returns:
        float32 tensor of the new size, in [0, 255] when rounded.
    """
    check_interpolation(interpolation)
    _check_size(size)
    method = {"bicubic": "bicubic", "bilinear": "bilinear", "nearest": "nearest", "area": "area"}[interpolation]
    resized = tf.image.resize(tf.cast(image, tf.float32), size, method=method,
                              antialias=antialias and interpolation != "nearest")
    if round_to_uint8:
        # PIL rounds half up (fixed-point filters, then + 0.5 and truncation).
        resized = tf.clip_by_value(tf.floor(resized + 0.5), 0.0, 255.0)
    return resized


def _check_size(size):
    """Raises a ValueError unless `size` is two positive sides (static ones checked here).

    Without it, a zero side reaches TensorFlow's `ScaleAndTranslate` kernel, whose
    InvalidArgumentError names neither the argument nor the value.
    """
    if isinstance(size, tf.Tensor) and size.shape.rank is not None:
        if size.shape.rank != 1 or size.shape[0] not in (None, 2):
            raise ValueError(f"`size` must be (height, width). Received: size={size!r}")
        return  # a tensor's values are known only when it runs
    try:
        sides = list(size)
    except TypeError:
        sides = None
    if sides is None or len(sides) != 2:
        raise ValueError(f"`size` must be (height, width), two positive integers. Received: size={size!r}")
    for side in sides:
        if isinstance(side, tf.Tensor):
            continue
        if isinstance(side, bool) or not isinstance(side, numbers.Integral) or side <= 0:
            raise ValueError(f"`size` must be (height, width), two positive integers. Received: size={size!r}")


def shorter_side_size(height, width, shorter):
    """The size that makes the shorter side `shorter`, keeping the aspect as torchvision's `Resize(int)`.

    The longer side is truncated, not rounded: `int(shorter * long / short)`.
    """
    height = tf.cast(height, tf.int64)
    width = tf.cast(width, tf.int64)
    shorter = tf.cast(shorter, tf.int64)
    long_side = (shorter * tf.maximum(height, width)) // tf.minimum(height, width)
    size = tf.where(height <= width, tf.stack([shorter, long_side]), tf.stack([long_side, shorter]))
    return tf.cast(size, tf.int32)


def center_crop(image, size):
    """Crops the centre `(height, width)` of `(H, W, C)`, with torchvision's offsets `round((H - h) / 2)`."""
    shape = tf.shape(image)
    height, width = size
    # Python's round() halves to even; torchvision's int(round(x / 2.0)) on an integer
    # difference d is d // 2 rounded half to even, i.e. (d + 1) // 2 when d % 4 == 3.
    top = tf.cast(tf.round(tf.cast(shape[-3] - height, tf.float32) / 2.0), tf.int32)
    left = tf.cast(tf.round(tf.cast(shape[-2] - width, tf.float32) / 2.0), tf.int32)
    return image[..., top:top + height, left:left + width, :]

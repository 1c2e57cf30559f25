"""Random crops and flips of one training image, from stateless seeds.

Three crops: the random resized crop of DeiT, ConViT and Swin (timm's
`RandomResizedCropAndInterpolation`, itself Inception's crop as torchvision
draws it: Szegedy et al. 2015, Sec. 6), ViT's own inception crop (TensorFlow's
`sample_distorted_bounding_box`, as vit_jax and big_vision crop), and the padded
crop of small images (ResNet's CIFAR-10 recipe: He et al. 2016, Sec. 4.2). Every random
draw is a function of the `seed` argument, an int32 tensor of shape (2,), so
the same seed gives the same crop in any process, before or after a restart,
and the functions trace inside `tf.data.Dataset.map` with unknown image sizes.
"""

import math

import tensorflow as tf

from keras_vit.layers.validation import to_pair
from keras_vit.preprocessing.resizing import check_interpolation, resize

# timm (and torchvision) try this many random boxes before falling back to a centre crop.
CROP_ATTEMPTS = 10


def as_seed(seed):
    """`seed` as an int32 tensor of shape (2,).

    The stateless ops give other numbers for the same values as int32 and as
    int64, so every function here casts first: `[1, 2]` means one thing.
    """
    return tf.cast(tf.convert_to_tensor(seed), tf.int32)


def check_fraction_range(value, name):
    """Returns `value` as a float pair `(low, high)` with `0 < low <= high <= 1`: a range of area fractions."""
    try:
        pair = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2 or not 0.0 < pair[0] <= pair[1] <= 1.0:
        raise ValueError(
            f"`{name}` must be a pair (low, high) of area fractions with 0 < low <= high <= 1. "
            f"Received: {name}={value!r}"
        )
    return pair


def check_ratio(ratio):
    """Returns `ratio` as a float pair `(lo, hi)` of aspects (width / height) with `0 < lo <= hi`."""
    try:
        pair = tuple(float(v) for v in ratio)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2 or not 0 < pair[0] <= pair[1] or not math.isfinite(pair[1]):
        raise ValueError(
            "`ratio` must be a pair (low, high) of aspect ratios (width / height) with 0 < low <= high. "
            f"Received: ratio={ratio!r}"
        )
    return pair


def random_resized_crop_box(height, width, seed, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """The box of a random resized crop, drawn as timm's `get_params` draws it.

    Ten candidate boxes are drawn at once: an area `uniform(scale) * H * W` and an
    aspect `exp(uniform(log ratio))`, giving width `round(sqrt(area * aspect))` and
    height `round(sqrt(area / aspect))` (rounded half to even, as Python's
    `round`). The first candidate that fits in the image is placed at uniform
    integer offsets; timm tries the same candidates one after another and stops at
    that one, so the boxes have the same distribution. When none fits, the box is
    the largest centred one whose aspect is clamped into `ratio`. The arithmetic is
    in float64, as Python's.

    Args:
        height: int or int tensor. Image height.
        width: int or int tensor. Image width.
        seed: int tensor of shape (2,).
        scale: pair of floats. Range of the area fraction. Defaults to (0.08, 1.0).
        ratio: pair of floats. Range of the aspect (width / height). Defaults to (3/4, 4/3).

    Returns:
        int32 tensor `(top, left, crop_height, crop_width)`.
    """
    scale = check_fraction_range(scale, "scale")
    ratio = check_ratio(ratio)
    seeds = tf.random.experimental.stateless_split(as_seed(seed), 4)
    height = tf.cast(height, tf.float64)
    width = tf.cast(width, tf.float64)

    fractions = tf.random.stateless_uniform((CROP_ATTEMPTS,), seeds[0], scale[0], scale[1], tf.float64)
    log_aspects = tf.random.stateless_uniform(
        (CROP_ATTEMPTS,), seeds[1], math.log(ratio[0]), math.log(ratio[1]), tf.float64)
    areas = fractions * height * width
    aspects = tf.exp(log_aspects)
    widths = tf.round(tf.sqrt(areas * aspects))
    heights = tf.round(tf.sqrt(areas / aspects))
    fits = (widths <= width) & (heights <= height)
    first = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)  # 0 when none fits

    # The centred fallback: the whole image, cut to the nearest accepted aspect.
    image_aspect = width / height
    too_narrow = image_aspect < ratio[0]
    too_wide = image_aspect > ratio[1]
    fallback_width = tf.where(too_wide, tf.round(height * ratio[1]), width)
    fallback_height = tf.where(too_narrow, tf.round(width / ratio[0]), height)

    found = tf.reduce_any(fits)
    crop_height = tf.cast(tf.where(found, heights[first], fallback_height), tf.int32)
    crop_width = tf.cast(tf.where(found, widths[first], fallback_width), tf.int32)
    height = tf.cast(height, tf.int32)
    width = tf.cast(width, tf.int32)
    # Offsets uniform over [0, H - h] inclusive, as `random.randint`; the maximum
    # keeps the (unused) draw valid when no candidate fits.
    top = tf.random.stateless_uniform((), seeds[2], 0, tf.maximum(height - crop_height + 1, 1), tf.int32)
    left = tf.random.stateless_uniform((), seeds[3], 0, tf.maximum(width - crop_width + 1, 1), tf.int32)
    top = tf.where(found, top, (height - crop_height) // 2)
    left = tf.where(found, left, (width - crop_width) // 2)
    return tf.stack([top, left, crop_height, crop_width])


def resized_crop(image, box, size, interpolation="bicubic"):
    """Crops `box` out of one image `(H, W, C)` and resizes it as PIL does (antialiased, rounded).

    Args:
        image: uint8 or float tensor `(H, W, C)`, values in [0, 255].
        box: int tensor `(top, left, crop_height, crop_width)`.
        size: int or pair of ints. Output `(height, width)`.
        interpolation: str. One of `resizing.INTERPOLATIONS`. Defaults to `"bicubic"`.

    Returns:
        float32 tensor `(height, width, C)` of integer values in [0, 255].
    """
    size = to_pair(size, "size")
    check_interpolation(interpolation)
    box = tf.cast(box, tf.int32)
    crop = image[box[0]:box[0] + box[2], box[1]:box[1] + box[3]]
    return resize(crop, size, interpolation, antialias=True, round_to_uint8=True)


def random_resized_crop(image, seed, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation="bicubic"):
    """Random resized crop of DeiT, ConViT and Swin (timm's `RandomResizedCropAndInterpolation`).

    A box of 8-100% of the area and 3/4-4/3 aspect (by default), drawn by
    `random_resized_crop_box`, resized to `size` with PIL's antialiased filter
    and PIL's rounding (`resizing.resize`).

    Args:
        image: uint8 or float tensor `(H, W, C)`, values in [0, 255].
        seed: int tensor of shape (2,).
        size: int or pair of ints. Output `(height, width)`.
        scale: pair of floats in (0, 1]. Range of the area fraction. Defaults to (0.08, 1.0).
        ratio: pair of floats. Range of the aspect (width / height). Defaults to (3/4, 4/3).
        interpolation: str. One of `resizing.INTERPOLATIONS`. Defaults to `"bicubic"`.

    Returns:
        float32 tensor `(height, width, C)` of integer values in [0, 255].
    """
    size = to_pair(size, "size")
    check_interpolation(interpolation)
    shape = tf.shape(image)
    box = random_resized_crop_box(shape[0], shape[1], seed, scale, ratio)
    return resized_crop(image, box, size, interpolation)


def inception_crop(image, seed, size, area=(0.05, 1.0), ratio=(0.75, 1.33)):
    """ViT's inception crop: 5-100% of the area, 3/4-4/3 aspect, bilinear resize without antialiasing.

    TensorFlow's `stateless_sample_distorted_bounding_box` draws the box (as
    vit_jax and big_vision's `inception_crop`); the crop is resized by
    `tf.image.resize` in float, not rounded, as ViT's input pipelines resize.

    Args:
        image: uint8 or float tensor `(H, W, C)`, values in [0, 255].
        seed: int tensor of shape (2,).
        size: int or pair of ints. Output `(height, width)`.
        area: pair of floats in (0, 1]. Range of the area fraction. Defaults to (0.05, 1.0).
        ratio: pair of floats. Range of the aspect (width / height). Defaults to
            (0.75, 1.33), TensorFlow's default, which vit_jax keeps.

    Returns:
        float32 tensor `(height, width, C)` in [0, 255].
    """
    size = to_pair(size, "size")
    area = check_fraction_range(area, "area")
    ratio = check_ratio(ratio)
    # min_object_covered=0, as vit_jax and big_vision pass it: TensorFlow's default
    # (0.1) would keep every crop above 10% of the area.
    begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image), tf.zeros((0, 0, 4)), seed=as_seed(seed), area_range=area,
        aspect_ratio_range=ratio, min_object_covered=0.0, use_image_if_no_bounding_boxes=True,
    )
    channels = image.shape[-1]
    image = tf.slice(image, begin, crop_size)
    image.set_shape((None, None, channels))  # the slice loses the static channel count
    return tf.image.resize(image, size)


def check_padding(padding):
    """Returns `padding` as an int >= 0: the pixels added on each side before a padded crop."""
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"`padding` must be an integer >= 0 (pixels on each side). Received: padding={padding!r}")
    return padding


def padded_crop(image, seed, size, padding=4):
    """The image resized to `size`, zero-padded by `padding` pixels on each side, then a random `size` crop.

    ResNet's CIFAR-10 augmentation (He et al. 2016, Sec. 4.2: "4 pixels are padded on
    each side, and a 32x32 crop is randomly sampled from the padded image"): a random
    shift of up to `padding` pixels each way, uniform over the `(2 padding + 1)^2`
    offsets, the uncovered border black. The resize is `tf.image.resize`'s bilinear
    one in float, as the plain `"resize"` of the small presets.

    Args:
        image: uint8 or float tensor `(H, W, C)`, values in [0, 255].
        seed: int tensor of shape (2,).
        size: int or pair of ints. Output `(height, width)`.
        padding: int >= 0. Pixels added on each side. Defaults to 4.

    Returns:
        float32 tensor `(height, width, C)` in [0, 255].
    """
    size = to_pair(size, "size")
    padding = check_padding(padding)
    image = tf.image.resize(tf.cast(image, tf.float32), size)
    if not padding:
        return image
    image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
    top_left = tf.random.stateless_uniform((2,), as_seed(seed), minval=0, maxval=2 * padding + 1, dtype=tf.int32)
    return tf.slice(image, tf.concat([top_left, [0]], 0), [size[0], size[1], image.shape[-1]])


def random_flip(image, seed):
    """Mirrors one image `(H, W, C)` left to right with probability 0.5."""
    return tf.image.stateless_random_flip_left_right(image, seed=as_seed(seed))

"""Random erasing of one training image (Zhong et al. 2020, Alg. 1), as DeiT, ConViT and Swin ran it.

Their reference code uses timm's `RandomErasing` after normalisation: a box of
2-33% of the area and aspect in (0.3, 1/0.3) is replaced by standard normal
noise in the normalised tensor. Our models take [0, 255] pixels and normalise
inside, so the same noise is written here in pixel units: a normalised value
`z` is the pixel `(mean + std * z) * 255`. The values are not clipped to
[0, 255], as timm's normalised noise is not bounded either.
"""

import math
import numbers

import tensorflow as tf

from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD
from keras_vit.preprocessing.cropping import (
    CROP_ATTEMPTS,
    as_seed,
    check_fraction_range,
)

# "pixel": noise per pixel and channel; "rand": one noise value per channel for
# the whole box; "const": the normalised value 0, i.e. the mean colour.
ERASING_MODES = ("pixel", "rand", "const")


def check_probability(value, name):
    """Raises a ValueError unless `value` is a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a probability, a number in [0, 1]. Received: {name}={value!r}")


def check_erasing_mode(mode):
    if mode not in ERASING_MODES:
        raise ValueError(f"`mode` must be one of {ERASING_MODES}. Received: mode={mode!r}")


def channel_statistics(values, channels, name):
    """Per-channel `mean` or `std` for an image of `channels` channels.

    Three values for a grayscale image become their average, as the models'
    own normalisation (`models.common.preprocess`) treats other channel counts.
    """
    try:
        values = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        values = ()
    if len(values) == 3 and channels != 3:
        return (sum(values) / 3,) * channels
    if len(values) != channels:
        raise ValueError(
            f"`{name}` must hold one value per image channel ({channels}), or 3 values (averaged for "
            f"other channel counts). Received: {name}={values!r}"
        )
    return values


def _erasing_box(height, width, seed, area_range, log_aspects, count):
    """One erased box as timm draws it: `(top, left, box_height, box_width)`.

    Ten candidates drawn at once, the first that fits strictly inside the image
    kept (timm's loop stops there); none fitting gives an empty box. Note the
    roles of width and height are the reverse of the crop's: the aspect here is
    height / width.
    """
    seeds = tf.random.experimental.stateless_split(seed, 4)
    fractions = tf.random.stateless_uniform((CROP_ATTEMPTS,), seeds[0], area_range[0], area_range[1], tf.float64)
    aspects = tf.exp(tf.random.stateless_uniform((CROP_ATTEMPTS,), seeds[1], *log_aspects, tf.float64))
    # With several boxes each one gets its share of the area, as in timm.
    areas = fractions * tf.cast(height * width, tf.float64) / tf.cast(count, tf.float64)
    heights = tf.cast(tf.round(tf.sqrt(areas * aspects)), tf.int32)
    widths = tf.cast(tf.round(tf.sqrt(areas / aspects)), tf.int32)
    fits = (widths < width) & (heights < height)
    first = tf.argmax(tf.cast(fits, tf.int32), output_type=tf.int32)
    # No candidate fitting erases an empty box.
    found = tf.reduce_any(fits)
    box_height = tf.where(found, heights[first], 0)
    box_width = tf.where(found, widths[first], 0)
    top = tf.random.stateless_uniform((), seeds[2], 0, height - box_height + 1, tf.int32)
    left = tf.random.stateless_uniform((), seeds[3], 0, width - box_width + 1, tf.int32)
    return top, left, box_height, box_width


def _paste(image, box, top, left):
    """`image` with `box` written at (`top`, `left`), by slicing and concatenation.

    Rather than a `tf.where` through a broadcast box mask, which reads and
    writes every pixel (BENCHMARKS.md, "Input pipeline").
    """
    box_height, box_width = tf.shape(box)[0], tf.shape(box)[1]
    band = image[top:top + box_height]
    band = tf.concat([band[:, :left], box, band[:, left + box_width:]], axis=1)
    return tf.concat([image[:top], band, image[top + box_height:]], axis=0)


def random_erasing(image, seed, probability=0.25, mode="pixel", area=(0.02, 1 / 3), min_aspect=0.3, count=1,
                   mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """Erases random boxes of one image `(H, W, C)` in [0, 255] with noise (timm's `RandomErasing`).

    With probability `probability` the image gets between 1 and `count` boxes
    (uniform, as timm's `max_count`); each box tries ten times to draw an area
    `uniform(area) * H * W / boxes` and an aspect (height / width) log-uniform in
    `(min_aspect, 1 / min_aspect)`, with height `round(sqrt(area * aspect))` and
    width `round(sqrt(area / aspect))`, and is kept if smaller than the image in
    both sides, at uniform integer offsets. The box is filled with
    `(mean + std * z) * 255` per channel, `z` standard normal per pixel
    (`"pixel"`), per channel (`"rand"`) or 0 (`"const"`).

    Args:
        image: float tensor `(H, W, C)`, values in [0, 255]; C static.
        seed: int tensor of shape (2,).
        probability: float in [0, 1]. Probability that the image is erased. Defaults to 0.25.
        mode: str. One of `ERASING_MODES`. Defaults to `"pixel"`.
        area: pair of floats in (0, 1]. Range of the erased area fraction. Defaults to (0.02, 1/3).
        min_aspect: float in (0, 1]. Smallest aspect; the largest is its inverse. Defaults to 0.3.
        count: int >= 1. Largest number of boxes per erased image. Defaults to 1.
        mean: per-channel floats in [0, 1]. The normalisation mean of the model. Defaults to ImageNet's.
        std: per-channel floats. The normalisation standard deviation. Defaults to ImageNet's.

    Returns:
        float32 tensor of the image's shape.
    """
    check_probability(probability, "probability")
    check_erasing_mode(mode)
    area = check_fraction_range(area, "area")
    if isinstance(min_aspect, bool) or not isinstance(min_aspect, numbers.Real) or not 0 < min_aspect <= 1:
        raise ValueError(f"`min_aspect` must be a number in (0, 1]. Received: min_aspect={min_aspect!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"`count` must be an integer >= 1. Received: count={count!r}")
    image = tf.cast(image, tf.float32)
    channels = image.shape[-1]
    if image.shape.rank != 3 or channels is None:
        raise ValueError(f"`image` must be one image (H, W, C) with a known C. Received: shape={image.shape}")
    mean = tf.constant(channel_statistics(mean, channels, "mean"), tf.float32)
    std = tf.constant(channel_statistics(std, channels, "std"), tf.float32)
    log_aspects = (math.log(min_aspect), -math.log(min_aspect))

    seeds = tf.random.experimental.stateless_split(as_seed(seed), 2 + count)
    # Erase when u < p: u in [0, 1) makes p = 0 never and p = 1 always erase.
    erase = tf.random.stateless_uniform((), seeds[0]) < probability

    def erased():
        shape = tf.shape(image)
        height, width = shape[0], shape[1]
        boxes = tf.random.stateless_uniform((), seeds[1], 1, count + 1, tf.int32) if count > 1 else tf.constant(1)
        result = image
        for index in range(count):
            box_seeds = tf.random.experimental.stateless_split(seeds[2 + index], 2)
            top, left, box_height, box_width = _erasing_box(height, width, box_seeds[0], area, log_aspects, boxes)
            # A box beyond this image's count is empty.
            box_height = tf.where(index < boxes, box_height, 0)
            if mode == "pixel":
                noise = tf.random.stateless_normal((box_height, box_width, channels), box_seeds[1])
            elif mode == "rand":
                noise = tf.random.stateless_normal((channels,), box_seeds[1])
            else:
                noise = tf.zeros((channels,))
            fill = tf.broadcast_to((mean + std * noise) * 255.0, tf.stack([box_height, box_width, channels]))
            result = _paste(result, fill, top, left)
        # Pasting by concatenation loses the static shape, which later stages (MixUp) read.
        return tf.ensure_shape(result, image.shape)
    # Most images are not erased: they skip the noise draws.
    return tf.cond(erase, erased, lambda: image)

"""RandAugment's colour and tone operations with PIL's arithmetic, on one uint8 image.

timm applies PIL's `ImageOps` (autocontrast, equalize, invert, posterize,
solarize) and `ImageEnhance` (colour, contrast, brightness, sharpness); each
function here gives PIL's pixels: its lookup tables, its fixed-point grayscale
and its float32 blends. `(H, W, 3)` uint8 in, uint8 out.
"""

import tensorflow as tf

# Pixel operations: uint8 (H, W, 3) in, uint8 out, PIL's arithmetic. They avoid
# tf.where and tf.gather on whole images, several times slower on CPU than the
# float32 arithmetic that gives the same integers.

# PIL's convert("L"): 299/587/114 per mille in 16-bit fixed point, rounded half up.
_LUMA_WEIGHTS = (19595, 38470, 7471)


def _grayscale(pixels):
    # Every partial sum is an integer below 2**24, exact in float32.
    weighted = tf.tensordot(pixels, tf.constant(_LUMA_WEIGHTS, tf.float32), axes=1)
    return tf.floor((weighted + 32768.0) * (1.0 / 65536.0))


def gray_level(color):
    """The grey level PIL gives an RGB colour (`convert("L")`): the fill of a grayscale image."""
    return (sum(w * c for w, c in zip(_LUMA_WEIGHTS, color)) + 32768) >> 16


def _blend(degenerate, pixels, factor):
    # PIL's Image.blend: a float32 factor, float32 arithmetic, clipped and truncated
    # (the cast to uint8 truncates). Both images hold integers as float32. The
    # product is formed in float64, where it is exact, and rounded to float32: PIL's
    # float32 product, which XLA would otherwise fuse with the sum into one
    # fused multiply-add, rounded once, changing a truncated pixel here and there.
    factor = tf.cast(tf.cast(factor, tf.float32), tf.float64)
    product = tf.cast(factor * (tf.cast(pixels, tf.float64) - tf.cast(degenerate, tf.float64)), tf.float32)
    return tf.cast(tf.clip_by_value(degenerate + product, 0.0, 255.0), tf.uint8)


def auto_contrast(image):
    """PIL's `ImageOps.autocontrast(image)`: each channel stretched to [0, 255], truncated."""
    pixels = tf.cast(image, tf.float64)
    low = tf.reduce_min(pixels, axis=[0, 1])
    high = tf.reduce_max(pixels, axis=[0, 1])
    # A flat channel is left as it is: scale 1, offset 0.
    scale = tf.where(high > low, 255.0 / tf.maximum(high - low, 1.0), 1.0)
    offset = tf.where(high > low, -low * scale, 0.0)
    return tf.cast(tf.clip_by_value(pixels * scale + offset, 0.0, 255.0), tf.uint8)


def equalize(image):
    """PIL's `ImageOps.equalize(image)`: each channel through PIL's integer histogram table."""
    # One histogram of 3 x 256 bins: each channel's values offset into its own 256.
    indices = tf.cast(image, tf.int32) + tf.constant([0, 256, 512])
    histogram = tf.reshape(tf.math.bincount(tf.reshape(indices, [-1]), minlength=768, maxlength=768,
                                            dtype=tf.int64), [3, 256])
    # PIL's step leaves out the count of the highest value present.
    last = tf.gather(histogram, 255 - tf.argmax(tf.reverse(histogram, [1]) > 0, axis=1, output_type=tf.int32),
                     batch_dims=1)
    step = (tf.reduce_sum(histogram, axis=1) - last) // 255
    enough = (tf.math.count_nonzero(histogram, axis=1) > 1) & (step > 0)
    step = tf.maximum(step, 1)[:, None]
    table = (step // 2 + tf.cumsum(histogram, axis=1, exclusive=True)) // step
    table = tf.cast(tf.where(enough[:, None], tf.minimum(table, 255), tf.range(256, dtype=tf.int64)), tf.uint8)
    return tf.gather(tf.reshape(table, [-1]), indices)


def invert(image):
    """PIL's `ImageOps.invert`."""
    return 255 - image


def posterize(image, bits):
    """Keeps the `bits` high bits of each value; 0 (or fewer) bits gives black, 8 or more the image.

    Pillow 12+ rejects 0 bits, which timm's `Posterize` reaches below level 2.5 and
    `PosterizeIncreasing` at level 10; this is the result of the earlier Pillows
    timm was written for (and of the TensorFlow reference).
    """
    shift = 8 - tf.clip_by_value(tf.cast(bits, tf.int32), 0, 8)
    return tf.bitwise.bitwise_and(image, tf.cast(tf.bitwise.left_shift(255, shift) % 256, tf.uint8))


def solarize(image, threshold):
    """PIL's `ImageOps.solarize`: values >= `threshold` inverted (a threshold of 256 or more changes nothing)."""
    threshold = tf.cast(threshold, tf.int32)
    # 255 - v is v with every bit flipped.
    flip = tf.cast(image >= tf.cast(tf.clip_by_value(threshold, 0, 255), tf.uint8), tf.uint8) * tf.cast(
        tf.where(threshold <= 255, 255, 0), tf.uint8)
    return tf.bitwise.bitwise_xor(image, flip)


def solarize_add(image, addition, threshold=128):
    """timm's `solarize_add`: `addition` added to values below `threshold`, clipped at 255."""
    below = tf.cast(image < threshold, tf.uint8)
    return image + below * tf.minimum(255 - image, tf.cast(tf.clip_by_value(addition, 0, 255), tf.uint8))


def color(image, factor):
    """PIL's `ImageEnhance.Color(image).enhance(factor)`: a blend with the grayscale image."""
    pixels = tf.cast(image, tf.float32)
    return _blend(_grayscale(pixels)[..., None], pixels, factor)


def contrast(image, factor):
    """PIL's `ImageEnhance.Contrast`: a blend with the mean grey level, rounded half up."""
    pixels = tf.cast(image, tf.float32)
    gray = tf.cast(_grayscale(pixels), tf.int64)
    mean = tf.cast(tf.reduce_sum(gray), tf.float64) / tf.cast(tf.size(gray), tf.float64)
    return _blend(tf.cast(tf.floor(mean + 0.5), tf.float32), pixels, factor)


def brightness(image, factor):
    """PIL's `ImageEnhance.Brightness`: a blend with black."""
    return _blend(0.0, tf.cast(image, tf.float32), factor)


def sharpness(image, factor):
    """PIL's `ImageEnhance.Sharpness`: a blend with PIL's SMOOTH filter, whose border pixels are the image's."""
    pixels = tf.cast(image, tf.float32)
    # The 3 x 3 kernel [[1, 1, 1], [1, 5, 1], [1, 1, 1]] as nine shifted slices of the
    # image padded by one pixel (elementwise adds, which XLA fuses; its convolution is
    # slow on CPU). Sums of at most 13 * 255, exact in float32; divided by 13 and
    # rounded half up, exactly, since no sum lies within 0.03 of a half.
    height, width = tf.shape(image)[0], tf.shape(image)[1]
    padded = tf.pad(pixels, [[1, 1], [1, 1], [0, 0]])
    total = 4.0 * pixels
    for row in range(3):
        for col in range(3):
            total += padded[row:height + row, col:width + col]
    smoothed = tf.floor(total / 13.0 + 0.5)
    rows = tf.cast((tf.range(height) > 0) & (tf.range(height) < height - 1), tf.float32)[:, None, None]
    cols = tf.cast((tf.range(width) > 0) & (tf.range(width) < width - 1), tf.float32)[None, :, None]
    return _blend(pixels + rows * cols * (smoothed - pixels), pixels, factor)

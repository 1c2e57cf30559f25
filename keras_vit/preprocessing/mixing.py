"""MixUp and CutMix of whole batches, as DeiT applies them (timm's `Mixup`), from stateless seeds."""

import math
import numbers

import tensorflow as tf


def _sample_beta(seed, alpha):
    """One Beta(alpha, alpha) draw, from two stateless Gamma(alpha) draws."""
    seeds = tf.random.experimental.stateless_split(seed, 2)
    x = tf.random.stateless_gamma((), seeds[0], alpha)
    y = tf.random.stateless_gamma((), seeds[1], alpha)
    return x / (x + y)


def check_mix_arguments(mixup_alpha, cutmix_alpha, switch_prob):
    """Raises a ValueError naming the argument unless the alphas and `switch_prob` are valid.

    A negative alpha has no Beta distribution (TensorFlow's Gamma sampler would return
    NaN and train on it), and `switch_prob` is a probability.
    """
    for name, value in (("mixup_alpha", mixup_alpha), ("cutmix_alpha", cutmix_alpha)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
            raise ValueError(f"`{name}` must be a finite number >= 0 (0 disables it). Received: {name}={value!r}")
    if not (mixup_alpha or cutmix_alpha):
        raise ValueError("`mixup_alpha` or `cutmix_alpha` must be > 0. "
                         f"Received: mixup_alpha={mixup_alpha}, cutmix_alpha={cutmix_alpha}")
    if isinstance(switch_prob, bool) or not isinstance(switch_prob, numbers.Real) or not 0 <= switch_prob <= 1:
        raise ValueError(f"`switch_prob` must be a probability, a number in [0, 1]. Received: switch_prob={switch_prob!r}")


def mix_parameters(seed, height, width, mixup_alpha=0.0, cutmix_alpha=0.0, switch_prob=0.5):
    """The random draws of `mix_batch`: which mix, its lambda and the CutMix box.

    Returns:
        Tuple `(use_cutmix, lam, box)`: a bool, the Beta(alpha, alpha) draw, and
        `(top, bottom, left, right)` of the box taken from the partner images
        (as timm's `rand_bbox`: sides `sqrt(1 - lam)` of the image's, centre
        uniform over the image, clipped at the borders).
    """
    check_mix_arguments(mixup_alpha, cutmix_alpha, switch_prob)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int32), 4)
    if mixup_alpha and cutmix_alpha:
        use_cutmix = tf.random.stateless_uniform((), seeds[0]) < switch_prob
    else:
        use_cutmix = tf.constant(bool(cutmix_alpha))
    alpha = tf.where(use_cutmix, float(cutmix_alpha or 1.0), float(mixup_alpha or 1.0))
    lam = _sample_beta(seeds[1], alpha)
    cut = tf.sqrt(1.0 - lam)
    cut_h = tf.cast(height * cut, tf.int32)
    cut_w = tf.cast(width * cut, tf.int32)
    centre_y = tf.random.stateless_uniform((), seeds[2], 0, height, tf.int32)
    centre_x = tf.random.stateless_uniform((), seeds[3], 0, width, tf.int32)
    box = (
        tf.clip_by_value(centre_y - cut_h // 2, 0, height),
        tf.clip_by_value(centre_y + cut_h // 2, 0, height),
        tf.clip_by_value(centre_x - cut_w // 2, 0, width),
        tf.clip_by_value(centre_x + cut_w // 2, 0, width),
    )
    return use_cutmix, lam, box


def mix_batch(images, labels, seed, mixup_alpha=0.0, cutmix_alpha=0.0, switch_prob=0.5):
    """MixUp (Zhang et al. 2018) or CutMix (Yun et al. 2019) of a batch, as DeiT applies them.

    Each image is mixed with its partner in the reversed batch, with one lambda
    for the whole batch; with both alphas set, CutMix is chosen with probability
    `switch_prob` (DeiT: MixUp 0.8, CutMix 1.0, switch 0.5, timm's `Mixup`). The
    CutMix lambda is corrected to the box's area, and the labels mix with the
    same lambda. Stateless: `seed` decides everything, so resumed runs are exact.

    Args:
        images: float tensor `(batch, height, width, channels)`, static height and width.
        labels: float tensor `(batch, classes)`, one-hot (or soft).
        seed: int32 tensor of shape `(2,)`.
        mixup_alpha: float. MixUp's Beta parameter; 0 disables MixUp.
        cutmix_alpha: float. CutMix's Beta parameter; 0 disables CutMix.
        switch_prob: float. Probability of CutMix when both are enabled.

    Returns:
        `(images, labels)`, mixed.
    """
    images = tf.convert_to_tensor(images)
    labels = tf.convert_to_tensor(labels)
    if images.shape.rank != 4 or labels.shape.rank != 2:
        raise ValueError("`mix_batch` takes images (batch, height, width, channels) and labels (batch, classes). "
                         f"Received: images.shape={tuple(images.shape)}, labels.shape={tuple(labels.shape)}")
    # Each image takes its partner's label: a batch of labels of another length would pair
    # images with the wrong labels, silently. Checked here when both sizes are static,
    # and in the graph otherwise.
    images_batch, labels_batch = images.shape[0], labels.shape[0]
    if images_batch is not None and labels_batch is not None and images_batch != labels_batch:
        raise ValueError(f"`labels` must have one row per image: {images_batch} images. "
                         f"Received: labels.shape={tuple(labels.shape)}")
    if images_batch is None or labels_batch is None:
        tf.debugging.assert_equal(tf.shape(images)[0], tf.shape(labels)[0],
                                  message="`labels` must have one row per image")
    height, width = images.shape[1], images.shape[2]
    use_cutmix, lam, (top, bottom, left, right) = mix_parameters(
        seed, height, width, mixup_alpha, cutmix_alpha, switch_prob)
    # tf.reverse, not images[::-1]: the same pixels, and the strided slice is ~20x slower
    # inside tf.data (benchmarks/input_pipeline.py).
    partner_images = tf.reverse(images, [0])
    rows = tf.range(height)[:, None]
    cols = tf.range(width)[None, :]
    inside = (rows >= top) & (rows < bottom) & (cols >= left) & (cols < right)
    cut_lam = 1.0 - tf.cast((bottom - top) * (right - left), tf.float32) / float(height * width)
    # Only the chosen mix is computed (a tf.where of both would compute both).
    mixed = tf.cond(
        use_cutmix,
        lambda: tf.where(inside[None, :, :, None], partner_images, images),
        lambda: lam * images + (1.0 - lam) * partner_images,
    )
    lam = tf.where(use_cutmix, cut_lam, lam)
    return mixed, lam * labels + (1.0 - lam) * tf.reverse(labels, [0])

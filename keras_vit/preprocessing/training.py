"""The papers' training transforms of one image, stateless: crop, flip, RandAugment, random erasing.

`train_transform(...)` returns `f(image, seed)`, a pure function of one image
and an int32 seed of shape (2,): the same seed gives the same pixels, so a
resumed run that derives each example's seed from (seed, step, example) sees
the augmentations of the interrupted one. It traces inside
`tf.data.Dataset.map` with unknown image sizes and uses TensorFlow ops only, so
the same pipeline feeds every Keras backend.

`RECIPES` names the reference recipes: `"deit"` is timm's
`create_transform(size, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
interpolation="bicubic", re_prob=0.25, re_mode="pixel", re_count=1)` as DeiT,
ConViT and Swin train (DeiT, Touvron et al. 2021, Sec. 6 and Tab. 9; their
`datasets.build_transform`), and `"vit"` ViT's inception crop and flip
(Dosovitskiy et al. 2021, App. B.1; vit_jax's input pipeline).
"""

import tensorflow as tf

from keras_vit.layers.validation import check_bool, to_pair
from keras_vit.preprocessing import erasing
from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD
from keras_vit.preprocessing.cropping import (
    as_seed,
    check_fraction_range,
    check_ratio,
    check_padding,
    inception_crop,
    padded_crop,
    random_flip,
    random_resized_crop,
)
from keras_vit.preprocessing.erasing import (
    channel_statistics,
    check_erasing_mode,
    check_probability,
)
from keras_vit.preprocessing.resizing import check_interpolation

# "random_resized_crop": DeiT's (timm's) crop, resized as PIL; "inception_crop":
# ViT's; "resize": the whole image, resized; "padded_crop": the whole image resized,
# padded and shifted at random (ResNet's CIFAR crop), as the main job trains.
CROPS = ("random_resized_crop", "inception_crop", "resize", "padded_crop")
# Area fractions of the two crops when `scale` is None.
DEFAULT_SCALES = {"random_resized_crop": (0.08, 1.0), "inception_crop": (0.05, 1.0)}

RECIPES = {
    "deit": {
        "crop": "random_resized_crop",
        "flip": True,
        "rand_augment": "rand-m9-mstd0.5-inc1",
        "random_erasing": 0.25,
        "erasing_mode": "pixel",
        "interpolation": "bicubic",
    },
    "vit": {"crop": "inception_crop", "flip": True},
}
"""The papers' training transforms by name (`train_transform_for`): DeiT's (also ConViT's and
Swin's) and the ViT paper's crop, flip, RandAugment policy and erasing as their reference code ran
them. MixUp and CutMix act on batches: `mix_batch`.
"""


def check_crop(crop):
    if crop not in CROPS:
        raise ValueError(f"`crop` must be one of {CROPS}. Received: crop={crop!r}")


def check_image(image):
    """Returns one image as a tensor after checking its rank, channels and dtype.

    Accepted: uint8, or float with values in [0, 255]; shape `(H, W, 1)` or
    `(H, W, 3)`. A float image's range is checked here when its values are
    known (eager) and by an assertion in the graph otherwise (`tf.data`).
    """
    image = tf.convert_to_tensor(image)
    if image.shape.rank != 3 or image.shape[-1] not in (1, 3):
        raise ValueError(
            "`image` must be one image of shape (height, width, channels) with 1 (grayscale) or 3 (RGB) "
            "channels; convert RGBA to RGB first (e.g. PIL's `convert('RGB')`). "
            f"Received: image with shape={tuple(image.shape)}"
        )
    if image.dtype == tf.uint8:
        return image
    if not image.dtype.is_floating:
        raise ValueError(f"`image` must be uint8 or float in [0, 255]. Received: image with dtype={image.dtype.name}")
    if tf.executing_eagerly():
        low, high = float(tf.reduce_min(image)), float(tf.reduce_max(image))
        if not (0 <= low and high <= 255):  # written so that NaN fails too
            raise ValueError(f"`image` values must lie in [0, 255]. Received: image with values in [{low}, {high}]")
        return image
    with tf.control_dependencies([
        tf.debugging.assert_greater_equal(image, tf.cast(0, image.dtype), message="`image` values must be >= 0"),
        tf.debugging.assert_less_equal(image, tf.cast(255, image.dtype), message="`image` values must be <= 255"),
    ]):
        return tf.identity(image)


def _to_uint8(image):
    # PIL's rounding, half up; only the inception crop and the plain resize leave fractions.
    return tf.cast(tf.clip_by_value(tf.floor(tf.cast(image, tf.float32) + 0.5), 0.0, 255.0), tf.uint8)


def train_transform(image_size, crop="random_resized_crop", scale=None, ratio=(3 / 4, 4 / 3), flip=True,
                    rand_augment=None, random_erasing=0.0, erasing_mode="pixel", interpolation="bicubic",
                    mean=IMAGENET_MEAN, std=IMAGENET_STD, padding=4):
    """The training transform of one image: crop, flip, RandAugment, random erasing.

    The stages run in the reference order (timm's `transforms_imagenet_train`),
    each with its own seed split from `seed`:

    1. `crop`: `"random_resized_crop"` (`cropping.random_resized_crop`, resized
       with `interpolation` antialiased and rounded as PIL), `"inception_crop"`
       (`cropping.inception_crop`), `"resize"` (the whole image) or
       `"padded_crop"` (the whole image shifted by up to `padding` pixels,
       `cropping.padded_crop`). The last three resize bilinearly without
       antialiasing, in float, as ViT's pipeline and the small presets do;
       `interpolation` does not apply to them.
    2. `flip`: left-right with probability 0.5.
    3. `rand_augment`: timm's policy string, e.g. `"rand-m9-mstd0.5-inc1"`, on the
       uint8 crop; its fill colour is `round(mean * 255)`, as timm's `img_mean`.
    4. `random_erasing`: probability of erasing one box with `erasing_mode` noise
       (`erasing.random_erasing`, timm's `RandomErasing` in pixel units).

    Args:
        image_size: int or pair of ints. Output `(height, width)`.
        crop: str. One of `CROPS`. Defaults to `"random_resized_crop"`.
        scale: pair of floats with 0 < low <= high <= 1, or None. Range of the
            crop's area fraction; None gives (0.08, 1) for the random resized
            crop and (0.05, 1) for the inception crop. Unused by `"resize"`.
        ratio: pair of floats. Range of the crop's aspect (width / height).
            Defaults to (3/4, 4/3). Unused by `"resize"`.
        flip: bool. Random horizontal flip. Defaults to True.
        rand_augment: str or None. timm's RandAugment policy; None skips it.
        random_erasing: float in [0, 1]. Probability of random erasing. Defaults to 0.
        erasing_mode: str. One of `erasing.ERASING_MODES`. Defaults to `"pixel"`.
        interpolation: str. One of `resizing.INTERPOLATIONS`, for the random
            resized crop and RandAugment's geometric operations. Defaults to `"bicubic"`.
        mean: 3 floats in [0, 1]. The models' normalisation mean, for the fill
            colours of RandAugment and random erasing. Defaults to ImageNet's.
        std: 3 floats. The models' normalisation standard deviation, for
            random erasing. Defaults to ImageNet's.
        padding: int >= 0. Pixels of `"padded_crop"`'s border on each side.
            Defaults to 4 (ResNet's CIFAR recipe). Unused by the other crops.

    Returns:
        A function `f(image, seed)` of one uint8 image `(H, W, C)` (C 1 or 3; a
        float image in [0, 255] is accepted) and an int seed of shape (2,),
        returning float32 `(height, width, C)`, in [0, 255] except for erased
        boxes, whose noise is unbounded as in timm.
    """
    size = to_pair(image_size, "image_size")
    check_crop(crop)
    scale = check_fraction_range(DEFAULT_SCALES.get(crop, (1.0, 1.0)) if scale is None else scale, "scale")
    ratio = check_ratio(ratio)
    padding = check_padding(padding)
    check_bool(flip, "flip")
    check_probability(random_erasing, "random_erasing")
    check_erasing_mode(erasing_mode)
    check_interpolation(interpolation)
    fill = tuple(min(255, round(255 * m)) for m in channel_statistics(mean, 3, "mean"))
    channel_statistics(std, 3, "std")
    augment = None
    if rand_augment is not None:
        # Imported here: RandAugment's module is needed only by the recipes that use it.
        from keras_vit.preprocessing.randaugment import (
            rand_augment as make_rand_augment,
        )

        augment = make_rand_augment(rand_augment, fill=fill, interpolation=interpolation)

    # tf.data's `map` would have AutoGraph transpile this and every function under it; it
    # branches in TensorFlow ops and on Python values only, so it needs none.
    @tf.autograph.experimental.do_not_convert
    def transform(image, seed):
        image = check_image(image)
        seeds = tf.random.experimental.stateless_split(as_seed(seed), 4)
        if crop == "random_resized_crop":
            image = random_resized_crop(image, seeds[0], size, scale, ratio, interpolation)
        elif crop == "inception_crop":
            image = inception_crop(image, seeds[0], size, scale, ratio)
        elif crop == "padded_crop":
            image = padded_crop(image, seeds[0], size, padding)
        else:
            image = tf.image.resize(tf.cast(image, tf.float32), size)
        if flip:
            image = random_flip(image, seeds[1])
        if augment is not None:
            image = tf.cast(augment(_to_uint8(image), seeds[2]), tf.float32)
        if random_erasing:
            image = erasing.random_erasing(image, seeds[3], random_erasing, erasing_mode, mean=mean, std=std)
        return image

    return transform


def train_transform_for(recipe, image_size, **overrides):
    """The training transform of a named recipe, `train_transform(image_size, **RECIPES[recipe], **overrides)`.

    Args:
        recipe: str. A key of `RECIPES`: `"deit"` (DeiT, ConViT, Swin) or `"vit"`.
        image_size: int or pair of ints. Output `(height, width)`.
        **overrides: `train_transform` arguments that replace the recipe's.

    Returns:
        The function `f(image, seed)` of `train_transform`.
    """
    if recipe not in RECIPES:
        raise ValueError(f"`recipe` must be one of {tuple(RECIPES)}. Received: recipe={recipe!r}")
    return train_transform(image_size, **{**RECIPES[recipe], **overrides})

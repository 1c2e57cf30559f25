"""timm's RandAugment (Cubuk et al. 2020, Sec. 3) as stateless TensorFlow ops on one image.

(Over 400 lines on purpose: the policy parsing, the magnitude rules and the operation
table are one transcription of timm's `auto_augment.py`, kept together to be read against it;
the pixel operations live in `color_ops` and `geometric_ops`.)

DeiT, ConViT and Swin train with timm's `rand_augment_transform("rand-m9-mstd0.5-inc1")`:
per image, 2 operations drawn with replacement from 15, each applied with
probability 0.5 at a magnitude drawn from N(9, 0.5) and clipped to [0, 10], the
signed ones (rotate, shear, translate, the increasing enhancements) negated
with probability 0.5. timm's operations are PIL's, and each is written here to
give PIL's pixels: the lookup tables of `ImageOps`, the fixed-point grayscale
and float32 blends of `ImageEnhance`, and the resampling of `Image.transform`
(pixel centres at +0.5, the a = -1 cubic of PIL's affine transforms, truncation
to uint8, the fill colour outside the image) as our own sampling, since
TensorFlow's `ImageProjectiveTransformV3` offers no bicubic mode. On images of
a static size (a training pipeline's crops, and eager calls) each operation
runs compiled by XLA, once per size (BENCHMARKS.md has the speed); there the
geometric operations differ from PIL by one grey level on at most 0.2% of the
pixels (XLA fuses a multiply and an add that PIL rounds separately), the others
not at all (tested). Images of unknown size run uncompiled, with PIL's pixels.

Every random draw is a function of the `seed` argument, so the same seed gives
the same pixels in any process on the same path (static or unknown size; the two
differ only where a compiled geometric operation does), and everything traces
inside `tf.data.Dataset.map` with unknown image sizes, feeding any Keras backend.

Where timm is silent or fails:
- A grayscale image `(H, W, 1)` runs as three equal channels with the fill's
  grey level as fill, so it stays grey, and returns with one channel (what PIL
  gives on an "L" image). RGBA and other channel counts are errors.
- A float image with values in [0, 255] is rounded half up to uint8 first;
  other values are an error. The result is uint8 either way.
- Posterize to 0 bits (timm's `Posterize` below level 2.5, `PosterizeIncreasing`
  at level 10) gives black, as the Pillows timm was written for; Pillow 12+
  raises instead, which stops timm's own `rand-m9-mstd0.5-inc1` about once in
  770 images.
- Policy strings are read strictly: a magnitude above `mmax`, an unreadable or
  a repeated section is an error where timm clips, skips or overrides.
"""

import functools
import math
import numbers
import re
from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import tensorflow as tf

from keras_vit.preprocessing.color_ops import (
    auto_contrast,
    brightness,
    color,
    contrast,
    equalize,
    gray_level,
    invert,
    posterize,
    sharpness,
    solarize,
    solarize_add,
)
from keras_vit.preprocessing.cropping import as_seed
from keras_vit.preprocessing.geometric_ops import (
    AFFINE_MATRICES,
    DEFAULT_FILL,
    INTERPOLATIONS,  # noqa: F401 - the filters `rand_augment` accepts
    affine_transform,
    check_fill,
    check_interpolation,
    float64,
    rotate,
    shear_x,
    shear_y,
    translate_x_relative,
    translate_y_relative,
)

# timm's `_LEVEL_DENOM`: a level of 10 gives each operation its full strength.
LEVEL_DENOMINATOR = 10.0

# timm's `_RAND_TRANSFORMS` and `_RAND_INCREASING_TRANSFORMS`, in its order.
OP_NAMES = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
            "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
INCREASING_OP_NAMES = ("AutoContrast", "Equalize", "Invert", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing",
                       "SolarizeAdd", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing",
                       "SharpnessIncreasing", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")

POLICY_GRAMMAR = (
    "'rand' followed by '-'-separated sections, each at most once: m<int> (magnitude, 0 to mmax, default 10), "
    "n<int> (operations per image, default 2), mstd<float> (magnitude noise std, default 0; 'inf' or > 100: "
    "uniform in [0, m]), mmax<int> (magnitude clip, > 0, default 10), p<float> (probability of each operation, "
    "in [0, 1], default 0.5), inc<0|1> (the increasing operations, default 0); e.g. 'rand-m9-mstd0.5-inc1'"
)
_NUMBER = r"(\d+(\.\d*)?|\.\d+)"
_SECTIONS = {"mstd": rf"{_NUMBER}|inf", "mmax": r"\d+", "inc": r"[01]", "m": r"\d+", "n": r"\d+", "p": _NUMBER}


class RandAugmentPolicy(NamedTuple):
    """A parsed policy string; the defaults are timm's."""

    magnitude: int = 10
    num_layers: int = 2
    magnitude_std: float = 0.0
    magnitude_max: int = 10
    probability: float = 0.5
    increasing: bool = False

    @property
    def op_names(self):
        return INCREASING_OP_NAMES if self.increasing else OP_NAMES


def parse_policy(policy):
    """Parses timm's RandAugment policy string, e.g. `"rand-m9-mstd0.5-inc1"`, strictly.

    timm skips sections it cannot read (`"mstd"` alone) and clips a magnitude
    above the maximum (`"m99"` runs as `"m10"`); both are errors here, as is a
    repeated section, since each would run another policy than the one written.
    timm's `t<set>` (weighted and 3-Augment op sets) is not supported.

    Args:
        policy: str. See `POLICY_GRAMMAR`.

    Returns:
        A `RandAugmentPolicy`.

    Raises:
        ValueError: naming the policy, the bad section and the accepted grammar.
    """
    def fail(problem):
        raise ValueError(f"`policy` {problem}. Accepted: {POLICY_GRAMMAR}. Received: policy={policy!r}")

    if not isinstance(policy, str) or not policy:
        fail("must be a non-empty string")
    name, *sections = policy.split("-")
    if name != "rand":
        fail(f"must start with 'rand', not {name!r}")
    values = {}
    for section in sections:
        key = next((key for key in _SECTIONS if section.startswith(key)), None)
        if section[:1] in ("t", "w"):
            fail(f"has section {section!r}: timm's weighted and alternative op sets are not supported")
        if key is None or not re.fullmatch(_SECTIONS[key], section[len(key):]):
            fail(f"has an unreadable section {section!r}")
        if key in values:
            fail(f"sets {key!r} twice")
        values[key] = section[len(key):]
    magnitude_max = int(values.get("mmax", 10))
    magnitude = int(values.get("m", 10))
    std = float(values.get("mstd", 0.0))
    probability = float(values.get("p", 0.5))
    if magnitude_max <= 0:
        fail(f"has mmax={magnitude_max}; the magnitude maximum must be a positive integer")
    if magnitude > magnitude_max:
        fail(f"has magnitude m={magnitude} above the maximum mmax={magnitude_max}; raise mmax to allow it")
    if probability > 1.0:
        fail(f"has probability p={probability}, outside [0, 1]")
    return RandAugmentPolicy(magnitude, int(values.get("n", 2)), math.inf if std > 100 else std, magnitude_max,
                             probability, values.get("inc") == "1")




# timm's level-to-argument mappings. `level` and `sign` (+1 or -1, read by the signed
# operations only) are Python numbers, giving timm's arguments exactly (Python's
# float64 arithmetic in timm's order), or float64 tensors: the policy's random levels,
# where TensorFlow's graph optimizer may reorder the arithmetic ((level / 10) * 0.45
# becomes level * 0.045), a last-bit difference that a random level makes moot.

def _fraction(level):
    return level / LEVEL_DENOMINATOR


def _truncate(value):
    # Python's int() on the non-negative levels.
    return math.floor(value) if isinstance(value, numbers.Real) else tf.cast(tf.floor(value), tf.int32)


def _minimum(value, bound):
    return min(value, bound) if isinstance(value, numbers.Real) else tf.minimum(value, bound)


def _maximum(value, bound):
    return max(value, bound) if isinstance(value, numbers.Real) else tf.maximum(value, bound)


def _enhance_factor(level, sign):
    return _fraction(level) * 1.8 + 0.1


def _enhance_increasing_factor(level, sign):
    # Away from 1 (no change) in either direction, at least 0.1.
    return _maximum(1.0 + sign * (_fraction(level) * 0.9), 0.1)


def _posterize_bits(level, sign):
    return _truncate(_fraction(level) * 4.0)


def _solarize_threshold(level, sign):
    return _minimum(_truncate(_fraction(level) * 256.0), 256)


def _signed(scale):
    return lambda level, sign: sign * (_fraction(level) * scale)


class RandAugmentOp(NamedTuple):
    """One operation: `transform(image, argument)` (geometric ones also take `fill` and
    `interpolation`; AutoContrast, Equalize and Invert take no argument), timm's
    `level_to_argument(level, sign)`, None for the operations without argument, and
    whether XLA compiles it to PIL's pixels, quickly (Equalize's histogram becomes a slow
    scatter; AutoContrast's float64 scale-and-offset must be rounded twice, as PIL's
    Python arithmetic, where XLA's fused multiply-add rounds once)."""

    transform: Callable
    level_to_argument: Callable | None = None
    geometric: bool = False
    compiles: bool = True


RAND_AUGMENT_OPS = {
    "AutoContrast": RandAugmentOp(auto_contrast, compiles=False),
    "Equalize": RandAugmentOp(equalize, compiles=False),
    "Invert": RandAugmentOp(invert),
    "Rotate": RandAugmentOp(rotate, _signed(30.0), True),
    "Posterize": RandAugmentOp(posterize, _posterize_bits),
    "PosterizeIncreasing": RandAugmentOp(posterize, lambda level, sign: 4 - _posterize_bits(level, sign)),
    "Solarize": RandAugmentOp(solarize, _solarize_threshold),
    "SolarizeIncreasing": RandAugmentOp(solarize, lambda level, sign: 256 - _solarize_threshold(level, sign)),
    "SolarizeAdd": RandAugmentOp(solarize_add, lambda level, sign: _minimum(_truncate(_fraction(level) * 110.0), 128)),
    "Color": RandAugmentOp(color, _enhance_factor),
    "ColorIncreasing": RandAugmentOp(color, _enhance_increasing_factor),
    "Contrast": RandAugmentOp(contrast, _enhance_factor),
    "ContrastIncreasing": RandAugmentOp(contrast, _enhance_increasing_factor),
    "Brightness": RandAugmentOp(brightness, _enhance_factor),
    "BrightnessIncreasing": RandAugmentOp(brightness, _enhance_increasing_factor),
    "Sharpness": RandAugmentOp(sharpness, _enhance_factor),
    "SharpnessIncreasing": RandAugmentOp(sharpness, _enhance_increasing_factor),
    "ShearX": RandAugmentOp(shear_x, _signed(0.3), True),
    "ShearY": RandAugmentOp(shear_y, _signed(0.3), True),
    # timm's default translate_pct of 0.45, which create_transform keeps for RandAugment.
    "TranslateXRel": RandAugmentOp(translate_x_relative, _signed(0.45), True),
    "TranslateYRel": RandAugmentOp(translate_y_relative, _signed(0.45), True),
}
"""RandAugment's operations by the names of timm's policy strings (`rand-m9-mstd0.5-inc1`): each
an image transform (`RandAugmentOp`) with the map from its magnitude to the transform's argument.
"""


def _argument(op, level, sign):
    """The operation's argument; with a Python `level` and a tensor `sign` (a policy without
    magnitude noise), both signs' arguments are computed in Python and `sign` picks one."""
    if op.level_to_argument is None:
        return None
    if isinstance(level, numbers.Real):
        if isinstance(sign, numbers.Real):
            return op.level_to_argument(float(level), float(sign))
        positive, negative = op.level_to_argument(float(level), 1.0), op.level_to_argument(float(level), -1.0)
        if positive == negative:
            return positive
        return tf.where(sign < 0, tf.constant(negative, tf.float64), tf.constant(positive, tf.float64))
    return op.level_to_argument(float64(level), float64(sign))


def _transform(op, image, argument, fill, interpolation):
    if op.level_to_argument is None:
        return op.transform(image)
    if op.geometric:
        return op.transform(image, argument, fill, interpolation)
    return op.transform(image, argument)


@functools.lru_cache(maxsize=64)
def compiled_transform(name, interpolation="bicubic", image_shape=None):
    """One operation's transform as a `tf.function` of `(image, argument, fill)`, traced once.

    `argument` is a float64 scalar (ignored by the operations without one) and
    `fill` a uint8 colour `(3,)`. For a static `image_shape` (the crops of a
    training pipeline) the function is compiled by XLA, which fuses the filters'
    elementwise arithmetic into one pass over the image (BENCHMARKS.md, "Input
    pipeline"). Images of unknown size run as a plain graph instead, since XLA
    compiles once per size. A geometric operation's matrix is computed outside
    the compiled part: XLA reassociates arithmetic on constants, which moves
    PIL's pixel grid by a few units in the last place (enough to change a
    truncated pixel).

    Args:
        name: str. A key of `RAND_AUGMENT_OPS`.
        interpolation: str. One of `INTERPOLATIONS`, for the geometric operations.
        image_shape: `(height, width, 3)` ints, or None for any size.

    Returns:
        A callable returning uint8 of the image's shape.
    """
    op = RAND_AUGMENT_OPS[name]
    compile_ = image_shape is not None and op.compiles
    if op.geometric and compile_:
        matrix_of = AFFINE_MATRICES[op.transform]

        def transform(image, argument, fill):
            matrix = matrix_of(argument, tf.shape(image)[0], tf.shape(image)[1])
            # The matrix's Python numbers stay constants of the compiled sampler.
            template = tuple(a if isinstance(a, numbers.Real) else None for a in matrix)
            values = tf.stack([float64(a) for a in matrix])
            return _compiled_affine(interpolation, image_shape, template)(image, values, fill)

        return transform

    def run(image, argument, fill):
        return _transform(op, image, argument, fill, interpolation)

    signature = [tf.TensorSpec(image_shape or (None, None, 3), tf.uint8), tf.TensorSpec([], tf.float64),
                 tf.TensorSpec([3], tf.uint8)]
    # autograph=False: `_transform`'s Python branches test the operation's fixed attributes,
    # never a tensor, and converting the 15 operations' code cost seconds per pipeline.
    return tf.function(run, input_signature=signature, jit_compile=compile_, autograph=False)


@functools.lru_cache(maxsize=64)
def _compiled_affine(interpolation, image_shape, template):
    """`affine_transform` compiled by XLA for one image shape; `template` holds the
    matrix's known entries (None where `values` gives them)."""

    def run(image, values, fill):
        matrix = [values[i] if known is None else known for i, known in enumerate(template)]
        return affine_transform(image, matrix, fill, interpolation)

    signature = [tf.TensorSpec(image_shape, tf.uint8), tf.TensorSpec([6], tf.float64), tf.TensorSpec([3], tf.uint8)]
    return tf.function(run, input_signature=signature, jit_compile=True, autograph=False)


def _static_shape(image):
    # Eager calls compile too, so that they give the pixels of a pipeline's compiled
    # crops; each new size compiles once (the caches keep the 64 latest).
    return tuple(image.shape) if image.shape.is_fully_defined() else None


def _run_op(name, image, level, sign, fill, interpolation):
    """One operation at `level` and `sign` (Python numbers give timm's arguments exactly)."""
    op = RAND_AUGMENT_OPS[name]
    argument = 0.0 if op.level_to_argument is None else _argument(op, level, sign)
    return compiled_transform(name, interpolation, _static_shape(image))(image, float64(argument), fill)


@functools.lru_cache(maxsize=64)
def _policy_branch(name, interpolation, fixed_level, image_shape):
    """`_run_op` as one function call, a branch of the policy's switch: inlined, each
    layer's switch would carry the nodes of all 15 operations, which TensorFlow's
    executor visits (as dead) on every image, about as long as a cheap operation."""

    def run(image, level, sign, fill):
        return _run_op(name, image, level if fixed_level is None else fixed_level, sign, fill, interpolation)

    signature = [tf.TensorSpec(image_shape or (None, None, 3), tf.uint8), tf.TensorSpec([], tf.float64),
                 tf.TensorSpec([], tf.float64), tf.TensorSpec([3], tf.uint8)]
    return tf.function(run, input_signature=signature, experimental_attributes={"_noinline": True},
                       autograph=False)


def _as_rgb(image, fill):
    """One image as uint8 RGB, with the fill colour to use and a function restoring the input's channels.

    A grayscale image runs as three equal channels with a grey fill (the
    colour's own grey level), so that it stays grey; the first channel returns.
    A float image in [0, 255] is rounded half up first.
    """
    image = tf.convert_to_tensor(image)
    if image.shape.rank != 3 or image.shape[-1] not in (1, 3):
        raise ValueError(
            "`image` must be one image of shape (height, width, channels) with 1 (grayscale) or 3 (RGB) channels "
            f"and a known channel count; convert RGBA to RGB first. Received: image with shape={tuple(image.shape)}")
    if image.dtype.is_floating:
        image = _checked_float(image)
        image = tf.cast(tf.clip_by_value(tf.floor(tf.cast(image, tf.float32) + 0.5), 0.0, 255.0), tf.uint8)
    elif image.dtype != tf.uint8:
        raise ValueError(f"`image` must be uint8, or float with values in [0, 255]. "
                         f"Received: image with dtype={image.dtype.name}")
    if image.shape[-1] == 3:
        return image, fill, lambda result: result
    return tf.repeat(image, 3, axis=-1), (gray_level(fill),) * 3, lambda result: result[..., :1]


def _checked_float(image):
    if tf.executing_eagerly():
        low, high = float(tf.reduce_min(image)), float(tf.reduce_max(image))
        if not (0.0 <= low and high <= 255.0):  # NaN fails too
            raise ValueError(f"`image` values must lie in [0, 255]. Received: image with values in [{low}, {high}]")
        return image
    in_range = tf.reduce_all((image >= 0) & (image <= 255))
    with tf.control_dependencies([tf.debugging.Assert(in_range, ["`image` values must lie in [0, 255]"])]):
        return tf.identity(image)


def apply_op(image, name, magnitude, sign=1.0, fill=DEFAULT_FILL, interpolation="bicubic"):
    """Applies one operation at a given level, deterministically (timm's `AugmentOp` with prob 1, no noise).

    Args:
        image: uint8 `(H, W, 3)` or `(H, W, 1)`, numpy or tensor (float in [0, 255] is rounded).
        name: str. A key of `RAND_AUGMENT_OPS`.
        magnitude: float. The level, 10 giving full strength (timm clips it to [0, mmax]).
        sign: +1 or -1. The sign of a signed operation's argument. Defaults to 1.
        fill: 3 ints. Colour of the uncovered area. Defaults to `DEFAULT_FILL`.
        interpolation: str. One of `INTERPOLATIONS`. Defaults to `"bicubic"`.

    Returns:
        uint8 tensor of the image's shape.
    """
    if name not in RAND_AUGMENT_OPS:
        raise ValueError(f"`name` must be one of {tuple(RAND_AUGMENT_OPS)}. Received: name={name!r}")
    check_interpolation(interpolation)
    image, fill, restore = _as_rgb(image, check_fill(fill))
    return restore(_run_op(name, image, magnitude, sign, tf.constant(fill, tf.uint8), interpolation))


def rand_augment(policy="rand-m9-mstd0.5-inc1", fill=DEFAULT_FILL, interpolation="bicubic"):
    """timm's RandAugment, `rand_augment_transform(policy, hparams)`, as a stateless function of one image.

    The defaults are what timm's `create_transform(is_training=True,
    auto_augment="rand-m9-mstd0.5-inc1", interpolation="bicubic")` passes, as
    DeiT, ConViT and Swin train: the ImageNet mean colour as fill and bicubic
    resampling. Per image, `n` operations are drawn uniformly with replacement;
    each runs with probability `p` at the level N(m, mstd) (uniform in [0, m]
    for `mstdinf`) clipped to [0, mmax], signed arguments negated with
    probability 0.5.

    Args:
        policy: str. timm's policy string; see `POLICY_GRAMMAR`. Defaults to `"rand-m9-mstd0.5-inc1"`.
        fill: 3 ints in [0, 255]. Colour of the area that rotation, shear and
            translation uncover. Defaults to `DEFAULT_FILL`.
        interpolation: str. One of `INTERPOLATIONS`, for the geometric
            operations. Defaults to `"bicubic"`.

    Returns:
        `f(image, seed)`: `image` one uint8 image `(H, W, 3)` or grayscale
        `(H, W, 1)` (run as three equal channels with a grey fill, and returned
        with one), numpy or tensor, a float image in [0, 255] being rounded half
        up first; `seed` an int tensor of shape (2,), int32 and int64 giving the
        same draws. Returns uint8 of the image's shape; the same seed gives the
        same result. A float image outside [0, 255] raises a ValueError when
        called eagerly and an InvalidArgumentError inside a graph (`tf.data`).

    Raises:
        ValueError: for a malformed `policy` (naming the section and the
            accepted grammar), a `fill` that is not an RGB colour, or an
            `interpolation` PIL's transforms do not have.
    """
    parsed = parse_policy(policy)
    fill = check_fill(fill)
    check_interpolation(interpolation)
    # Without magnitude noise every level is m, and the arguments are timm's exactly.
    fixed_level = float(parsed.magnitude) if parsed.magnitude_std == 0 else None
    layers = parsed.num_layers

    def augment(image, seed):
        static_shape = tf.convert_to_tensor(image).shape
        image, image_fill, restore = _as_rgb(image, fill)
        seed = as_seed(seed)
        if not seed.shape.is_compatible_with([2]):
            raise ValueError(f"`seed` must be an integer tensor of shape (2,). Received: seed with shape={seed.shape}")
        choice_seed, apply_seed, level_seed, sign_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 4))
        choices = tf.random.stateless_uniform([layers], choice_seed, minval=0, maxval=len(parsed.op_names),
                                              dtype=tf.int32)
        # timm skips an operation when its uniform draw exceeds p.
        applied = tf.random.stateless_uniform([layers], apply_seed, dtype=tf.float64) <= parsed.probability
        if math.isinf(parsed.magnitude_std):
            levels = tf.random.stateless_uniform([layers], level_seed, maxval=parsed.magnitude, dtype=tf.float64)
        else:
            levels = parsed.magnitude + parsed.magnitude_std * tf.random.stateless_normal(
                [layers], level_seed, dtype=tf.float64)
        levels = tf.clip_by_value(levels, 0.0, float(parsed.magnitude_max))
        # timm negates a signed argument when its uniform draw exceeds 0.5.
        signs = 1.0 - 2.0 * tf.cast(tf.random.stateless_uniform([layers], sign_seed, dtype=tf.float64) > 0.5,
                                    tf.float64)
        image_fill = tf.constant(image_fill, tf.uint8)
        for layer in range(layers):
            branches = [partial(_policy_branch(name, interpolation, fixed_level, _static_shape(image)), image,
                                levels[layer], signs[layer], image_fill) for name in parsed.op_names]
            # The last branch: this layer's operation is skipped.
            image = tf.switch_case(tf.where(applied[layer], choices[layer], len(parsed.op_names)),
                                   branches + [partial(tf.identity, image)])
        image = restore(image)
        image.set_shape(static_shape)
        return image

    return augment

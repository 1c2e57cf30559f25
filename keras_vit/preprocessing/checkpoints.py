"""The evaluation preprocessing of every known checkpoint, as its authors' code applied it.

Each known checkpoint's record (`keras_vit.weights.KnownCheckpoint`, written
beside its family's code) carries an `EvalConfig` read from the code that
evaluated the checkpoint, cited in its `source`, and timm's re-tuned values
(its `pretrained_cfg`), offered with `reference="timm"`, never by default;
`eval_config(name)` reads them. Hugging Face checkpoints carry their own `preprocessor_config.json`:
`keras_vit.preprocessing.huggingface.eval_config_from_huggingface` reads it.

The models of this library normalise inside and take pixels in [0, 255]:
`mean` and `std` say what normalisation the checkpoint expects (on pixels
scaled to [0, 1], as timm and Hugging Face write them), for reading, not for
applying.
"""

import dataclasses
import math
import numbers

from keras_vit.layers.validation import check_bool, check_positive_int
from keras_vit.checkpoints import KNOWN_CHECKPOINTS, find_checkpoint

CROP_MODES = ("center", "squash")
# The resize filters (PIL's and TensorFlow's names agree for these).
INTERPOLATIONS = ("bicubic", "bilinear", "nearest", "area")
# Grayscale images are converted by repeating their channel (PIL's "L" to "RGB": R = G = B).
ACCEPTED_CHANNELS = (1, 3)
REFERENCES = ("authors", "timm")

# Normalisation constants on pixels in [0, 1].
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# vit_jax's (x - 127.5) / 127.5, i.e. the range [-1, 1].
INCEPTION_MEAN = (0.5, 0.5, 0.5)
INCEPTION_STD = (0.5, 0.5, 0.5)

# The settings that change the pixels; `eval_transform` accepts these as overrides.
TRANSFORM_FIELDS = ("image_size", "interpolation", "crop_fraction", "crop_mode", "antialias", "round_to_uint8")


def check_interpolation(interpolation):
    if interpolation not in INTERPOLATIONS:
        raise ValueError(f"`interpolation` must be one of {INTERPOLATIONS}. Received: interpolation={interpolation!r}")


def check_crop_fraction(crop_fraction):
    """Raises a ValueError unless `crop_fraction` is a number in (0, 1]."""
    is_number = isinstance(crop_fraction, numbers.Real) and not isinstance(crop_fraction, bool)
    if not is_number or not 0.0 < crop_fraction <= 1.0:
        raise ValueError(
            "`crop_fraction` must be a number in (0, 1]: the fraction of the resized image's "
            f"side that the crop keeps (0.875 = 224/256). Received: crop_fraction={crop_fraction!r}"
        )


def check_crop_mode(crop_mode):
    if crop_mode not in CROP_MODES:
        raise ValueError(f"`crop_mode` must be one of {CROP_MODES}. Received: crop_mode={crop_mode!r}")


def check_eval_settings(image_size, interpolation, crop_fraction, crop_mode, antialias, round_to_uint8):
    """Raises a ValueError naming the first of the transform settings that is not accepted."""
    check_positive_int(image_size, "image_size")
    check_interpolation(interpolation)
    check_crop_fraction(crop_fraction)
    check_crop_mode(crop_mode)
    check_bool(antialias, "antialias")
    check_bool(round_to_uint8, "round_to_uint8")


def _check_channel_triple(value, name, positive):
    try:
        triple = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        triple = ()
    if len(triple) != 3 or not all(v > 0 if positive else v >= 0 for v in triple):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"`{name}` must be 3 {kind} numbers, one per RGB channel. Received: {name}={value!r}")
    return triple


def resized_size(image_size, crop_fraction):
    """The side the image is resized to before the crop: `floor(image_size / crop_fraction)`.

    timm's `transforms_imagenet_eval` computes `math.floor(img_size / crop_pct)`;
    DeiT's `int(input_size / eval_crop_ratio)` and ConViT's and Swin's
    `int(256 / 224 * input_size)` give the same sides (256 for 224, 438 for 384).
    """
    return math.floor(image_size / crop_fraction)


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """How a checkpoint's evaluation images are prepared from a decoded RGB image.

    `crop_mode="center"` resizes the shorter side to
    `floor(image_size / crop_fraction)`, keeping the aspect ratio, and crops the
    centre `image_size` square (torchvision's `Resize(int)` + `CenterCrop`);
    `"squash"` resizes both sides to `floor(image_size / crop_fraction)`,
    changing the aspect ratio, and crops the centre (with `crop_fraction=1` a
    plain resize to `(image_size, image_size)`). These are timm's crop modes
    (`timm.data.transforms_imagenet_eval`).

    Attributes:
        image_size: int. Side of the square image the model takes.
        interpolation: str. One of `"bicubic"`, `"bilinear"`, `"nearest"`,
            `"area"`. Defaults to `"bicubic"`.
        crop_fraction: float in (0, 1]. Side of the crop over side of the
            resized image (timm's `crop_pct`). Defaults to 0.875.
        crop_mode: str. `"center"` or `"squash"`. Defaults to `"center"`.
        antialias: bool. Widen the filter when downscaling, as PIL does; False
            for TensorFlow's plain resize (vit_jax). Defaults to True.
        round_to_uint8: bool. Round the resized image to integers, as PIL's
            uint8 result is; False keeps TensorFlow's float result (vit_jax).
            Defaults to True.
        mean: 3 floats. Per-channel mean the checkpoint's inputs are normalised
            with, on pixels in [0, 1]. Informative: the models normalise inside.
            Defaults to ImageNet's.
        std: 3 floats. Per-channel standard deviation, likewise. Defaults to
            ImageNet's.
        source: str. Where these values come from. Defaults to `""`.
    """

    image_size: int
    interpolation: str = "bicubic"
    crop_fraction: float = 0.875
    crop_mode: str = "center"
    antialias: bool = True
    round_to_uint8: bool = True
    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD
    source: str = ""

    def __post_init__(self):
        check_eval_settings(
            self.image_size, self.interpolation, self.crop_fraction, self.crop_mode, self.antialias,
            self.round_to_uint8,
        )
        # Frozen: normalise the triples (lists from JSON, numpy values) through object.__setattr__.
        object.__setattr__(self, "mean", _check_channel_triple(self.mean, "mean", positive=False))
        object.__setattr__(self, "std", _check_channel_triple(self.std, "std", positive=True))
        if not isinstance(self.source, str):
            raise ValueError(f"`source` must be a string. Received: source={self.source!r}")

    @property
    def resized_size(self):
        """Side the image is resized to before the centre crop (the shorter side for `"center"`)."""
        return resized_size(self.image_size, self.crop_fraction)

    def transform_settings(self):
        """The fields that change the pixels, as a dict (the `EvalTransform` layer's arguments)."""
        return {name: getattr(self, name) for name in TRANSFORM_FIELDS}

    def replace(self, **overrides):
        """A copy with some of `TRANSFORM_FIELDS` changed; `source` records the change.

        Raises:
            ValueError: for a name outside `TRANSFORM_FIELDS`, or a value the
                field does not accept.
        """
        unknown = sorted(set(overrides) - set(TRANSFORM_FIELDS))
        if unknown:
            raise ValueError(
                f"Only the transform settings {TRANSFORM_FIELDS} can be overridden. "
                f"Received: {', '.join(f'{k}={overrides[k]!r}' for k in unknown)}"
            )
        replaced = dataclasses.replace(self, **overrides)  # checks the values
        changed = ", ".join(f"{k}={v!r}" for k, v in overrides.items() if getattr(self, k) != v)
        if not changed:
            return replaced
        source = f"{self.source} (overridden: {changed})" if self.source else f"overridden: {changed}"
        return dataclasses.replace(replaced, source=source)


def resize_config(image_size, interpolation="bilinear"):
    """The transform of images resized plainly to `image_size` squared, as an `EvalConfig`.

    What `keras.utils.image_dataset_from_directory(image_size=(size, size))`
    does to each image (`tf.image.resize`: no antialiasing, float pixels, the
    aspect ratio not kept) and what the trainer evaluates datasets with that
    have no transform of their own; vit_jax evaluates its checkpoints so too.
    A model fine-tuned on such a dataset serves photos of any size with it in
    front: `keras_vit.image_classifier(resize_config(size), model=model)`.

    Args:
        image_size: int. Side of the square images.
        interpolation: str. The dataset's `interpolation`: `"bilinear"`,
            `"bicubic"`, `"nearest"` or `"area"`. Defaults to `"bilinear"`,
            Keras' default.

    Returns:
        An `EvalConfig`: a `"squash"` resize with crop fraction 1, no
        antialiasing and no rounding.

    Raises:
        ValueError: for an `image_size` or `interpolation` it does not accept.
    """
    return EvalConfig(
        image_size=image_size, interpolation=interpolation, crop_fraction=1.0, crop_mode="squash", antialias=False,
        round_to_uint8=False,
        source=f"tf.image.resize(image, ({image_size}, {image_size}), method={interpolation!r}) of the decoded "
               "image: keras.utils.image_dataset_from_directory's, train/pipeline.py's plain evaluation",
    )


def checkpoint_key(name, argument="name"):
    """`name` as it is spelled among the known checkpoints (any case matches).

    Args:
        name: str. A known checkpoint name, `"Variant/checkpoint"`.
        argument: str. The caller's argument that holds `name`, for the error.

    Returns:
        str. The registered spelling.

    Raises:
        ValueError: for an unknown name, with close names.
    """
    if not isinstance(name, str) or "/" not in name:
        raise ValueError(f"`{argument}` must be a known checkpoint name, '<Variant>/<checkpoint>' (e.g. "
                         "'DeiT_S16/imagenet'; keras_vit.list_checkpoints() lists them). "
                         f"Received: {argument}={name!r}")
    return find_checkpoint(name, argument=argument, accepts_files=False)[0]


def eval_config(name, reference="authors"):
    """The evaluation preprocessing of a known checkpoint, from its record.

    Args:
        name: str. A known checkpoint name, `"Variant/checkpoint"` (e.g.
            `"DeiT_S16/imagenet"`); case does not matter.
        reference: str. `"authors"`: the transform the checkpoint's authors
            evaluated it with (the record's `eval_config`); `"timm"`: timm's
            re-tuned `pretrained_cfg` values (`timm_eval_config`), e.g. a crop
            fraction of 0.9 for DeiT and Swin. Defaults to `"authors"`.

    Returns:
        `EvalConfig`.

    Raises:
        ValueError: for an unknown name (with close names), an unknown
            `reference`, or `"timm"` for a checkpoint timm has no values for.
    """
    if reference not in REFERENCES:
        raise ValueError(f"`reference` must be one of {REFERENCES}. Received: reference={reference!r}")
    record = KNOWN_CHECKPOINTS[checkpoint_key(name)]
    if reference == "authors":
        return record.eval_config
    if record.timm_eval_config is None:
        raise ValueError(f"timm publishes no copy of {record.name!r}, so it has no values of its own for it. "
                         f"Received: name={name!r}, reference='timm'")
    return record.timm_eval_config

"""The evaluation preprocessing of every known checkpoint, as its authors' code applied it.

Each entry of `CHECKPOINT_PREPROCESSING` was read from the code that evaluated
the checkpoint, cited in its `source`; a family in its folder keeps its own
entries there (ConViT's, Swin's, DINOv2's: `keras_vit.models.<family>`), and
registering it adds them here. The ones transcribed in this module:

- DeiT (facebookresearch/deit `datasets.py`, `build_transform`): PIL bicubic
  resize of the shorter side to `int(input_size / eval_crop_ratio)` with
  `--eval-crop-ratio 0.875` (`main.py`), then a centre crop: 224 -> 256 -> 224,
  384 -> 438 -> 384 (README_deit.md evaluates the 384 px models so).
- ViT, original release and AugReg `.npz` (google-research/vision_transformer
  `vit_jax/input_pipeline.py`, `get_data`): the evaluation branch resizes the
  whole image with `tf.image.resize(im, [image_size, image_size])` (bilinear,
  no antialiasing, float, no rounding) and maps it to [-1, 1] with
  `(im - 127.5) / 127.5`.

timm re-tuned several of these (`TIMM_PREPROCESSING`: its `pretrained_cfg`);
they are offered with `reference="timm"`, never by default. Hugging Face
checkpoints carry their own `preprocessor_config.json`:
`keras_vit.preprocessing.huggingface.eval_config_from_huggingface` reads it.

The models of this library normalise inside and take pixels in [0, 255]:
`mean` and `std` say what normalisation the checkpoint expects (on pixels
scaled to [0, 1], as timm and Hugging Face write them), for reading, not for
applying.
"""

import dataclasses
import difflib
import math
import numbers

from keras_vit.layers.validation import check_bool, check_positive_int, key_ignoring_case

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


# -- The authors' evaluation transforms -----------------------------------------------------------

_DEIT = (
    "facebookresearch/deit datasets.py build_transform (eval): transforms.Resize(int(input_size / "
    "eval_crop_ratio), interpolation=3 [bicubic]) of the PIL image, CenterCrop(input_size), "
    "Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD); main.py --eval-crop-ratio 0.875"
)
_VIT_JAX = (
    "google-research/vision_transformer vit_jax/input_pipeline.py get_data (eval branch): "
    "tf.image.resize(im, [image_size, image_size]) (bilinear, no antialiasing, float), then "
    "(im - 127.5) / 127.5"
)
_VIT_JAX_I21K = (
    f"{_VIT_JAX}; the ImageNet-21k pre-training evaluation was not released, and vit_jax feeds these "
    "checkpoints through this pipeline"
)
_VIT_JAX_AUGREG = f"{_VIT_JAX}; vit_jax/configs/augreg.py feeds the AugReg checkpoints through the same pipeline"


def _authors_center(image_size, source):
    return EvalConfig(image_size, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD, source)


def _vit_jax(image_size, source):
    return EvalConfig(image_size, "bilinear", 1.0, "squash", False, False, INCEPTION_MEAN, INCEPTION_STD, source)


def _authors_table():
    table = {}
    for name in (
        "ViT_B16/imagenet21k+imagenet2012", "ViT_B32/imagenet21k+imagenet2012", "ViT_L16/imagenet21k+imagenet2012",
        "ViT_L32/imagenet21k+imagenet2012", "R50_ViT_B16/imagenet21k+imagenet2012",
    ):
        table[name] = _vit_jax(384, _VIT_JAX)
    for name in (
        "ViT_B16/imagenet21k", "ViT_B32/imagenet21k", "ViT_L16/imagenet21k", "ViT_L32/imagenet21k",
        "ViT_H14/imagenet21k", "R50_ViT_B16/imagenet21k",
    ):
        table[name] = _vit_jax(224, _VIT_JAX_I21K)
    for variant in ("ViT_Ti16", "ViT_S16", "ViT_B16", "ViT_B32", "ViT_L16", "R_ViT_Ti16", "R26_ViT_S32"):
        table[f"{variant}/augreg"] = _vit_jax(224, _VIT_JAX_AUGREG)
    for variant, image_size in (("DeiT_Ti16", 224), ("DeiT_S16", 224), ("DeiT_B16", 224), ("DeiT_B16_384", 384)):
        table[f"{variant}/imagenet"] = _authors_center(image_size, _DEIT)
        table[f"{variant}_distilled/imagenet"] = _authors_center(image_size, _DEIT)
    return table


# `{known checkpoint name: EvalConfig}`, as the checkpoints' authors evaluated them.
CHECKPOINT_PREPROCESSING = _authors_table()
"""The evaluation transform (`EvalConfig`) of every known checkpoint, as its authors ran it."""


# -- timm's re-tuned values -----------------------------------------------------------------------

# timm's pretrained_cfg (timm/models/{vision_transformer,deit}.py,
# default_cfgs; read from timm 1.0.31): every one bicubic on PIL images, crop_mode "center"
# (timm gives "squash" only to newer checkpoints, none of these).
def _timm_tags():
    """`{name: (timm tag, image_size, crop_pct)}` for the checkpoints timm publishes."""
    tags = {
        "ViT_B16/imagenet21k+imagenet2012": ("vit_base_patch16_384.orig_in21k_ft_in1k", 384, 1.0),
        "ViT_L32/imagenet21k+imagenet2012": ("vit_large_patch32_384.orig_in21k_ft_in1k", 384, 1.0),
        "R50_ViT_B16/imagenet21k+imagenet2012": ("vit_base_r50_s16_384.orig_in21k_ft_in1k", 384, 1.0),
        "ViT_B16/imagenet21k": ("vit_base_patch16_224.orig_in21k", 224, 0.9),
        "ViT_B32/imagenet21k": ("vit_base_patch32_224.orig_in21k", 224, 0.9),
        "ViT_L16/imagenet21k": ("vit_large_patch16_224.orig_in21k", 224, 0.9),
        "ViT_L32/imagenet21k": ("vit_large_patch32_224.orig_in21k", 224, 0.9),
        "ViT_H14/imagenet21k": ("vit_huge_patch14_224.orig_in21k", 224, 0.9),
        "R50_ViT_B16/imagenet21k": ("vit_base_r50_s16_224.orig_in21k", 224, 0.9),
        "ViT_Ti16/augreg": ("vit_tiny_patch16_224.augreg_in21k_ft_in1k", 224, 0.9),
        "ViT_S16/augreg": ("vit_small_patch16_224.augreg_in21k_ft_in1k", 224, 0.9),
        "ViT_B16/augreg": ("vit_base_patch16_224.augreg_in21k_ft_in1k", 224, 0.9),
        "ViT_B32/augreg": ("vit_base_patch32_224.augreg_in21k_ft_in1k", 224, 0.9),
        "ViT_L16/augreg": ("vit_large_patch16_224.augreg_in21k_ft_in1k", 224, 0.9),
        "R_ViT_Ti16/augreg": ("vit_tiny_r_s16_p8_224.augreg_in21k_ft_in1k", 224, 0.9),
        "R26_ViT_S32/augreg": ("vit_small_r26_s32_224.augreg_in21k_ft_in1k", 224, 0.9),
        "DeiT_B16_384/imagenet": ("deit_base_patch16_384.fb_in1k", 384, 1.0),
        "DeiT_B16_384_distilled/imagenet": ("deit_base_distilled_patch16_384.fb_in1k", 384, 1.0),
    }
    for size, model in (("Ti16", "tiny"), ("S16", "small"), ("B16", "base")):
        tags[f"DeiT_{size}/imagenet"] = (f"deit_{model}_patch16_224.fb_in1k", 224, 0.9)
        tags[f"DeiT_{size}_distilled/imagenet"] = (f"deit_{model}_distilled_patch16_224.fb_in1k", 224, 0.9)
    return tags


_TIMM_TAGS = _timm_tags()
# `{known checkpoint name: timm model tag}` for the checkpoints timm publishes a copy of.
TIMM_PRETRAINED_TAGS = {name: tag for name, (tag, _, _) in _TIMM_TAGS.items()}


def _timm_table():
    table = {}
    for name, authors in CHECKPOINT_PREPROCESSING.items():
        if name in _TIMM_TAGS:
            tag, image_size, crop_pct = _TIMM_TAGS[name]
            source = f"timm pretrained_cfg of {tag!r}: crop_pct={crop_pct}, interpolation='bicubic', crop_mode='center'"
        else:
            # ViT-B/32 and ViT-L/16 of the original 384 px fine-tunes: timm publishes no copy
            # (its vit_base_patch32_384 and vit_large_patch16_384 are AugReg weights).
            tag, image_size, crop_pct = "vit_base_patch16_384.orig_in21k_ft_in1k", 384, 1.0
            source = (
                "timm publishes no copy of this checkpoint; the values of its sibling in the same release, "
                f"{tag!r}: crop_pct=1.0, interpolation='bicubic', crop_mode='center'"
            )
        table[name] = EvalConfig(
            image_size, "bicubic", crop_pct, "center", True, True, authors.mean, authors.std, source
        )
    return table


# `{known checkpoint name: EvalConfig}` with timm's re-tuned values (`reference="timm"`).
TIMM_PREPROCESSING = _timm_table()
"""The evaluation transform timm's model cards give for each known checkpoint, where they differ
from the authors' (`eval_config(..., reference="timm")`).
"""


def _known_names_hint(name):
    close = difflib.get_close_matches(str(name), list(CHECKPOINT_PREPROCESSING), n=3, cutoff=0.6)
    # Four names spread over the table (every family's, once registered), as examples.
    names = list(CHECKPOINT_PREPROCESSING)
    examples = close or names[:: max(1, len(names) // 4)][:4]
    label = "Close names" if close else "Known names include"
    return (
        f"{label}: {', '.join(repr(n) for n in examples)}; all "
        f"{len(CHECKPOINT_PREPROCESSING)} are the keys of keras_vit.preprocessing.CHECKPOINT_PREPROCESSING"
    )


def checkpoint_key(name, argument="name"):
    """`name` as it is spelled in `CHECKPOINT_PREPROCESSING` (any case matches).

    Args:
        name: str. A known checkpoint name, `"Variant/checkpoint"`.
        argument: str. The caller's argument that holds `name`, for the error.

    Returns:
        str. The registered spelling.

    Raises:
        ValueError: for an unknown name, with close or example names.
    """
    key = key_ignoring_case(name, CHECKPOINT_PREPROCESSING)
    if key is not None:
        return key
    raise ValueError(f"`{argument}` must be a known checkpoint name. {_known_names_hint(name)}. "
                     f"Received: {argument}={name!r}")


def eval_config(name, reference="authors"):
    """The evaluation preprocessing of a known checkpoint.

    Args:
        name: str. A known checkpoint name, `"Variant/checkpoint"` (e.g.
            `"DeiT_S16/imagenet"`); case does not matter.
        reference: str. `"authors"`: the transform the checkpoint's authors
            evaluated it with (`CHECKPOINT_PREPROCESSING`); `"timm"`: timm's
            re-tuned `pretrained_cfg` values (`TIMM_PREPROCESSING`), e.g. a crop
            fraction of 0.9 for DeiT and Swin. Defaults to `"authors"`.

    Returns:
        `EvalConfig`.

    Raises:
        ValueError: for an unknown name (with close or example names) or an
            unknown `reference`.
    """
    if reference not in REFERENCES:
        raise ValueError(f"`reference` must be one of {REFERENCES}. Received: reference={reference!r}")
    table = CHECKPOINT_PREPROCESSING if reference == "authors" else TIMM_PREPROCESSING
    return table[checkpoint_key(name)]

"""A Hugging Face `preprocessor_config.json` as an `EvalConfig`.

Hugging Face checkpoints carry their evaluation transform in that file
(`ViTImageProcessor`, `DeiTImageProcessor`, ...): resize, crop and normalisation.
"""

import json
import math
import os

from keras_vit.preprocessing.checkpoints import (
    INCEPTION_MEAN,
    INCEPTION_STD,
    EvalConfig,
)


# PIL's resampling codes, as Hugging Face stores `resample`.
_PIL_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}
_PIL_RESAMPLE_NAMES = {1: "LANCZOS", 4: "BOX", 5: "HAMMING"}
# The image processors whose semantics are read here, with their class defaults
# (transformers' image_processing_vit.py and image_processing_deit.py).
_HF_PROCESSORS = {
    "ViTImageProcessor": dict(
        do_resize=True, size={"height": 224, "width": 224}, resample=2, do_center_crop=False,
        image_mean=INCEPTION_MEAN, image_std=INCEPTION_STD,
    ),
    "DeiTImageProcessor": dict(
        do_resize=True, size={"height": 256, "width": 256}, resample=3, do_center_crop=True,
        crop_size={"height": 224, "width": 224}, image_mean=INCEPTION_MEAN, image_std=INCEPTION_STD,
    ),
}
for _base in ("ViT", "DeiT"):
    for _suffix in ("FeatureExtractor", "ImageProcessorFast", "ImageProcessorPil"):
        _HF_PROCESSORS[f"{_base}{_suffix}"] = _HF_PROCESSORS[f"{_base}ImageProcessor"]


def _is_side(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _hf_side(value, field):
    """`(kind, side)` of a Hugging Face size: ("square", n) or ("shortest_edge", n)."""
    if _is_side(value):
        return "square", value  # an int means (n, n) for the ViT and DeiT processors
    if isinstance(value, dict) and all(_is_side(v) for v in value.values()):
        if set(value) == {"height", "width"} and value["height"] == value["width"]:
            return "square", value["height"]
        if set(value) == {"shortest_edge"}:
            return "shortest_edge", value["shortest_edge"]
    raise ValueError(
        f"`{field}` in the preprocessor config must be a square size: an int, "
        f'{{"height": n, "width": n}} or {{"shortest_edge": n}} (size only). Received: {field}={value!r}'
    )


def _fraction_for(crop, resized):
    """The largest float `f` with `floor(crop / f) == resized` (so that the transform resizes to `resized`)."""
    fraction = crop / resized
    while math.floor(crop / fraction) < resized:
        fraction = math.nextafter(fraction, 0.0)
    return fraction


def eval_config_from_huggingface(path):
    """Reads a Hugging Face `preprocessor_config.json` into an `EvalConfig`.

    Reads the fields of transformers' `ViTImageProcessor` and
    `DeiTImageProcessor` (and their feature-extractor, fast and PIL forms), with
    their class defaults for absent fields: `do_resize`, `size` (`{"height",
    "width"}` of one side, an int, or `{"shortest_edge"}`), `resample` (PIL
    codes: 0 nearest, 2 bilinear, 3 bicubic), `do_center_crop`, `crop_size`,
    `do_rescale`/`rescale_factor` (1/255), `do_normalize`, `image_mean`,
    `image_std`. A `{"height", "width"}` size resizes the whole image
    (`crop_mode="squash"`), a `shortest_edge` size keeps the aspect ratio
    (`"center"`); a centre crop then keeps `crop_size`. Hugging Face resizes
    with antialiasing and uint8 results (PIL, or torchvision on uint8 tensors).

    Args:
        path: str or path-like. The JSON file, or a directory holding
            `preprocessor_config.json` (e.g. a `huggingface_hub.snapshot_download`).

    Returns:
        `EvalConfig`.

    Raises:
        ValueError: naming a field whose value this transform cannot reproduce
            (an unknown processor type, a non-square size, no resize, a
            resampling filter other than nearest/bilinear/bicubic, a rescale
            other than 1/255), or a file that is not a JSON object.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "preprocessor_config.json")
    with open(path, encoding="utf-8") as file:
        try:
            config = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"`path` must be a JSON file. Received: path={path!r} ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"`path` must hold a JSON object of preprocessor settings. Received: path={path!r}")
    kind = config.get("image_processor_type") or config.get("feature_extractor_type")
    if kind not in _HF_PROCESSORS:
        raise ValueError(
            "`image_processor_type` in the preprocessor config must be one of "
            f"{sorted(_HF_PROCESSORS)}. Received: image_processor_type={kind!r} (in {path})"
        )
    settings = {**_HF_PROCESSORS[kind], **config}

    if settings["do_resize"] is not True:
        raise ValueError(
            "`do_resize` in the preprocessor config must be true: images of any size must come out "
            f"of one size. Received: do_resize={settings['do_resize']!r} (in {path})"
        )
    resample = settings["resample"]
    if resample not in _PIL_RESAMPLE or isinstance(resample, bool):
        name = _PIL_RESAMPLE_NAMES.get(resample)
        received = f"{resample!r} ({name})" if name else repr(resample)
        raise ValueError(
            f"`resample` in the preprocessor config must be a PIL code among {_PIL_RESAMPLE}. "
            f"Received: resample={received} (in {path})"
        )
    if settings.get("do_rescale", True):
        factor = settings.get("rescale_factor", 1 / 255)
        if not isinstance(factor, (int, float)) or not math.isclose(factor, 1 / 255, rel_tol=1e-6):
            raise ValueError(
                "`rescale_factor` in the preprocessor config must be 1/255 (mean and std are then "
                f"on pixels in [0, 1]). Received: rescale_factor={factor!r} (in {path})"
            )
    else:
        raise ValueError(
            "`do_rescale` in the preprocessor config must be true (mean and std are then on pixels "
            f"in [0, 1]). Received: do_rescale={settings['do_rescale']!r} (in {path})"
        )
    if settings.get("do_normalize", True):
        mean, std = settings["image_mean"], settings["image_std"]
    else:
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)

    mode, side = _hf_side(settings["size"], "size")
    if settings["do_center_crop"]:
        crop_mode, crop = _hf_side(settings["crop_size"], "crop_size")
        if crop_mode != "square":
            raise ValueError(
                "`crop_size` in the preprocessor config must be a square size. "
                f"Received: crop_size={settings['crop_size']!r} (in {path})"
            )
        if crop > side:
            raise ValueError(
                "`crop_size` in the preprocessor config must not exceed `size` (Hugging Face would pad). "
                f"Received: crop_size={settings['crop_size']!r}, size={settings['size']!r} (in {path})"
            )
        image_size, fraction = crop, _fraction_for(crop, side)
    elif mode == "square":
        image_size, fraction = side, 1.0
    else:
        raise ValueError(
            "A `shortest_edge` size without a centre crop keeps each image's aspect ratio; this transform "
            f"gives square images. Received: size={settings['size']!r}, do_center_crop=false (in {path})"
        )
    return EvalConfig(
        image_size=image_size,
        interpolation=_PIL_RESAMPLE[resample],
        crop_fraction=fraction,
        crop_mode="squash" if mode == "square" else "center",
        antialias=True,
        round_to_uint8=True,
        mean=mean,
        std=std,
        source=f"Hugging Face {kind} settings in {path}",
    )

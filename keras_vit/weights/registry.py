"""Known checkpoints: public addresses, hashes, and the model settings they need.

Names are `"<Variant>/<checkpoint>"`, e.g. `"ViT_B16/imagenet21k+imagenet2012"`.
Files are fetched with `keras.utils.get_file` into the Keras cache
(`~/.keras/models/keras_vit/`), and every use of a cached file is verified:

- An entry with a pinned `sha256` is checked against it after every fetch; a
  file whose hash differs is removed and refused.
- No entry has a pinned hash yet (none could be established from a source
  independent of the download itself), so all are trust-on-first-use: the
  sha256 of the file is recorded beside it (`<file>.sha256`) at its first use
  and every later use recomputes and compares it, refusing a file that changed
  since. This detects a cached file that was corrupted or replaced; it cannot
  tell whether the first download was the genuine file.

Independently, the readers verify every zip CRC of an `.npz` and the declared
size and header of a `.safetensors`, and a known checkpoint is checked against
the model's architecture before anything is downloaded.
"""

import dataclasses
import os
import re

import keras

from keras_vit.architectures import ABLATION_DEFAULTS, ARCHITECTURES, architecture, differing_keys, mismatches
from keras_vit.files import file_sha256, write_text_atomically
from keras_vit.layers.validation import key_ignoring_case


# Cache root for downloads; `None` is Keras' own (`~/.keras` or $KERAS_HOME).
CACHE_DIR = None


@dataclasses.dataclass(frozen=True)
class KnownCheckpoint:
    """A published checkpoint.

    Attributes:
        url: str. Where to download it from.
        sha256: str or None. The file's pinned sha256 (hex); None for
            trust-on-first-use verification (see the module docstring).
        config: dict. Builder arguments the checkpoint was trained with (e.g.
            `num_classes`, `representation_size`, `image_size`, `num_channels`);
            they are the defaults when a builder is given this checkpoint's name.
            Its architecture is that of the variant the name starts with.
        top1: float or None. The ImageNet-1k validation top-1 (%) its authors
            report for this file; None where they report none for it (a
            pre-training head, a features-only model, a file whose figure was
            not published beside it).
        top1_source: str. Where `top1` is reported (paper table or release
            page), or why there is none. Defaults to `""`.
    """

    url: str
    sha256: str = None
    config: dict = dataclasses.field(default_factory=dict)
    top1: float = None
    top1_source: str = ""


_VIT = "https://storage.googleapis.com/vit_models"
_AUGREG = f"{_VIT}/augreg"
_HF = "https://huggingface.co/timm"
# Every known checkpoint takes RGB images; stated so that a model of other
# channels is refused before the download, not after it.
_RGB = {"num_channels": 3}
# Every ViT, hybrid and DeiT checkpoint has learned 1-D position embeddings
# added at the stem (ViT Sec. 3.1), stated so that a model of another row or
# column of ViT Table 8 is refused before the download.
_LEARNED_1D = {**_RGB, "position_embedding": "learned_1d", "position_embedding_at": "stem"}
# Fine-tuned on ImageNet-1k at 384 px (ViT Table 2, App. B.1.1).
_FT384 = {**_LEARNED_1D, "num_classes": 1000, "image_size": 384}
# Pre-trained on ImageNet-21k: 21843 classes and a pre-logits layer (ViT Sec. 3.1).
_I21K = {**_LEARNED_1D, "num_classes": 21843, "image_size": 224}


# Where each release reports its checkpoints' ImageNet-1k top-1, or why there is no figure.
_VIT_TABLE_5 = "ViT paper, Table 5: ImageNet-21k pre-training, fine-tuned at 384 px"
_NO_HYBRID_FIGURE = "not reported: ViT's Table 5 lists the plain ViTs only"
_PRETRAINING_HEAD = "none: an ImageNet-21k pre-training head"
_AUGREG_224 = ("not reported here: vision_transformer's README gives the AugReg 384 px fine-tunes only, and the "
               "release's index.csv (adapt_final_test) could not be read where this table was made")
_DEIT_ZOO = "facebookresearch/deit README_deit.md, Model Zoo, acc@1"


def _original(name, top1=None):
    """The original release's ImageNet-1k fine-tune of `name` (e.g. `"ViT-B_16"`)."""
    source = _VIT_TABLE_5 if top1 is not None else _NO_HYBRID_FIGURE
    return KnownCheckpoint(f"{_VIT}/imagenet21k+imagenet2012/{name}.npz", config=_FT384, top1=top1,
                           top1_source=source)


def _i21k(name, width):
    """The original release's ImageNet-21k pre-training of `name`, with its pre-logits layer of `width`."""
    return KnownCheckpoint(f"{_VIT}/imagenet21k/{name}.npz", config={**_I21K, "representation_size": width},
                           top1_source=_PRETRAINING_HEAD)


def _augreg(name):
    return KnownCheckpoint(f"{_AUGREG}/{name}.npz", config={**_LEARNED_1D, "num_classes": 1000, "image_size": 224},
                           top1_source=_AUGREG_224)


def timm_hub(model_tag, top1=None, top1_source="", **config):
    """A checkpoint on the timm hub (`huggingface.co/timm/<model_tag>`), of RGB images and `config`."""
    return KnownCheckpoint(f"{_HF}/{model_tag}/resolve/main/model.safetensors", config={**_RGB, **config},
                           top1=top1, top1_source=top1_source)


def _deit_release(variant, model, top1, top1_distilled, image_size=224):
    """A DeiT size's ImageNet-1k checkpoints, plain and distilled.

    `{variant}/imagenet` and `{variant}_distilled/imagenet`, with the top-1 of each.
    """
    config = dict(_LEARNED_1D, num_classes=1000, image_size=image_size, preprocessing="imagenet")
    return {
        f"{variant}/imagenet": timm_hub(f"{model}_patch16_{image_size}.fb_in1k", **config, top1=top1,
                                        top1_source=_DEIT_ZOO),
        f"{variant}_distilled/imagenet": timm_hub(f"{model}_distilled_patch16_{image_size}.fb_in1k", **config,
                                                  top1=top1_distilled, top1_source=_DEIT_ZOO),
    }


KNOWN_CHECKPOINTS = {
    # Original release (ViT paper): ImageNet-21k pre-training, ImageNet-1k fine-tuning.
    "ViT_B16/imagenet21k+imagenet2012": _original("ViT-B_16", 83.97),
    "ViT_B32/imagenet21k+imagenet2012": _original("ViT-B_32", 81.28),
    "ViT_L16/imagenet21k+imagenet2012": _original("ViT-L_16", 85.15),
    "ViT_L32/imagenet21k+imagenet2012": _original("ViT-L_32", 80.99),
    "R50_ViT_B16/imagenet21k+imagenet2012": _original("R50+ViT-B_16"),
    "ViT_B16/imagenet21k": _i21k("ViT-B_16", 768),
    "ViT_B32/imagenet21k": _i21k("ViT-B_32", 768),
    "ViT_L16/imagenet21k": _i21k("ViT-L_16", 1024),
    "ViT_L32/imagenet21k": _i21k("ViT-L_32", 1024),
    "ViT_H14/imagenet21k": _i21k("ViT-H_14", 1280),
    "R50_ViT_B16/imagenet21k": _i21k("R50+ViT-B_16", 768),
    # AugReg release ("How to train your ViT?", Steiner et al. 2021), 224 px fine-tunes.
    "ViT_Ti16/augreg": _augreg(
        "Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224"
    ),
    "ViT_S16/augreg": _augreg(
        "S_16-i21k-300ep-lr_0.001-aug_light1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224"
    ),
    "ViT_B16/augreg": _augreg(
        "B_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.01-res_224"
    ),
    "ViT_B32/augreg": _augreg(
        "B_32-i21k-300ep-lr_0.001-aug_medium1-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224"
    ),
    "ViT_L16/augreg": _augreg(
        "L_16-i21k-300ep-lr_0.001-aug_medium1-wd_0.1-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.01-res_224"
    ),
    "R_ViT_Ti16/augreg": _augreg(
        "R_Ti_16-i21k-300ep-lr_0.001-aug_none-wd_0.03-do_0.0-sd_0.0--imagenet2012-steps_20k-lr_0.03-res_224"
    ),
    "R26_ViT_S32/augreg": _augreg(
        "R26_S_32-i21k-300ep-lr_0.001-aug_light0-wd_0.03-do_0.1-sd_0.1--imagenet2012-steps_20k-lr_0.03-res_224"
    ),
    # DeiT (Touvron et al. 2021), ImageNet-1k, as published on the timm hub
    # (`deit_*_patch16_*.fb_in1k`; the distilled ones with `dist_token` and
    # `head_dist`). Trained on ImageNet mean/std inputs.
    **_deit_release("DeiT_Ti16", "deit_tiny", 72.2, 74.5),
    **_deit_release("DeiT_S16", "deit_small", 79.9, 81.2),
    **_deit_release("DeiT_B16", "deit_base", 81.8, 83.4),
    **_deit_release("DeiT_B16_384", "deit_base", 82.9, 85.2, image_size=384),
}
"""Every checkpoint `weights=` can name, as `"<variant>/<name>"` (e.g. `"ViT_B16/imagenet21k"`):
a `KnownCheckpoint` with where it is downloaded from, its pinned SHA-256 (or None: trust on
first use), the settings it was trained with and the top-1 its authors report. The site's
checkpoint table is generated from it (`keras_vit.catalog`).
"""


def known_checkpoint(variant, name):
    """Returns the `KnownCheckpoint` for `name` ("Variant/ckpt", or "ckpt" with `variant`), or None."""
    key = known_checkpoint_key(variant, name)
    return None if key is None else KNOWN_CHECKPOINTS[key]


def known_checkpoint_key(variant, name):
    """The `KNOWN_CHECKPOINTS` key that `name` means (case-insensitive), or None."""
    if not isinstance(name, str):
        return None
    return key_ignoring_case(name if "/" in name else f"{variant}/{name}", KNOWN_CHECKPOINTS)


def is_checkpoint_file(weights):
    """True when `weights` is a path (str or `os.PathLike`) that exists."""
    return isinstance(weights, (str, os.PathLike)) and os.path.exists(weights)


def find_checkpoint(weights, variant=None):
    """Resolves a known checkpoint name; nothing is downloaded.

    Args:
        weights: The `weights` argument: `"Variant/ckpt"`, or `"ckpt"` for a
            model of `variant`.
        variant: str or None. The variant (or model) name that a short name
            belongs to; compared case-insensitively.

    Returns:
        Tuple `(key, KnownCheckpoint)`, `key` as spelled in `KNOWN_CHECKPOINTS`.

    Raises:
        ValueError: for anything else, listing the known names (and those of
            `variant`).
    """
    if not isinstance(weights, (str, os.PathLike)):
        raise ValueError(
            "`weights` must be a checkpoint file path or a known checkpoint name. "
            f"Received: weights={weights!r} (of type {type(weights).__name__})"
        )
    key = known_checkpoint_key(variant or "", weights)
    if key is not None:
        return key, KNOWN_CHECKPOINTS[key]
    own = [k for k in KNOWN_CHECKPOINTS if variant and k.split("/")[0].lower() == variant.lower()]
    hint = f"; {own[0].split('/')[0]}'s are {[k.split('/', 1)[1] for k in own]}" if own else ""
    raise ValueError(
        "`weights` must be a checkpoint file or a known checkpoint name, one of "
        f"{sorted(KNOWN_CHECKPOINTS)} (or its part after '/' for a model built by "
        f"that variant's builder{hint}). Received: weights={os.fspath(weights)!r}"
    )


def checkpoint_architecture(key):
    """The architecture (see `keras_vit.architectures`) of known checkpoint `key`, or None.

    None for an entry whose variant is not in the table (nothing to compare).
    """
    variant = key.split("/")[0]
    if variant not in ARCHITECTURES:
        return None
    builder, config = ARCHITECTURES[variant]
    return architecture(builder, {**config, **KNOWN_CHECKPOINTS[key].config})


def check_fits(key, actual, target):
    """Raises unless known checkpoint `key` fits the architecture `actual`; downloads nothing.

    Args:
        key: str. A `KNOWN_CHECKPOINTS` key.
        actual: dict. The architecture of the model to load into (see
            `keras_vit.architectures.architecture`), or None to skip.
        target: str. The model or variant, for the message.

    Raises:
        ValueError: naming the checkpoint, its variant, the model and every
            field that differs; for an ablation switch off its published value
            (`keras_vit.architectures.ABLATION_DEFAULTS`), the values of the
            builder's switches that `weights` needs and those of the model.
    """
    expected = checkpoint_architecture(key)
    if expected is None or actual is None:
        return
    differing = differing_keys(expected, actual)
    if not differing:
        return
    variant = key.split("/")[0]
    same_builder = expected["builder"] == actual.get("builder")
    switches = ABLATION_DEFAULTS.get(expected["builder"], {}) if same_builder else {}

    def without_switches(fields):
        return {k: v for k, v in fields.items() if k not in switches}

    problems = mismatches(without_switches(expected), without_switches(actual))
    reasons = [f"{', '.join(problems)} (checkpoint vs model)"] if problems else []
    if any(k in switches for k in differing):
        # All of the builder's switches, so that the message shows the whole call that fits.
        shown = [k for k in switches if k in actual]
        reasons.append(
            f"`weights` needs {', '.join(f'{k}={expected[k]!r}' for k in shown)} (the published "
            f"model's ablation switches) and the model has {', '.join(f'{k}={actual[k]!r}' for k in shown)}, "
            "whose weights differ from the checkpoint's in shape or meaning"
        )
    raise ValueError(
        f"The checkpoint {key!r} is one of {variant} and does not fit {target}: {'; '.join(reasons)}. "
        f"Nothing was downloaded. keras_vit.{variant}(weights={key!r}) builds a model that it fits."
    )


def _cache_name(checkpoint):
    fname = checkpoint.url.rstrip("/").split("/")[-1]
    if fname == "model.safetensors":  # hub files all share one name
        fname = checkpoint.url.split("/")[-4] + ".safetensors"
    return fname


class CheckpointDownloadError(RuntimeError):
    """A known checkpoint could not be downloaded; the message names the local routes."""


def cached_path(checkpoint, cache_dir=None):
    """Where the download of `checkpoint` is kept: `<cache>/models/keras_vit/<file name>`.

    Args:
        checkpoint: `KnownCheckpoint`.
        cache_dir: str or None. Cache root; defaults to `CACHE_DIR`, else Keras's
            (`$KERAS_HOME`, or `~/.keras`).
    """
    root = cache_dir or CACHE_DIR or os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")
    return os.path.join(os.path.expanduser(root), "models", "keras_vit", _cache_name(checkpoint))


def fetch(checkpoint, cache_dir=None):
    """Downloads a known checkpoint into the Keras cache (once) and returns its verified path.

    Args:
        checkpoint: `KnownCheckpoint`.
        cache_dir: str or None. Cache root; defaults to `CACHE_DIR`.

    Raises:
        CheckpointDownloadError: if the file is not cached and cannot be
            downloaded (offline, say); the message says from where, and the
            two local routes: the file's path as `weights=`, or the file put
            where the cache keeps it.
        ValueError: if the file's sha256 differs from the pinned one (the file
            is removed, so the next call downloads it again), or, for an entry
            without a pin, from the one recorded at its first use.
    """
    cache_dir = cache_dir or CACHE_DIR
    if cache_dir is not None:
        # get_file falls back to /tmp/.keras for a root that does not exist yet.
        os.makedirs(cache_dir, exist_ok=True)
    try:
        path = keras.utils.get_file(
            fname=_cache_name(checkpoint),
            origin=checkpoint.url,
            cache_dir=cache_dir,
            cache_subdir=os.path.join("models", "keras_vit"),
        )
    except Exception as error:  # get_file raises a bare Exception for URL and HTTP errors; it removes the part
        reason = str(error).split(" -- ", 1)[-1] or type(error).__name__
        raise CheckpointDownloadError(
            f"The checkpoint could not be downloaded from {checkpoint.url} ({reason}). Offline, fetch the file "
            f"on another machine and either pass its path (weights='/path/to/{_cache_name(checkpoint)}', or "
            f"--pretrained= in train/main.py) or put it at {cached_path(checkpoint, cache_dir)}, where it is "
            "found without a download."
        ) from None
    actual = file_sha256(path)
    if checkpoint.sha256 is not None:
        _check_pinned(checkpoint, path, actual)
    else:
        _check_recorded(path, actual)
    return path


def _check_pinned(checkpoint, path, actual):
    if actual != checkpoint.sha256:
        os.remove(path)
        raise ValueError(
            f"The download of {checkpoint.url} is corrupt or incomplete: its sha256 "
            f"is not the recorded {checkpoint.sha256} but {actual}. The file {path} "
            "was removed; try again."
        )


def _check_recorded(path, actual):
    """Trust on first use: records the hash beside `path`, or compares with the record."""
    record = f"{path}.sha256"
    if not os.path.exists(record):
        write_text_atomically(record, f"{actual}  {os.path.basename(path)}\n")
        return
    with open(record) as f:
        recorded = f.read().split()[:1]
    if not recorded or not re.fullmatch(r"[0-9a-f]{64}", recorded[0]):
        raise ValueError(
            f"The hash record {record} of the cached checkpoint {path} is damaged "
            f"(expected a sha256 in hex). Delete both files to download the checkpoint again."
        )
    if recorded[0] != actual:
        raise ValueError(
            f"The cached checkpoint {path} changed since its first use: its sha256 "
            f"is {actual} but {recorded[0]} was recorded in {record}. Refusing to "
            f"load it. Delete {path} to download it again (and {record} as well if "
            "the published file itself was replaced)."
        )

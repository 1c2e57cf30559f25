"""Known checkpoints: public addresses, hashes, and the model settings they need.

Names are `"<Variant>/<checkpoint>"`, e.g. `"ViT_B16/imagenet21k+imagenet2012"`.
Files are fetched with `keras.utils.get_file` into the Keras cache
(`~/.keras/models/keras_vit/`). Where a sha256 is recorded, a download whose hash
differs (corrupt or partial) raises and is not used. Entries whose sha256 is not
yet recorded (`None`) are checked structurally instead: the readers verify every
zip CRC of an `.npz` and the declared size of a `.safetensors`.
"""

import dataclasses
import hashlib
import os

import keras


# Cache root for downloads; `None` is Keras' own (`~/.keras` or $KERAS_HOME).
CACHE_DIR = None


@dataclasses.dataclass(frozen=True)
class KnownCheckpoint:
    """A published checkpoint.

    Attributes:
        url: str. Where to download it from.
        sha256: str or None. Hash of the file, when recorded.
        config: dict. Builder arguments the checkpoint was trained with (e.g.
            `num_classes`, `representation_size`, `image_size`); they are the
            defaults when a builder is given this checkpoint's name.
    """

    url: str
    sha256: str = None
    config: dict = dataclasses.field(default_factory=dict)


_VIT = "https://storage.googleapis.com/vit_models"
_AUGREG = f"{_VIT}/augreg"
_HF = "https://huggingface.co/timm"
# Fine-tuned on ImageNet-1k at 384 px (ViT Table 2, App. B.1.1).
_FT384 = {"num_classes": 1000, "image_size": 384}
# Pre-trained on ImageNet-21k: 21843 classes and a pre-logits layer (ViT Sec. 3.1).
_I21K = {"num_classes": 21843, "image_size": 224}


def _i21k(width):
    return {**_I21K, "representation_size": width}


def _augreg(name):
    return KnownCheckpoint(f"{_AUGREG}/{name}.npz", config={"num_classes": 1000, "image_size": 224})


def _timm_hub(model_tag, **config):
    return KnownCheckpoint(f"{_HF}/{model_tag}/resolve/main/model.safetensors", config=config)


KNOWN_CHECKPOINTS = {
    # Original release (ViT paper): ImageNet-21k pre-training, ImageNet-1k fine-tuning.
    "ViT_B16/imagenet21k+imagenet2012": KnownCheckpoint(f"{_VIT}/imagenet21k+imagenet2012/ViT-B_16.npz", config=_FT384),
    "ViT_B32/imagenet21k+imagenet2012": KnownCheckpoint(f"{_VIT}/imagenet21k+imagenet2012/ViT-B_32.npz", config=_FT384),
    "ViT_L16/imagenet21k+imagenet2012": KnownCheckpoint(f"{_VIT}/imagenet21k+imagenet2012/ViT-L_16.npz", config=_FT384),
    "ViT_L32/imagenet21k+imagenet2012": KnownCheckpoint(f"{_VIT}/imagenet21k+imagenet2012/ViT-L_32.npz", config=_FT384),
    "R50_ViT_B16/imagenet21k+imagenet2012": KnownCheckpoint(
        f"{_VIT}/imagenet21k+imagenet2012/R50+ViT-B_16.npz", config=_FT384
    ),
    "ViT_B16/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/ViT-B_16.npz", config=_i21k(768)),
    "ViT_B32/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/ViT-B_32.npz", config=_i21k(768)),
    "ViT_L16/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/ViT-L_16.npz", config=_i21k(1024)),
    "ViT_L32/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/ViT-L_32.npz", config=_i21k(1024)),
    "ViT_H14/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/ViT-H_14.npz", config=_i21k(1280)),
    "R50_ViT_B16/imagenet21k": KnownCheckpoint(f"{_VIT}/imagenet21k/R50+ViT-B_16.npz", config=_i21k(768)),
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
    # ConViT (d'Ascoli et al. 2021), ImageNet-1k, as published on the timm hub.
    "ConViT_Ti/imagenet": _timm_hub("convit_tiny.fb_in1k", num_classes=1000, image_size=224),
    "ConViT_S/imagenet": _timm_hub("convit_small.fb_in1k", num_classes=1000, image_size=224),
    "ConViT_B/imagenet": _timm_hub("convit_base.fb_in1k", num_classes=1000, image_size=224),
}


def known_checkpoint(variant, name):
    """Returns the `KnownCheckpoint` for `name` ("Variant/ckpt", or "ckpt" with `variant`), or None."""
    key = name if "/" in name else f"{variant}/{name}"
    lowered = {k.lower(): v for k, v in KNOWN_CHECKPOINTS.items()}
    return lowered.get(key.lower())


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(checkpoint, cache_dir=None):
    """Downloads a known checkpoint into the Keras cache (once) and returns its path.

    Args:
        checkpoint: `KnownCheckpoint`.
        cache_dir: str or None. Cache root; defaults to `CACHE_DIR`.

    Raises:
        ValueError: if the file's sha256 differs from the recorded one; the bad
            file is removed so that the next call downloads it again.
    """
    fname = checkpoint.url.rstrip("/").split("/")[-1]
    if fname == "model.safetensors":  # hub files all share one name
        fname = checkpoint.url.split("/")[-4] + ".safetensors"
    cache_dir = cache_dir or CACHE_DIR
    if cache_dir is not None:
        # get_file falls back to /tmp/.keras for a root that does not exist yet.
        os.makedirs(cache_dir, exist_ok=True)
    path = keras.utils.get_file(
        fname=fname,
        origin=checkpoint.url,
        cache_dir=cache_dir,
        cache_subdir=os.path.join("models", "keras_vit"),
    )
    if checkpoint.sha256 is not None and _sha256(path) != checkpoint.sha256:
        os.remove(path)
        raise ValueError(
            f"The download of {checkpoint.url} is corrupt or incomplete: its sha256 "
            f"is not the recorded {checkpoint.sha256}. The file was removed; try again."
        )
    return path

"""ViT's, the hybrid's and DeiT's published checkpoints: one record per file.

Three releases:

- **The original ViT release** (Dosovitskiy et al. 2021), official `.npz`
  files: ImageNet-21k pre-training (`imagenet21k`, with its pre-logits layer)
  and its ImageNet-1k fine-tune at 384 px (`imagenet21k+imagenet2012`).
- **AugReg** ("How to train your ViT?", Steiner et al. 2021), `.npz`: the
  224 px ImageNet-1k fine-tunes (`augreg`).
- **DeiT** (Touvron et al. 2021), ImageNet-1k, as published on the timm hub
  (`deit_*_patch16_*.fb_in1k`; the distilled ones with `dist_token` and
  `head_dist`), trained on ImageNet mean/std inputs.

Each record carries the evaluation transform its authors ran, read from
their code:

- ViT, original release and AugReg (google-research/vision_transformer
  `vit_jax/input_pipeline.py`, `get_data`): the evaluation branch resizes the
  whole image with `tf.image.resize(im, [image_size, image_size])` (bilinear,
  no antialiasing, float, no rounding) and maps it to [-1, 1] with
  `(im - 127.5) / 127.5`.
- DeiT (facebookresearch/deit `datasets.py`, `build_transform`): PIL bicubic
  resize of the shorter side to `int(input_size / eval_crop_ratio)` with
  `--eval-crop-ratio 0.875` (`main.py`), then a centre crop: 224 -> 256 -> 224,
  384 -> 438 -> 384 (README_deit.md evaluates the 384 px models so).

and timm's re-tuned values for the same weights (its `pretrained_cfg` in
timm/models/{vision_transformer,deit}.py `default_cfgs`, read from timm
1.0.31: every one bicubic on PIL images, `crop_mode` "center").
"""

import dataclasses

from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD, INCEPTION_MEAN, INCEPTION_STD, EvalConfig
from keras_vit.weights.conversion import OFFICIAL_VIT, TIMM_VIT
from keras_vit.checkpoints import RGB, KnownCheckpoint, named_records, timm_hub

_VIT = "https://storage.googleapis.com/vit_models"
_AUGREG = f"{_VIT}/augreg"
# Every ViT, hybrid and DeiT checkpoint has learned 1-D position embeddings
# added at the stem (ViT Sec. 3.1), stated so that a model of another row or
# column of ViT Table 8 is refused before the download.
_LEARNED_1D = {**RGB, "position_embedding": "learned_1d", "position_embedding_at": "stem"}
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

# -- The authors' evaluation transforms.
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


def _vit_jax(image_size, source):
    return EvalConfig(image_size, "bilinear", 1.0, "squash", False, False, INCEPTION_MEAN, INCEPTION_STD, source)


def _deit_center(image_size):
    return EvalConfig(image_size, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD, _DEIT)


def _timm(authors, tag, image_size, crop_pct, source=None):
    """timm's `pretrained_cfg` transform of `tag`: bicubic, centre crop of `crop_pct`, the authors' mean and std."""
    source = source or (f"timm pretrained_cfg of {tag!r}: crop_pct={crop_pct}, interpolation='bicubic', "
                        "crop_mode='center'")
    return EvalConfig(image_size, "bicubic", crop_pct, "center", True, True, authors.mean, authors.std, source)


def _npz(url, config, eval_config, timm_tag, timm_crop_pct, top1=None, top1_source=""):
    """A record of an official `.npz` file, with timm's copy of it (`timm_tag`) if timm publishes one."""
    if timm_tag is None:
        # ViT-B/32 and ViT-L/16 of the original 384 px fine-tunes: timm publishes no copy
        # (its vit_base_patch32_384 and vit_large_patch16_384 are AugReg weights).
        sibling = "vit_base_patch16_384.orig_in21k_ft_in1k"
        timm = _timm(eval_config, sibling, 384, 1.0, source=(
            "timm publishes no copy of this checkpoint; the values of its sibling in the same release, "
            f"{sibling!r}: crop_pct=1.0, interpolation='bicubic', crop_mode='center'"))
    else:
        timm = _timm(eval_config, timm_tag, eval_config.image_size, timm_crop_pct)
    return KnownCheckpoint(url, config=config, top1=top1, top1_source=top1_source, layout=OFFICIAL_VIT,
                           eval_config=eval_config, timm_eval_config=timm, timm_tag=timm_tag)


def _original(name, timm_tag, top1=None):
    """The original release's ImageNet-1k fine-tune of `name` (e.g. `"ViT-B_16"`), at 384 px."""
    return _npz(f"{_VIT}/imagenet21k+imagenet2012/{name}.npz", _FT384, _vit_jax(384, _VIT_JAX), timm_tag, 1.0,
                top1=top1, top1_source=_VIT_TABLE_5 if top1 is not None else _NO_HYBRID_FIGURE)


def _i21k(name, width, timm_tag):
    """The original release's ImageNet-21k pre-training of `name`, with its pre-logits layer of `width`."""
    return _npz(f"{_VIT}/imagenet21k/{name}.npz", {**_I21K, "representation_size": width},
                _vit_jax(224, _VIT_JAX_I21K), timm_tag, 0.9, top1_source=_PRETRAINING_HEAD)


def _augreg(name, timm_tag):
    return _npz(f"{_AUGREG}/{name}.npz", {**_LEARNED_1D, "num_classes": 1000, "image_size": 224},
                _vit_jax(224, _VIT_JAX_AUGREG), timm_tag, 0.9, top1_source=_AUGREG_224)


def _deit_release(variant, model, top1, top1_distilled, image_size=224):
    """A DeiT size's ImageNet-1k checkpoints, plain and distilled.

    `{variant}/imagenet` and `{variant}_distilled/imagenet`, with the top-1 of each.
    """
    config = dict(_LEARNED_1D, num_classes=1000, image_size=image_size, preprocessing="imagenet")
    authors = _deit_center(image_size)
    crop_pct = 1.0 if image_size == 384 else 0.9
    records = {}
    for suffix, top1_of in (("", top1), ("_distilled", top1_distilled)):
        tag = f"{model}{suffix}_patch16_{image_size}.fb_in1k"
        records[f"{variant}{suffix}/imagenet"] = dataclasses.replace(
            timm_hub(tag, **config, top1=top1_of, top1_source=_DEIT_ZOO), layout=TIMM_VIT, eval_config=authors,
            timm_eval_config=_timm(authors, tag, image_size, crop_pct), timm_tag=tag)
    return records


def _augreg_name(size, augmentation, weight_decay, dropout, lr):
    """The AugReg release's file name of the 224 px ImageNet-1k fine-tune of `size` (e.g. `"B_16"`)."""
    return (f"{size}-i21k-300ep-lr_0.001-aug_{augmentation}-wd_{weight_decay}-do_{dropout}-sd_{dropout}"
            f"--imagenet2012-steps_20k-lr_{lr}-res_224")


CHECKPOINTS = named_records({
    # Original release (ViT paper): ImageNet-21k pre-training, ImageNet-1k fine-tuning.
    "ViT_B16/imagenet21k+imagenet2012": _original("ViT-B_16", "vit_base_patch16_384.orig_in21k_ft_in1k", 83.97),
    "ViT_B32/imagenet21k+imagenet2012": _original("ViT-B_32", None, 81.28),
    "ViT_L16/imagenet21k+imagenet2012": _original("ViT-L_16", None, 85.15),
    "ViT_L32/imagenet21k+imagenet2012": _original("ViT-L_32", "vit_large_patch32_384.orig_in21k_ft_in1k", 80.99),
    "R50_ViT_B16/imagenet21k+imagenet2012": _original("R50+ViT-B_16", "vit_base_r50_s16_384.orig_in21k_ft_in1k"),
    "ViT_B16/imagenet21k": _i21k("ViT-B_16", 768, "vit_base_patch16_224.orig_in21k"),
    "ViT_B32/imagenet21k": _i21k("ViT-B_32", 768, "vit_base_patch32_224.orig_in21k"),
    "ViT_L16/imagenet21k": _i21k("ViT-L_16", 1024, "vit_large_patch16_224.orig_in21k"),
    "ViT_L32/imagenet21k": _i21k("ViT-L_32", 1024, "vit_large_patch32_224.orig_in21k"),
    "ViT_H14/imagenet21k": _i21k("ViT-H_14", 1280, "vit_huge_patch14_224.orig_in21k"),
    "R50_ViT_B16/imagenet21k": _i21k("R50+ViT-B_16", 768, "vit_base_r50_s16_224.orig_in21k"),
    # AugReg release ("How to train your ViT?", Steiner et al. 2021), 224 px fine-tunes.
    "ViT_Ti16/augreg": _augreg(_augreg_name("Ti_16", "none", 0.03, 0.0, 0.03),
                               "vit_tiny_patch16_224.augreg_in21k_ft_in1k"),
    "ViT_S16/augreg": _augreg(_augreg_name("S_16", "light1", 0.03, 0.0, 0.03),
                              "vit_small_patch16_224.augreg_in21k_ft_in1k"),
    "ViT_B16/augreg": _augreg(_augreg_name("B_16", "medium1", 0.1, 0.0, 0.01),
                              "vit_base_patch16_224.augreg_in21k_ft_in1k"),
    "ViT_B32/augreg": _augreg(_augreg_name("B_32", "medium1", 0.03, 0.0, 0.03),
                              "vit_base_patch32_224.augreg_in21k_ft_in1k"),
    "ViT_L16/augreg": _augreg(_augreg_name("L_16", "medium1", 0.1, 0.1, 0.01),
                              "vit_large_patch16_224.augreg_in21k_ft_in1k"),
    "R_ViT_Ti16/augreg": _augreg(_augreg_name("R_Ti_16", "none", 0.03, 0.0, 0.03),
                                 "vit_tiny_r_s16_p8_224.augreg_in21k_ft_in1k"),
    "R26_ViT_S32/augreg": _augreg(_augreg_name("R26_S_32", "light0", 0.03, 0.1, 0.03),
                                  "vit_small_r26_s32_224.augreg_in21k_ft_in1k"),
    **_deit_release("DeiT_Ti16", "deit_tiny", 72.2, 74.5),
    **_deit_release("DeiT_S16", "deit_small", 79.9, 81.2),
    **_deit_release("DeiT_B16", "deit_base", 81.8, 83.4),
    **_deit_release("DeiT_B16_384", "deit_base", 82.9, 85.2, image_size=384),
})
"""Every published ViT, hybrid and DeiT checkpoint: name -> `KnownCheckpoint`."""

"""Swin's published checkpoints (Microsoft's release, as timm publishes it) and their evaluation transforms."""

import dataclasses

from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD, EvalConfig
from keras_vit.models.swin.checkpoints import TIMM_SWIN
from keras_vit.checkpoints import named_records, timm_hub

# The settings of every Swin checkpoint besides its variant's table entry: the
# builder's defaults, stated so that a model built otherwise is refused before
# the download (they fix the weights' shapes or what they compute): Swin's own
# relative position bias beside the content term, no absolute embedding (Swin
# Table 4's last row). Not `shifted_windows`: the same weights serve windows
# without shifting, so a checkpoint loads into that ablation too.
_SETTINGS = {"patch_size": 4, "mlp_ratio": 4.0, "absolute_position_embedding": False, "position_embedding": "relative"}
# Microsoft's ImageNet-22k checkpoints classify 21841 classes (timm's `ms_in22k`).
_I22K_CLASSES = 21841
_HUB = "microsoft/Swin-Transformer MODELHUB.md, acc@1"
# variant, timm model, MODELHUB top-1 of the ImageNet-22k fine-tune, of the ImageNet-1k
# training (None: not released), image size.
_RELEASES = (
    ("Swin_T", "swin_tiny_patch4_window7_224", 80.9, 81.2, 224),
    ("Swin_S", "swin_small_patch4_window7_224", 83.2, 83.2, 224),
    ("Swin_B", "swin_base_patch4_window7_224", 85.2, 83.5, 224),
    ("Swin_B384", "swin_base_patch4_window12_384", 86.4, 84.5, 384),
    ("Swin_L", "swin_large_patch4_window7_224", 86.3, None, 224),
    ("Swin_L384", "swin_large_patch4_window12_384", 87.3, None, 384),
)
# Our name of each release -> timm's tag suffix.
_DATA = (("imagenet21k+imagenet2012", "ms_in22k_ft_in1k"), ("imagenet21k", "ms_in22k"), ("imagenet", "ms_in1k"))


def _files():
    """`(name, timm tag, image size)` of every released file: ImageNet-1k only where a variant was trained there."""
    return [(f"{variant}/{data}", f"{model}.{tag}", image_size)
            for variant, model, _, top1_imagenet, image_size in _RELEASES
            for data, tag in _DATA if data != "imagenet" or top1_imagenet is not None]


_EVAL = (
    "microsoft/Swin-Transformer data/build.py build_transform (eval) with config.py TEST.CROP=True, "
    "DATA.INTERPOLATION='bicubic': transforms.Resize(int((256 / 224) * IMG_SIZE)), CenterCrop(IMG_SIZE), "
    "Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)"
)
_EVAL_384 = (
    "microsoft/Swin-Transformer configs/swin/swin_{base,large}_patch4_window12_384_*finetune.yaml set "
    "TEST.CROP False: data/build.py build_transform then applies transforms.Resize((IMG_SIZE, IMG_SIZE)) "
    "with DATA.INTERPOLATION='bicubic', no crop"
)
_EVAL_384_I22K = (
    f"{_EVAL_384}. No config of the repository evaluates the ImageNet-22k 384 px checkpoint itself; "
    "it takes the setting of the 384 px configs"
)


def _authors_eval(name, image_size):
    """The evaluation transform of Microsoft's code for the file `name`.

    At 224 px a bicubic resize of the shorter side to 256/224 of the size and a
    centre crop; the 384 px fine-tuning configs set `TEST.CROP` to False: a
    bicubic resize of the whole image to 384 x 384.
    """
    if image_size == 384:
        source = _EVAL_384_I22K if name.endswith("/imagenet21k") else _EVAL_384
        return EvalConfig(384, "bicubic", 1.0, "squash", True, True, IMAGENET_MEAN, IMAGENET_STD, source)
    return EvalConfig(224, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD, _EVAL)


def _timm_eval(tag, image_size):
    """timm's `pretrained_cfg` for the same file (timm/models/swin_transformer.py, timm 1.0.31).

    `_cfg`'s `crop_pct` 0.9, and 1.0 at 384 px; bicubic, centre crop.
    """
    crop_pct = 0.9 if image_size == 224 else 1.0
    source = f"timm pretrained_cfg of {tag!r}: crop_pct={crop_pct}, interpolation='bicubic', crop_mode='center'"
    return EvalConfig(image_size, "bicubic", crop_pct, "center", True, True, IMAGENET_MEAN, IMAGENET_STD, source)


def known_checkpoints():
    """Every Swin checkpoint (Liu et al. 2021, Sec. 4.1): ImageNet-22k, its 1k fine-tune, and (T, S, B) 1k.

    Named as the other families' are, by the data: `imagenet` (timm's `ms_in1k`),
    `imagenet21k` (`ms_in22k`), `imagenet21k+imagenet2012` (`ms_in22k_ft_in1k`).
    The top-1 figures are MODELHUB.md's, of the released files (Swin-T's and
    Swin-S's differ by 0.1-0.2 from the paper's Table 1, which trained others).
    Each is Microsoft's file as timm publishes it, in timm's layout.
    """
    top1 = {}
    for variant, _, top1_fine_tuned, top1_imagenet, _ in _RELEASES:
        top1[f"{variant}/imagenet21k+imagenet2012"] = (1000, top1_fine_tuned, _HUB)
        top1[f"{variant}/imagenet21k"] = (_I22K_CLASSES, None, "none: an ImageNet-22k head")
        top1[f"{variant}/imagenet"] = (1000, top1_imagenet, _HUB)
    records = {}
    for name, tag, image_size in _files():
        num_classes, figure, source = top1[name]
        hub = timm_hub(tag, **_SETTINGS, image_size=image_size, num_classes=num_classes, top1=figure,
                       top1_source=source)
        records[name] = dataclasses.replace(hub, layout=TIMM_SWIN, eval_config=_authors_eval(name, image_size),
                                            timm_eval_config=_timm_eval(tag, image_size), timm_tag=tag)
    return named_records(records)

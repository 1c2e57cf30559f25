"""ConViT's checkpoints: timm's state dicts, the published files and their evaluation transforms.

timm's ConViT (`convit_{tiny,small,base}.fb_in1k`, the authors' weights) names
its blocks as timm's ViT does, with GPSA's `attn.qk`, `attn.v`, `attn.pos_proj`
and `attn.gating_param` in the first ten; its `pos_embed` has no class slot,
since the class token joins only after the last GPSA block. The ViT converter
(`keras_vit.weights.converters.convert_timm`) reads the rest.
"""

import dataclasses

import numpy as np

from keras_vit.models.convit.inspection import gpsa_blocks
from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD, EvalConfig
from keras_vit.weights.converters import _sequence, convert_timm
from keras_vit.checkpoints import named_records, timm_hub

TIMM_CONVIT = "timm ConViT"


def checkpoint_layout(fmt, arrays):
    """`"timm ConViT"` for a state dict with GPSA gates, None for another family's file."""
    if fmt != "keras" and any(key.endswith("attn.gating_param") for key in arrays):
        return TIMM_CONVIT
    return None


def convert(layout, arrays):
    """A timm ConViT state dict into keras_vit weight paths: `(weights, position, unused)`.

    The position embeddings are all patches' (no class slot to split off).
    """
    arrays = dict(arrays)
    position = arrays.pop("pos_embed", None)
    weights, _, unused = convert_timm(arrays)
    return weights, None if position is None else _sequence("pos_embed", position), unused


def is_keras_file(arrays):
    """Whether a keras_vit `.keras` file's weights are a ConViT's (its GPSA blocks have gates)."""
    return any(key.endswith("/attention/gating") for key in arrays)


def check_values(model, values, source):
    """Refuses learned gates for a ConViT whose gates are frozen at 0 (`train_gating=False`).

    Table 3 (b) defines the model by `lambda_h = 0`: a checkpoint's learned
    gates would silently make it another model. A checkpoint of such a model
    (its gates 0) loads.
    """
    for block in gpsa_blocks(model):
        if block.train_gating:
            continue
        gate = block.attention.gating.path
        if gate in values and np.any(np.asarray(values[gate]) != 0):
            raise ValueError(
                f"{source}: the model's GPSA gates are frozen at 0 (`train_gating=False`, ConViT Table 3 (b)) "
                f"and the checkpoint's are not ({gate}: {np.round(np.asarray(values[gate]), 3).tolist()}). "
                "Build the model with train_gating=True to load them. Received: "
                f"checkpoint={source!r}, train_gating=False"
            )


# ---- the published checkpoints ---------------------------------------------------

# ConViT's checkpoints learned their gates (ConViT Table 3 (a)); their attention
# loads into a model that freezes it (`train_gpsa_attention=False`) as into one that trains it.
_SETTINGS = {"num_classes": 1000, "image_size": 224, "train_gating": True}
_TABLE_1 = "ConViT paper, Table 1"
# variant -> (timm tag, top-1 of ConViT Table 1)
_RELEASES = {
    "ConViT_Ti": ("convit_tiny.fb_in1k", 73.1),
    "ConViT_S": ("convit_small.fb_in1k", 81.3),
    "ConViT_B": ("convit_base.fb_in1k", 82.4),
}


_EVAL = EvalConfig(
    224, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD,
    "facebookresearch/convit datasets.py build_transform (eval): transforms.Resize(int((256 / 224) * "
    "input_size), interpolation=3 [bicubic]), CenterCrop(input_size), Normalize(IMAGENET_DEFAULT_MEAN, "
    "IMAGENET_DEFAULT_STD)",
)


def _timm_eval(tag):
    """timm's `pretrained_cfg` (timm/models/convit.py's `_cfg` sets no crop_pct: timm's default, 0.875)."""
    return EvalConfig(224, "bicubic", 0.875, "center", True, True, IMAGENET_MEAN, IMAGENET_STD,
                      f"timm pretrained_cfg of {tag!r}: crop_pct=0.875, interpolation='bicubic', crop_mode='center'")


def known_checkpoints():
    """ConViT (d'Ascoli et al. 2021), ImageNet-1k, as published on the timm hub: `"ConViT_*/imagenet"` -> record."""
    records = {}
    for variant, (tag, top1) in _RELEASES.items():
        hub = timm_hub(tag, **_SETTINGS, top1=top1, top1_source=_TABLE_1)
        records[f"{variant}/imagenet"] = dataclasses.replace(
            hub, layout=TIMM_CONVIT, eval_config=_EVAL, timm_eval_config=_timm_eval(tag), timm_tag=tag)
    return named_records(records)

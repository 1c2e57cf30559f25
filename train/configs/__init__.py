"""Training configurations: plain data, looked up by name (`--config=NAME`)."""

import copy

from train.configs.base import TrainConfig
from train.configs.presets import PRESETS


def get_config(name="default"):
    """Returns a fresh, deep copy of the named preset: editing it leaves `PRESETS` alone.

    Args:
        name: str. One of `PRESETS` (`default`, `fashion_mnist_vit`, `vit_pretrain`, `vit_imagenet`,
            `vit_finetune`, `vit_masked_patch_prediction`, `deit`, `convit`, `swin`).
    """
    if name not in PRESETS:
        raise ValueError(f"`config` must be one of {sorted(PRESETS)}. Received: config={name!r}")
    return copy.deepcopy(PRESETS[name])


__all__ = ["PRESETS", "TrainConfig", "get_config"]

"""Learning-rate schedules: linear warmup, then linear or cosine decay (ViT App. B.1).

They live in the library, not in train/, so that a `.keras` file saved with its
optimizer reloads wherever keras_vit is installed.
"""

import math

import keras
from keras import ops

DECAYS = ("linear", "cosine", "constant")
"""The decays `WarmupDecay` accepts after its linear warmup."""


@keras.saving.register_keras_serializable(package="keras_vit")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak` over `warmup_steps`, then decay to `end` at `total_steps`.

    `lr(s) = peak * s / warmup` during warmup; after it, with
    `p = (s - warmup) / (total - warmup)` clipped to [0, 1]:
    linear `end + (peak - end) (1 - p)`, cosine
    `end + (peak - end) (1 + cos(pi p)) / 2`, or constant `peak`.

    Args:
        peak: float. Learning rate at the end of warmup.
        total_steps: int. Step at which the decay reaches `end`.
        warmup_steps: int. Length of the linear warmup. Defaults to 0.
        decay: `"linear"`, `"cosine"` or `"constant"`. Defaults to `"cosine"`.
        end: float. Final learning rate. Defaults to 0.
    """

    def __init__(self, peak, total_steps, warmup_steps=0, decay="cosine", end=0.0):
        if decay not in DECAYS:
            raise ValueError(f"`decay` must be one of {DECAYS}. Received: decay={decay!r}")
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(
                "`warmup_steps` must be in [0, total_steps). Received: "
                f"warmup_steps={warmup_steps}, total_steps={total_steps}"
            )
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)
        self.decay = decay
        self.end = float(end)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = float(max(self.warmup_steps, 1))
        progress = (step - self.warmup_steps) / float(self.total_steps - self.warmup_steps)
        progress = ops.clip(progress, 0.0, 1.0)
        if self.decay == "linear":
            decayed = self.end + (self.peak - self.end) * (1.0 - progress)
        elif self.decay == "cosine":
            decayed = self.end + (self.peak - self.end) * 0.5 * (1.0 + ops.cos(math.pi * progress))
        else:
            decayed = ops.convert_to_tensor(self.peak, "float32")
        if self.warmup_steps == 0:
            return decayed
        return ops.where(step < self.warmup_steps, self.peak * step / warmup, decayed)

    def get_config(self):
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "decay": self.decay,
            "end": self.end,
        }

"""The optimizer of a run: AdamW or SGD, warmup then decay, clipping, EMA, weight decay."""

import keras

from keras_vit.schedules import WarmupDecay

OPTIMIZERS = ("adamw", "sgd")
# Not decayed: biases, normalization parameters, position embeddings, the class
# token and GPSA gates (the DeiT/timm convention; the ViT paper does not say).
NO_DECAY = ["bias", "gamma", "beta", "position_embedding", "token", "gating"]


def make_optimizer(config, total_steps):
    """The configured optimizer, its learning rate a `WarmupDecay` over `total_steps`."""
    schedule = WarmupDecay(
        peak=config.learning_rate,
        total_steps=total_steps,
        warmup_steps=min(config.warmup_steps, total_steps - 1),
        decay=config.decay,
        end=config.end_learning_rate,
    )
    common = dict(
        learning_rate=schedule,
        global_clipnorm=config.clip_norm,
        use_ema=config.ema_decay is not None,
        ema_momentum=config.ema_decay if config.ema_decay is not None else 0.99,
    )
    if config.optimizer == "adamw":
        optimizer = keras.optimizers.AdamW(
            weight_decay=config.weight_decay, beta_1=config.adam_beta1, beta_2=config.adam_beta2,
            epsilon=config.adam_epsilon, **common
        )
    else:
        optimizer = keras.optimizers.SGD(
            momentum=config.momentum, weight_decay=config.weight_decay or None, **common
        )
    if config.weight_decay:
        optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    return optimizer

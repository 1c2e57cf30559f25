"""The optimizer of a run: AdamW or SGD, warmup then decay, clipping, EMA, weight decay."""

import keras

from keras_vit.schedules import WarmupDecay

OPTIMIZERS = ("adamw", "sgd")
# Not decayed: biases, normalization parameters, position embeddings, the class
# token and GPSA gates (the DeiT/timm convention; the ViT paper does not say).
NO_DECAY = ["bias", "gamma", "beta", "position_embedding", "token", "gating"]


# A run shorter than its warmup, or than its EMA's horizon, has its schedule fitted: warmup and
# horizon become this fraction of the run (as `runs/students.py` scales the presets to short runs).
FITTED_FRACTION = 0.1
# Below this many steps of horizon an average is not worth keeping: EMA is off instead.
MIN_EMA_HORIZON = 2


def fit_to_run(config, total_steps):
    """The warmup and EMA decay of a run of `total_steps`, and a line for each one fitted to it.

    A preset's warmup and EMA are made for its own length: the `vit_finetune` preset's 500
    warmup steps and EMA 0.9999 (an average over about 10,000 steps), given a 6-step run,
    would keep the zero-initialised head at zero and export a model that learned nothing.
    A run shorter than its warmup gets a warmup of a tenth of the run; a run shorter than its
    EMA's horizon `1 / (1 - decay)` (the weights' average then still holds at least
    `decay ** steps > 1/e` of the initial weights) gets a decay whose horizon is a tenth of
    the run, or none when that is under 2 steps.

    Args:
        config: `TrainConfig`. `ema_decay` None or 0 means no EMA.
        total_steps: int. The run's optimizer steps.

    Returns:
        `(warmup_steps, ema_decay or None, notes)`, `notes` a list of one-line strings.
    """
    notes = []
    warmup = config.warmup_steps
    if warmup and warmup >= total_steps:
        warmup = int(FITTED_FRACTION * total_steps)
        notes.append(f"--warmup_steps={config.warmup_steps} is not shorter than this run's {total_steps} steps: "
                     f"warmup fitted to {warmup} steps (a tenth of the run).")
    decay = config.ema_decay or None
    if decay is not None and total_steps < 1 / (1 - decay):
        horizon = FITTED_FRACTION * total_steps
        decay = round(1 - 1 / horizon, 6) if horizon >= MIN_EMA_HORIZON else None
        fitted = f"EMA decay fitted to {decay} (an average over a tenth of the run)" if decay else "EMA off"
        notes.append(f"--ema_decay={config.ema_decay} averages over about {1 / (1 - config.ema_decay):,.0f} steps, "
                     f"more than this run's {total_steps}: {fitted}. --ema_decay=0 turns EMA off.")
    return warmup, decay, notes


def make_optimizer(config, total_steps):
    """The configured optimizer, its learning rate a `WarmupDecay` over `total_steps`.

    Warmup and EMA as `fit_to_run` fits them to the run.
    """
    warmup, ema_decay, _ = fit_to_run(config, total_steps)
    schedule = WarmupDecay(
        peak=config.learning_rate,
        total_steps=total_steps,
        warmup_steps=min(warmup, total_steps - 1),
        decay=config.decay,
        end=config.end_learning_rate,
    )
    common = dict(
        learning_rate=schedule,
        global_clipnorm=config.clip_norm,
        use_ema=ema_decay is not None,
        ema_momentum=ema_decay if ema_decay is not None else 0.99,
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

"""Corruption of patch embeddings for masked patch prediction (ViT App. B.1.2).

"We corrupt 50% of patch embeddings by either replacing their embeddings with a
learnable [mask] embedding (80%), a random other patch embedding (10%) or just
keeping them the same (10%)", the recipe BERT applies to words. Two things the
appendix leaves open are settled here:

- **Exactly the fraction, per image.** Each image has `round(rate * N)` of
  its `N` patches chosen, uniformly without replacement, so every example
  contributes the same number of predictions to the loss.
- **The random other patch comes from the same image**, uniformly among its
  other `N - 1` patches: a patch of another image would be a patch of another
  photograph, easier to tell apart than BERT's random word.
"""

import keras
from keras import ops

from keras_vit.layers.validation import _is_real


def check_corruption_rates(rate, mask_rate, random_rate, rate_name="rate"):
    """Raises a ValueError naming the argument unless the three rates are valid.

    Args:
        rate: the fraction of patches chosen, in (0, 1].
        mask_rate: the fraction of the chosen ones masked, in [0, 1].
        random_rate: the fraction of the chosen ones replaced, in [0, 1]; with
            `mask_rate`, at most 1.
        rate_name: the name the caller knows `rate` by (`MaskedPatchPrediction`
            calls it `corruption_rate`), so that the message names what was passed.
    """
    for name, value, low_open in ((rate_name, rate, True), ("mask_rate", mask_rate, False),
                                  ("random_rate", random_rate, False)):
        if not _is_real(value) or not (0 < value <= 1 if low_open else 0 <= value <= 1):
            interval = "(0, 1]" if low_open else "[0, 1]"
            raise ValueError(f"`{name}` must be a float in {interval}. Received: {name}={value!r}")
    if mask_rate + random_rate > 1:
        raise ValueError(
            "`mask_rate + random_rate` must be at most 1 (the rest of the chosen patches stay as they "
            f"are). Received: mask_rate={mask_rate}, random_rate={random_rate}"
        )


@keras.saving.register_keras_serializable(package="keras_vit")
class PatchCorruption(keras.layers.Layer):
    """Corrupts a fraction of the patch embeddings; returns them and where.

    Called on `(batch, num_patches, hidden_size)` patch embeddings (before the
    position embeddings are added and the class token prepended), it returns
    `(corrupted, chosen)`: the embeddings with the chosen patches replaced, and
    a float mask `(batch, num_patches)`, 1 where a patch was chosen, which
    weights the loss (the loss counts only the chosen patches, kept ones too).
    It corrupts whenever it is called, in training and evaluation alike: the
    pretraining objective is defined on corrupted inputs.

    Args:
        rate: float in (0, 1]. Fraction of the patches chosen. Defaults to 0.5
            (ViT's); BERT's is 0.15.
        mask_rate: float. Fraction of the chosen patches replaced by the
            learned `[mask]` embedding. Defaults to 0.8.
        random_rate: float. Fraction replaced by another patch of the same
            image; the rest (`1 - mask_rate - random_rate`) stay as they are.
            Defaults to 0.1.
        mask_initializer: Initializer of the `[mask]` embedding. Defaults to
            a normal of standard deviation 0.02, as BERT's embeddings.
        seed: int or None. Seed of the random draws.
        **kwargs: Base layer keyword arguments (`name`, `dtype`).
    """

    def __init__(self, rate=0.5, mask_rate=0.8, random_rate=0.1, mask_initializer=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_corruption_rates(rate, mask_rate, random_rate)
        self.rate = rate
        self.mask_rate = mask_rate
        self.random_rate = random_rate
        self.mask_initializer = keras.initializers.get(
            mask_initializer or keras.initializers.TruncatedNormal(stddev=0.02))
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[1] is None or input_shape[-1] is None:
            raise ValueError(
                "`PatchCorruption` takes patch embeddings (batch, num_patches, hidden_size) with a known "
                f"number of patches and width. Received: input_shape={input_shape}"
            )
        if input_shape[1] < 2:
            raise ValueError(f"`PatchCorruption` needs at least 2 patches. Received: input_shape={input_shape}")
        self.mask_embedding = self.add_weight(
            name="mask_embedding", shape=(input_shape[-1],), initializer=self.mask_initializer)

    def num_chosen(self, num_patches):
        """How many of `num_patches` patches each image has chosen: `round(rate * N)`, at least 1."""
        return max(1, int(round(self.rate * num_patches)))

    def call(self, embeddings):
        num_patches = embeddings.shape[1]
        batch = ops.shape(embeddings)[0]
        draws = keras.random.uniform((batch, num_patches, 3), seed=self.seed_generator)
        # The patches of rank < k under a uniform score: k chosen uniformly without replacement.
        ranks = ops.argsort(ops.argsort(draws[..., 0], axis=-1), axis=-1)
        chosen = ranks < self.num_chosen(num_patches)
        kind = draws[..., 1]
        masked = ops.logical_and(chosen, kind < self.mask_rate)
        randomized = ops.logical_and(chosen, ops.logical_and(kind >= self.mask_rate,
                                                             kind < self.mask_rate + self.random_rate))
        # Another patch of the same image: a shift of 1 .. N-1 positions, uniform.
        shift = 1 + ops.cast(ops.floor(draws[..., 2] * (num_patches - 1)), "int32")
        shift = ops.minimum(shift, num_patches - 1)
        source = (ops.arange(num_patches, dtype="int32")[None, :] + shift) % num_patches
        others = ops.take_along_axis(embeddings, source[..., None], axis=1)
        mask = ops.cast(self.mask_embedding, embeddings.dtype)
        corrupted = ops.where(masked[..., None], mask[None, None, :], embeddings)
        corrupted = ops.where(randomized[..., None], others, corrupted)
        return corrupted, ops.cast(chosen, self.compute_dtype)

    def compute_output_spec(self, embeddings):
        return (keras.KerasTensor(embeddings.shape, embeddings.dtype),
                keras.KerasTensor(embeddings.shape[:2], self.compute_dtype))

    def get_config(self):
        config = super().get_config()
        config.update(
            rate=self.rate,
            mask_rate=self.mask_rate,
            random_rate=self.random_rate,
            mask_initializer=keras.initializers.serialize(self.mask_initializer),
            seed=self.seed,
        )
        return config

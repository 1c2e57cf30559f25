"""The order of the training examples in one epoch with repeated augmentation (Hoffer et al. 2020; DeiT).

DeiT trains with repeated augmentation (Touvron et al. 2021, Sec. 6; its
`RASampler`): every epoch shuffles the examples, repeats each of them three
times in a row, and keeps only about one third of the result, so an epoch is
as long as without repeats but holds a third of the examples, each seen three
times under different random augmentations.
"""

import numbers

import tensorflow as tf

# DeiT keeps a multiple of this many positions per epoch (`len // 256 * 256`).
DEIT_EPOCH_MULTIPLE = 256


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}. Received: {name}={value!r}")


def repeated_augmentation_length(num_examples, multiple=DEIT_EPOCH_MULTIPLE):
    """How many positions one epoch of `repeated_augmentation_order` has: `num_examples // multiple * multiple`."""
    _check_int(num_examples, "num_examples", 1)
    _check_int(multiple, "multiple", 1)
    length = num_examples // multiple * multiple
    if length == 0:
        raise ValueError(
            f"Repeated augmentation keeps `num_examples // multiple * multiple` examples per epoch, none of "
            f"{num_examples} with multiple={multiple}: use at least {multiple} examples or a smaller "
            f"`multiple`. Received: num_examples={num_examples}, multiple={multiple}"
        )
    return length


def repeated_augmentation_order(num_examples, epoch, seed, repeats=3, multiple=DEIT_EPOCH_MULTIPLE):
    """The example indices of one epoch with repeated augmentation, as one global (single-process) order.

    A stateless permutation of `(seed, epoch)` of `range(num_examples)`, each
    index written `repeats` times in a row, cut to the first
    `num_examples // multiple * multiple` positions.

    DeiT's `RASampler` builds the same repeated list (its permutation from
    `torch.randperm` seeded with the epoch alone), and replica `r` of `R` reads
    positions `r, r + R, r + 2R, ...` of it, the first
    `floor(num_examples // 256 * 256 / R)` of them. Together the replicas read
    its first `R * floor(num_examples // 256 * 256 / R)` positions, which is
    `num_examples // 256 * 256`, the length here, whenever `R` divides that
    number (always for 1 to 256 GPUs in powers of two). At step `b`, with `B`
    images per replica, the replicas read positions `[b R B, (b + 1) R B)`:
    DeiT's global batch `b` is a contiguous slice of the repeated list, exactly
    as global batch `b` of this order is positions `[b G, (b + 1) G)` for the
    global batch size `G`. The copies of one image thus share a global batch
    (unless they straddle its end) in both. In DeiT they sit on different
    replicas (consecutive positions go to consecutive ranks); an input pipeline
    that splits each global batch into contiguous per-replica slices puts them
    mostly on the same replica. Only the placement differs: the gradient is
    averaged over the global batch, and the models have no batch statistics
    (LayerNorm; GroupNorm in the hybrid stem), so a step sees the same examples
    either way. The permutation is TensorFlow's, not PyTorch's: the same
    distribution, other draws.

    Args:
        num_examples: int >= 1. Size of the training set.
        epoch: int or int tensor. The epoch; each epoch has its own permutation.
        seed: int or int tensor. The run's seed.
        repeats: int >= 1. Copies of each example in a row; 1 gives a plain
            shuffle (cut to the multiple). Defaults to 3 (DeiT).
        multiple: int >= 1. The epoch keeps a multiple of this many positions.
            Defaults to 256 (DeiT); small test sets may lower it.

    Returns:
        int64 tensor of shape `(num_examples // multiple * multiple,)`.
    """
    _check_int(repeats, "repeats", 1)
    length = repeated_augmentation_length(num_examples, multiple)
    order = tf.random.experimental.stateless_shuffle(
        tf.range(num_examples, dtype=tf.int64),
        seed=tf.stack([tf.cast(seed, tf.int64), tf.cast(epoch, tf.int64)]))
    # Only the first ceil(length / repeats) examples of the permutation are reached.
    kept = -(-length // repeats)
    return tf.repeat(order[:kept], repeats)[:length]

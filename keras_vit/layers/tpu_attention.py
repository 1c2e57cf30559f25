"""Bidirectional attention on a TPU with JAX: Pallas's Splash kernel, called by keras_vit itself.

Keras 3.15's `keras.ops.dot_product_attention` takes the Splash kernel on a TPU
itself, but (`keras/src/backend/jax/nn.py`, `wrap_flash_attention`) builds it with
a causal mask whenever no mask is passed, multiplies the queries by
`scale * sqrt(head_dim)` although the kernel does not divide by `sqrt(head_dim)`,
and refuses token counts that 128 does not divide, logging an error with a
traceback at every trace (`docs/guides/tpu.md` reproduces all three). A ViT
attends both ways, with its own scale, over 197 or 257 tokens: so here the
kernel is built and called directly:

- a full (bidirectional) mask, and the queries scaled once by the caller;
- the tokens padded to the kernel's block of 128, the padded keys masked out
  through segment ids (real tokens are segment 0, padding segment 1, so no row
  of the mask is empty), the padded queries dropped;
- the same custom gradient (Splash's own backward kernels for dq and dk, dv),
  which keeps the output and the per-row log-sum-exp, not the `L x L`
  probabilities.

Sequences shorter than one block (`MIN_TOKENS`) take XLA's attention instead,
named explicitly: padding 65 tokens to 128 would make the kernel do
`(128 / 65)^2 = 3.9` times the work, for matrices that at that length are no
larger than the activations around them. Each reason for not taking the kernel
is warned about once per process.
"""

import warnings

# The kernel's tile along both sequence axes (`BlockSizes.get_default()`, every
# block of the forward and backward kernels); the padded length is a multiple of it.
BLOCK = 128
# Below one block of tokens XLA's attention is used (see the module docstring).
MIN_TOKENS = BLOCK

SPLASH = "splash (pallas)"

_warned = set()


def _warn_once(reason, message):
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"keras_vit: {message}", RuntimeWarning, stacklevel=4)


def padded_length(length):
    """The token count rounded up to a whole number of kernel blocks."""
    return -(-length // BLOCK) * BLOCK


def _splash(query, key, value):
    """Splash over `(batch, length, heads, head_dim)` tensors of any length, bidirectional, unscaled."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as kernels
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks

    _, length, heads, _ = query.shape
    padded = padded_length(length)
    full = masks.MultiHeadMask([masks.FullMask((padded, padded))] * heads)
    kernel = kernels.make_splash_mha(full, head_shards=1, q_seq_shards=1, block_sizes=kernels.BlockSizes.get_default())

    def to_kernel(x):  # (batch, length, heads, d) -> (batch, heads, padded, d)
        x = jnp.transpose(x, (0, 2, 1, 3))
        return jnp.pad(x, ((0, 0), (0, 0), (0, padded - length), (0, 0)))

    # One segment for the tokens and one for the padding: a real query sees real keys only, and a
    # padded query sees the padding (its row is not empty, so its softmax is finite; it is dropped).
    segments = (jnp.arange(padded) >= length).astype(jnp.int32)
    segment_ids = kernels.SegmentIds(q=segments, kv=segments)
    outputs = jax.vmap(kernel, in_axes=(0, 0, 0, None))(to_kernel(query), to_kernel(key), to_kernel(value), segment_ids)
    return jnp.transpose(outputs[:, :, :length], (0, 2, 1, 3))


def tpu_attention(query, key, value):
    """`softmax(q k^T) v` per head on a TPU under JAX; the kernel that ran is returned beside it.

    Args:
        query: Tensor `(batch, length, heads, head_dim)`, already scaled.
        key: Tensor `(batch, length, heads, head_dim)`.
        value: Tensor `(batch, length, heads, head_dim)`.

    Returns:
        `(outputs, kernel)`: the `(batch, length, heads, head_dim)` tensor, and
        `"splash (pallas)"` or `"xla (<why>)"`.
    """
    import jax

    length = query.shape[1]
    if length < MIN_TOKENS:
        reason = f"xla (fewer than {MIN_TOKENS} tokens)"
        _warn_once(
            reason,
            f"attention over {length} tokens runs as XLA's attention on the TPU, not Pallas's Splash kernel: "
            f"sequences shorter than its {BLOCK}-token block would be padded to {BLOCK}, at "
            f"{(BLOCK / length) ** 2:.1f} times the work.",
        )
        return jax.nn.dot_product_attention(query, key, value, scale=1.0, implementation="xla"), reason
    try:
        return _splash(query, key, value), SPLASH
    except (ImportError, ValueError, NotImplementedError) as error:
        # Raised while the kernel is built and traced: this JAX has no Splash, or it refuses the shapes.
        reason = f"xla (splash refused: {type(error).__name__})"
        _warn_once(
            reason,
            f"Pallas's Splash kernel refused attention of shape {tuple(query.shape)} {query.dtype} "
            f"({type(error).__name__}: {error}); it runs as XLA's attention.",
        )
        return jax.nn.dot_product_attention(query, key, value, scale=1.0, implementation="xla"), reason

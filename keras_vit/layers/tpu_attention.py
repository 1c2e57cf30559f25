"""Bidirectional attention on a TPU with JAX: Pallas's Splash kernel, called by keras_vit itself.

Splash is JAX's Pallas TPU kernel for flash attention (Dao et al. 2022): it walks
the keys block by block with a running softmax, so the `L x L` probabilities are
never stored, and its backward kernels recompute them from one log-sum-exp per
query row. Keras 3.15's `keras.ops.dot_product_attention` takes it on a TPU
itself, but (`keras/src/backend/jax/nn.py`, `wrap_flash_attention`) builds it
with a causal mask whenever no mask is passed, multiplies the queries by
`scale * sqrt(head_dim)` although the kernel does not divide by `sqrt(head_dim)`,
and refuses token counts that 128 does not divide, logging an error with a
traceback at every trace (`docs/guides/tpu.md` reproduces all three). A ViT
attends both ways, with its own scale, over 197 or 257 tokens: so here the
kernel is built and called directly:

- a full (bidirectional) mask, and the queries scaled once by the caller;
- the tokens padded to the kernel's block of 128, the padded keys masked out
  through segment ids (real tokens are segment 0, padding segment 1, so no row
  of the mask is empty), the padded queries dropped;
- Splash's own backward kernels (for dq, and for dk and dv) as the gradient;
- under a `keras.distribution` over several devices, the call wrapped in
  `jax.shard_map` over the distribution's batch axis: XLA cannot partition a
  Pallas TPU kernel by itself, and refuses to compile a step that asks it to.

Sequences shorter than one block (`MIN_TOKENS`) take XLA's attention instead,
named explicitly: below 128 tokens a head's `L x L` matrix is at most twice the
size of its queries (`L <= 2 * head_dim` for ViT's heads of 64), so the kernel
would save little memory while padding multiplies its work (3.9 times at 65
tokens). The environment variable `KERAS_VIT_TPU_ATTENTION=xla` sends every
sequence to XLA's attention (a way round a kernel that the TPU's compiler
rejects, which happens after tracing, where no fallback can catch it). Each
reason for not taking the kernel is warned about once per process.
"""

import os
import warnings

# The kernel's tile along both sequence axes (`BlockSizes.get_default()`, every
# block of the forward and backward kernels); the padded length is a multiple of it.
BLOCK = 128
# Below one block of tokens XLA's attention is used (see the module docstring).
MIN_TOKENS = BLOCK

SPLASH = "splash (pallas)"
ENVIRONMENT_VARIABLE = "KERAS_VIT_TPU_ATTENTION"
CHOICES = ("splash", "xla")

_warned = set()


def _warn_once(reason, message):
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"keras_vit: {message}", RuntimeWarning, stacklevel=4)


def padded_length(length):
    """The token count rounded up to a whole number of kernel blocks."""
    return -(-length // BLOCK) * BLOCK


def chosen_kernel():
    """`"splash"` or `"xla"`: `KERAS_VIT_TPU_ATTENTION`, read at every trace (default `"splash"`).

    Raises:
        ValueError: if the variable is set to anything else.
    """
    chosen = os.environ.get(ENVIRONMENT_VARIABLE, "splash").strip().lower() or "splash"
    if chosen not in CHOICES:
        raise ValueError(
            f"The environment variable {ENVIRONMENT_VARIABLE} must be one of {', '.join(CHOICES)}. "
            f"Received: {ENVIRONMENT_VARIABLE}={os.environ[ENVIRONMENT_VARIABLE]!r}"
        )
    return chosen


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

    segment_ids = None
    if padded != length:
        # One segment for the tokens and one for the padding: a real query sees real keys only, and a
        # padded query sees the padding (its row is not empty, so its softmax is finite; it is dropped).
        segments = (jnp.arange(padded) >= length).astype(jnp.int32)
        segment_ids = kernels.SegmentIds(q=segments, kv=segments)
    outputs = jax.vmap(kernel, in_axes=(0, 0, 0, None))(to_kernel(query), to_kernel(key), to_kernel(value), segment_ids)
    return jnp.transpose(outputs[:, :, :length], (0, 2, 1, 3))


def _per_device(function, batch):
    """`function` in `jax.shard_map` over the global `keras.distribution`'s batch axis, or as it is.

    Returns:
        `(function, None)`, or `(function as it is, reason)` when the batch does not split
        evenly over the batch axis.
    """
    import jax
    import keras
    from jax.sharding import PartitionSpec

    distribution = keras.distribution.distribution()
    mesh = getattr(distribution, "device_mesh", None)
    if mesh is None or len(mesh.devices.flatten()) == 1:
        return function, None
    axis = distribution.batch_dim_name
    replicas = mesh.shape[mesh.axis_names.index(axis)]
    if batch % replicas:
        return function, f"a batch of {batch} does not split over the {replicas} devices of the batch axis {axis!r}"
    # Each device attends over its own examples; along the other axes (FSDP's "model") the
    # tokens are whole on every device, so the kernel sees whole sequences and all heads.
    spec = PartitionSpec(axis, None, None, None)
    return jax.shard_map(function, mesh=mesh.backend_mesh, in_specs=(spec, spec, spec), out_specs=spec,
                         check_vma=False), None


def _xla(query, key, value, reason, message):
    import jax

    _warn_once(reason, message)
    return jax.nn.dot_product_attention(query, key, value, scale=1.0, implementation="xla"), reason


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
    batch, length = query.shape[:2]
    if chosen_kernel() == "xla":
        return _xla(query, key, value, f"xla ({ENVIRONMENT_VARIABLE}=xla)",
                    f"attention runs as XLA's attention on the TPU, as {ENVIRONMENT_VARIABLE}=xla asks.")
    if length < MIN_TOKENS:
        return _xla(
            query, key, value, f"xla (fewer than {MIN_TOKENS} tokens)",
            f"attention over {length} tokens runs as XLA's attention on the TPU, not Pallas's Splash kernel: "
            f"sequences shorter than its {BLOCK}-token block would be padded to {BLOCK}, at "
            f"{(BLOCK / length) ** 2:.1f} times the work, to save little memory.",
        )
    splash, unsplit = _per_device(_splash, batch)
    if unsplit:
        return _xla(query, key, value, "xla (batch not split over the devices)",
                    f"attention runs as XLA's attention on the TPU, not Pallas's Splash kernel: {unsplit}.")
    try:
        return splash(query, key, value), SPLASH
    except (ImportError, ValueError, NotImplementedError) as error:
        # Raised while the kernel is built and traced: this JAX has no Splash, or it refuses the shapes.
        return _xla(
            query, key, value, f"xla (splash refused: {type(error).__name__})",
            f"Pallas's Splash kernel refused attention of shape {tuple(query.shape)} {query.dtype} "
            f"({type(error).__name__}: {error}); it runs as XLA's attention.",
        )

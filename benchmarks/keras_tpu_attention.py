"""What `keras.ops.dot_product_attention` computes on a TPU, reproduced on a CPU: a report for Keras.

    KERAS_BACKEND=jax python benchmarks/keras_tpu_attention.py [--lengths=64,197,256,1024] [--head_dim=64]

Self-contained (JAX, Keras and numpy; nothing of keras_vit), so that it can be sent
upstream as it is. The process is made to look like a TPU host where Keras looks
(`jax.devices()[0].platform` answers `"tpu"`), and Pallas kernels run in Pallas's
interpreter on the CPU (`pallas_call(..., interpret=True)`). Then Keras's JAX
backend takes its TPU branch, the Splash kernel, as on a real TPU.

For each token count it calls `keras.ops.dot_product_attention(q, k, v,
scale=1 / sqrt(head_dim), is_causal=False)` with no mask, and prints the largest
difference from numpy's `softmax(q k^T / sqrt(head_dim)) v` (what was asked), the
difference from numpy's *causal* `softmax(q k^T) v` (what Keras 3.15's TPU branch
builds: a causal mask when none is passed, and the queries multiplied by
`scale * sqrt(head_dim)` for a kernel that does not divide by `sqrt(head_dim)`),
and how many errors Keras logged (its fallback when Splash refuses, with a
traceback). Exit status 0 whatever Keras computes: this reports, it does not judge.
"""

import argparse
import contextlib
import logging
import os
from unittest import mock


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="64,197,256,1024", help="Comma-separated token counts.")
    parser.add_argument("--head_dim", type=int, default=64, help="Head size (ViT-B: 64).")
    args = parser.parse_args(argv)
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        parser.error(f"--lengths takes positive integers separated by commas. Received: --lengths={args.lengths!r}")
    args.lengths = lengths
    if args.head_dim < 1:
        parser.error(f"--head_dim takes a positive integer. Received: {args.head_dim}")
    return args


@contextlib.contextmanager
def tpu_on_the_cpu():
    """`jax.devices()` as TPU cores (CPU devices underneath) and Pallas interpreted."""
    import jax
    from jax.experimental import pallas

    cpu_devices, pallas_call = jax.devices, pallas.pallas_call
    tpu_cores = [mock.Mock(wraps=device, platform="tpu", id=device.id) for device in cpu_devices()]

    def interpreted(*args, **kwargs):  # Splash passes interpret=False itself
        return pallas_call(*args, **{**kwargs, "interpret": True})

    with mock.patch.object(jax, "devices", lambda *args, **kwargs: tpu_cores), \
            mock.patch.object(pallas, "pallas_call", interpreted):
        yield


class _Count(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record):
        self.count += 1


def attention(q, k, v, scale, causal):
    import numpy as np

    logits = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        length = q.shape[1]
        logits = np.where(np.tril(np.ones((length, length), bool)), logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", probs / probs.sum(-1, keepdims=True), v)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    import numpy as np

    if keras.backend.backend() != "jax":
        raise SystemExit(f"Keras's TPU branch is its JAX backend's: set KERAS_BACKEND=jax. "
                         f"Received: KERAS_BACKEND={keras.backend.backend()}")
    errors = _Count()
    logging.getLogger().addHandler(errors)  # Keras logs through absl's logger, which propagates here
    print(f"Keras {keras.__version__}, keras.ops.dot_product_attention(q, k, v, scale=1 / sqrt(d), "
          f"is_causal=False), d = {args.head_dim}, float32, on an emulated TPU (Pallas interpreted):\n")
    print("| tokens | max abs difference from softmax(q k^T / sqrt(d)) v | from causal softmax(q k^T) v "
          "| errors Keras logged |")
    print("|---|---|---|---|")
    rng = np.random.default_rng(0)
    for length in args.lengths:
        q, k, v = (rng.normal(size=(1, length, 2, args.head_dim)).astype("float32") for _ in range(3))
        errors.count = 0
        with tpu_on_the_cpu():
            got = keras.ops.dot_product_attention(q, k, v, scale=args.head_dim ** -0.5, is_causal=False)
        got = np.asarray(keras.ops.convert_to_numpy(got))
        right = np.abs(got - attention(q, k, v, args.head_dim ** -0.5, causal=False)).max()
        keras_315 = np.abs(got - attention(q, k, v, 1.0, causal=True)).max()
        print(f"| {length} | {right:.2e} | {keras_315:.2e} | {errors.count} |")


if __name__ == "__main__":
    main()

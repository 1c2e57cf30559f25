"""Where does a Keras ViT training step spend its time? Ablations of one step on the CPU.

    KERAS_BACKEND=tensorflow python benchmarks/ablate_train_step.py --variant=shipped
    (variants: shipped, malloc, erfc_gelu, tanh_gelu, sgd, no_attention,
    explicit_attention, no_xla)

Each run builds ViT-Ti/16 at 224 px, changes one thing, and prints the median
images/s of 3 training steps after a first (compiling) one, batch 16. Run each
variant in its own process; the JAX row of BENCHMARKS.md is `shipped` with
KERAS_BACKEND=jax. The changes are made by patching module attributes here, for
diagnosis only; the library is not modified.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if "--variant=malloc" in sys.argv:
    # TensorFlow's default CPU allocator instead of the BFC one the trainer turns
    # on; read once, before TensorFlow's first op, so it is set before imports.
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "false"

from train.cpu_allocator import use_bfc_cpu_allocator  # noqa: E402

use_bfc_cpu_allocator()  # as train/main.py (`shipped`); `malloc` set it to false above

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import keras_vit  # noqa: E402
from keras_vit.layers import attention, mlp  # noqa: E402

VARIANTS = (
    "shipped", "malloc", "erfc_gelu", "tanh_gelu", "sgd", "no_attention", "explicit_attention", "no_xla",
)


class _Ops:
    """`keras.ops` with `dot_product_attention` replaced."""

    def __init__(self, replacement):
        self._replacement = replacement

    def __getattr__(self, name):
        return self._replacement if name == "dot_product_attention" else getattr(ops, name)


def _explicit(query, key, value):
    q = ops.transpose(query, (0, 2, 1, 3))
    k = ops.transpose(key, (0, 2, 3, 1))
    probs = ops.softmax(ops.matmul(q, k) / float(np.sqrt(query.shape[-1])), axis=-1)
    return ops.transpose(ops.matmul(probs, ops.transpose(value, (0, 2, 1, 3))), (0, 2, 1, 3))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="shipped")
    parser.add_argument("--batch_size", type=int, default=16)
    args = parser.parse_args()
    if args.variant == "erfc_gelu":  # what `keras.activations.gelu` computes on TensorFlow
        mlp.gelu = lambda x: keras.activations.gelu(x, approximate=False)
    elif args.variant == "tanh_gelu":
        mlp.gelu = lambda x: keras.activations.gelu(x, approximate=True)
    elif args.variant == "no_attention":
        attention.ops = _Ops(lambda query, key, value: value)
    elif args.variant == "explicit_attention":
        attention.ops = _Ops(_explicit)
    model = keras_vit.ViT_Ti16()
    optimizer = keras.optimizers.SGD(1e-4) if args.variant == "sgd" else keras.optimizers.AdamW(1e-4)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=args.variant != "no_xla")
    x = np.random.default_rng(0).uniform(0, 255, (args.batch_size, 224, 224, 3)).astype("float32")
    y = np.arange(args.batch_size) % 1000
    model.train_on_batch(x, y)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - start)
    print(f"{args.variant} ({keras.backend.backend()}): {args.batch_size / statistics.median(times):.1f} images/s")


if __name__ == "__main__":
    main()

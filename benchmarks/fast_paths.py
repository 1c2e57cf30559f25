"""Each fast path of the training step on and off: images/s, compile time and peak memory.

    python benchmarks/fast_paths.py --model=ViT_Ti16 --image_size=224 --batch_size=16
    python benchmarks/fast_paths.py --model=main_job      # the model and batch of `train/main.py`

Every case is a fresh process that trains with `model.fit` on one in-memory batch
repeated (no input pipeline cost), times the second epoch (the first compiles),
and reads the peak memory of the training step from the device allocator
(TensorFlow's BFC allocator statistics on the CPU, `memory_stats` on a JAX
accelerator; the process peak RSS where neither exists). Cases:

- `shipped`: what the package does: fused qkv projection, `ops.dot_product_attention`,
  XLA (`jit_compile=True`), float32, no rematerialisation, one step per execution;
- `unfused_qkv`: three separate q, k, v projections instead of one fused matmul;
- `explicit_attention`: matmul, softmax, matmul instead of `ops.dot_product_attention`;
- `no_xla`: `jit_compile=False`;
- `xla_mirrored`: XLA inside a `tf.distribute.MirroredStrategy` scope (TensorFlow only);
- `steps_per_execution`: `--steps_per_execution` steps per call into the compiled function;
- `bfloat16`: the `mixed_bfloat16` policy;
- `remat`: every transformer block recomputed in the backward pass.

With `--repeats=R` the cases take turns R times (so that a drift in the machine's
speed spreads over all of them) and each row shows the median run and all runs.
Patches made for `unfused_qkv` and `explicit_attention` are diagnostic only; the
library is not modified. Prints a Markdown table; `--output` also writes it.
"""

import argparse
import os
import platform
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from runs.reporting import (  # noqa: E402
    check_positive, depth_overrides, emit_result, median_run, rate, run_measurement, write_atomic,
)
from train.cpu_allocator import use_bfc_cpu_allocator  # noqa: E402

CASES = ("shipped", "unfused_qkv", "explicit_attention", "no_xla", "xla_mirrored", "steps_per_execution",
         "bfloat16", "remat")
# The `fashion_mnist_vit` preset's model (`train/main.py`'s default until 2026-11-22, when the
# default became a hybrid), on 28 x 28 x 1 images, 10 classes, batch 128.
MAIN_JOB = {"patch_size": 7, "hidden_size": 96, "num_layers": 6, "num_heads": 4, "mlp_dim": 192}


def _patch(case):
    """Swaps in the slower variant of one fast path (diagnosis only)."""
    from keras import ops

    from keras_vit.layers import attention

    if case == "unfused_qkv":
        def separate_qkv(self, tokens):
            width = self.num_heads * self.head_dim
            kernel, bias = self.qkv.kernel, self.qkv.bias
            shape = ops.shape(tokens)
            parts = []
            for i in range(3):  # three (D, D) projections, as three Dense layers would do
                part = ops.matmul(tokens, kernel[:, i * width:(i + 1) * width])
                if bias is not None:
                    part = part + bias[i * width:(i + 1) * width]
                parts.append(ops.reshape(part, (shape[0], shape[1], self.num_heads, self.head_dim)))
            return tuple(parts)

        attention.MultiHeadSelfAttention._qkv = separate_qkv
    elif case == "explicit_attention":
        def explicit(self, tokens, training=None, return_attention_scores=False):
            query, key, value = self._qkv(tokens)
            probs = self.compute_attention(query, key)
            x = attention._merge_heads(self._attend(probs, ops.transpose(value, (0, 2, 1, 3)), training))
            return self.out(x)

        attention.MultiHeadSelfAttention.call = explicit


def _device_peak_mib(backend):
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            return tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2**20
        except ValueError:  # not the BFC allocator: no statistics
            pass
    elif backend == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            return stats["peak_bytes_in_use"] / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak(backend):
    if backend == "tensorflow":
        import tensorflow as tf

        try:
            tf.config.experimental.reset_memory_stats("CPU:0")
        except ValueError:
            pass


def _epoch_timer():
    """A callback that records each epoch's wall time in its `seconds` list."""
    import keras

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(time.perf_counter() - self.start)

    return EpochTimer()


def single(args):
    """One case in this process; prints a JSON line."""
    import keras
    import numpy as np

    import keras_vit

    backend = keras.backend.backend()
    if args.case == "xla_mirrored" and backend != "tensorflow":
        emit_result({"case": args.case, "error": "TensorFlow only"})
        return
    _patch(args.case)
    if args.model == "main_job":
        image_shape, classes = (28, 28, 1), 10
        kwargs = dict(MAIN_JOB, image_size=28, num_channels=1, num_classes=10)
        if args.depth is not None:
            kwargs["num_layers"] = args.depth
    else:
        image_shape, classes = (args.image_size, args.image_size, 3), 1000
        kwargs = {"image_size": args.image_size, **depth_overrides(args.model, args.depth)[0]}
    if args.case == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    if args.case == "remat":
        kwargs["remat"] = True
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (args.batch_size, *image_shape)).astype("float32")
    y = (np.arange(args.batch_size) % classes).astype("int32")
    spe = args.steps_per_execution if args.case == "steps_per_execution" else 1
    steps = args.steps - args.steps % spe or spe  # whole executions only

    def build_and_compile():
        if args.model == "main_job":
            model = keras_vit.VisionTransformer(**kwargs)
        else:
            model = keras_vit.build_variant(args.model, **kwargs)
        model.compile(
            optimizer=keras.optimizers.AdamW(1e-4),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=args.case != "no_xla",
            steps_per_execution=spe,
        )
        return model

    if args.case == "xla_mirrored":
        import tensorflow as tf

        with tf.distribute.MirroredStrategy().scope():
            model = build_and_compile()
    else:
        model = build_and_compile()
    if backend == "tensorflow":
        import tensorflow as tf

        # One batch repeated leaves tf.data nothing to tune, and its autotuner, left on, stalled
        # whole epochs of the default preset's hybrid at one step per 170 ms, one core idle (7 of
        # 20 epochs of 30 steps; 0 of 18 with it off; 2-core AMD EPYC, 2026-11-30).
        options = tf.data.Options()
        options.autotune.enabled = False
        data = tf.data.Dataset.from_tensors((x, y)).repeat().with_options(options)
    else:
        def batches():
            while True:
                yield x, y
        data = batches()
    timer = _epoch_timer()
    # Epoch 1 traces and compiles; the peak is then reset so that epoch 2 shows the step's own.
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[timer])
    _reset_peak(backend)
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[timer])
    emit_result({
        "case": args.case, "compile_s": timer.seconds[0] - timer.seconds[1],
        "images_per_s": steps * args.batch_size / timer.seconds[1],
        "peak_mib": _device_peak_mib(backend), "steps": steps, "steps_per_execution": spe,
    })


def measure(case, args):
    return run_measurement(
        [os.path.abspath(__file__), "--single", f"--case={case}", f"--model={args.model}",
         f"--image_size={args.image_size}", f"--batch_size={args.batch_size}", f"--steps={args.steps}",
         f"--steps_per_execution={args.steps_per_execution}",
         *([f"--depth={args.depth}"] if args.depth is not None else [])],
        case=case,
    )


def table(results, args):
    """Markdown table; `results` maps each case to its runs."""
    import keras

    rows = [median_run(runs) for runs in results.values()]
    base = next((r for r in rows if r["case"] == "shipped" and "error" not in r), None)
    lines = ["| case | images/s | runs | vs shipped | compile s | peak MiB |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | n/a: {r['error']} | | | | |")
            continue
        name = r["case"] + (f" ({r['steps_per_execution']})" if r["case"] == "steps_per_execution" else "")
        ratio = f"{r['images_per_s'] / base['images_per_s']:.2f}" if base else ""
        runs = ", ".join(rate(v) for v in r["runs"])
        lines.append(f"| {name} | {rate(r['images_per_s'])} | {runs} | {ratio} | {r['compile_s']:.1f} | "
                     f"{r['peak_mib']:.0f} |")
    model = "main_job (the fashion_mnist_vit preset's ViT, 28 px)" if args.model == "main_job" else (
        f"{args.model}, {args.image_size} px")
    header = (f"Model: {model}, batch {args.batch_size}, {args.steps} timed steps, {args.repeats} repeats. Machine: {platform.machine()}, "
              f"{os.cpu_count()} CPUs. backend={keras.backend.backend()}, keras {keras.__version__}. "
              f"Date: {time.strftime('%Y-%m-%d')}.")
    return "\n".join([header, "", *lines])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ViT_Ti16", help="a keras_vit builder name, or main_job")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8, help="timed steps (rounded down to whole executions)")
    parser.add_argument("--steps_per_execution", type=int, default=8)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--repeats", type=int, default=1, help="measure each case this many times")
    parser.add_argument("--output", default=None, help="also write the table to this file")
    parser.add_argument("--depth", type=int, default=None,
                        help="blocks (per stage for Swin) instead of the model's, for smoke runs")
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    use_bfc_cpu_allocator()  # as train/main.py: timed training on a CPU runs with it
    if args.single:
        return single(args)
    import keras_vit

    if args.model != "main_job" and args.model not in keras_vit.VARIANTS:
        parser.error(f"--model: unknown {args.model!r}; accepted: main_job, {', '.join(sorted(keras_vit.VARIANTS))}")
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        parser.error(f"--cases: unknown {unknown}; accepted: {', '.join(CASES)}")
    check_positive(parser, args, "batch_size", "steps", "steps_per_execution", "repeats", "depth")
    results = {case: [] for case in cases}
    for _ in range(args.repeats):
        for case in cases:
            results[case].append(measure(case, args))
            print(results[case][-1], file=sys.stderr, flush=True)
    text = table(results, args)
    print(text)
    if args.output:
        write_atomic(args.output, text)


if __name__ == "__main__":
    main()

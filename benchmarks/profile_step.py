"""Op-level profile of one XLA-compiled Keras training step on the CPU.

    python benchmarks/profile_step.py --variant=ViT_Ti16 --batch_size=16 [--backend=jax]

Compiles the training step, runs two warm-up steps, then traces one step with the
backend's profiler (TensorFlow's, or JAX's) while XLA:CPU annotates every HLO it
runs (`--xla_cpu_enable_xprof_traceme`). Prints the step's wall time and the process
CPU time spent in the kernel (page faults show up there), then two tables:

- time per kind of HLO (the name XLA gives a fusion, numbering dropped), summed
  over the step's threads, so concurrent ops can add up to more than wall time;
- every matrix product grouped by shape and by the op it came from, with its
  achieved GFLOP/s, from the optimized HLO that XLA dumps. A product XLA hands to a
  library inside a fusion (JAX's XLA:CPU runs most of them as `ynn_fusion`,
  through YNNPACK) is rated under the fusion's name, elementwise work fused with it
  included (JAX's attention logits come fused with the softmax's max and exp).
  A rate above the machine's peak means the product ran asynchronously on the thread
  pool, its traced event covering only the launch (seen for XLA's own dots under JAX).

A dot whose work another, concurrently running dot does on the same threads shows
an inflated rate for the one and a deflated rate for the other; read such pairs
(a layer's input and weight gradients) together.
"""

import argparse
import collections
import glob
import math
import os
import re
import resource
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from runs.reporting import check_positive, depth_overrides  # noqa: E402

# Containers and runtime bookkeeping in the trace, not HLOs.
_NOT_HLO = re.compile(r"^(ThunkExecutor|SlinkyThreadPool|Eager|TFE_|__inference|KernelAndDevice|CpuExecutable|"
                      r"BlockUntilReady|one_step_on_data|tf\.|end: |\$|PjitFunction|H2D |D2H |shard_args|DevicePut)")
# The compiled training step's module in XLA's dump, per backend.
_STEP_MODULE = {"tensorflow": "one_step_on_data", "jax": "jit_train_step"}


def _dots(hlo_text):
    """name -> (flops, shape, contracted size, source op) for every product of the optimized module.

    A fusion whose computation holds a dot runs as one traced event named after the
    fusion, so it is listed under that name with the dot's shape and op.
    """
    shapes, dots, fusions, dot_of_computation = {}, {}, {}, {}
    computation = None
    for line in hlo_text.splitlines():
        header = re.match(r"(?:ENTRY )?%([\w\-.]+) \(.*\{$", line)
        if header:
            computation = header.group(1)
            continue
        match = re.match(r"\s*(?:ROOT )?%?([\w\-.]+) = \w+\[([\d,]*)\]\S* (\w+)\((.*)", line)
        if not match:
            continue
        name, dims, opcode, rest = match.groups()
        dims = [int(d) for d in dims.split(",") if d]
        shapes[name] = dims
        if opcode == "dot":
            lhs = re.match(r"%([\w\-.]+)", rest).group(1)
            contracting = [int(c) for c in re.search(r"lhs_contracting_dims=\{([\d,]*)\}", rest).group(1).split(",")]
            source = re.search(r'op_name="([^"]*)"', rest)
            dots[name] = (dims, lhs, contracting, source.group(1) if source else "")
            dot_of_computation[computation] = name
        elif opcode == "fusion":
            called = re.search(r"calls=%([\w\-.]+)", rest)
            if called:
                fusions[name] = called.group(1)
    for name, called in fusions.items():
        if called in dot_of_computation:
            dots[name] = dots[dot_of_computation[called]]
    result = {}
    for name, (dims, lhs, contracting, source) in dots.items():
        k = math.prod(shapes[lhs][axis] for axis in contracting)
        # Block numbers dropped so that the same op of every block is one group.
        result[name] = (2 * math.prod(dims) * k, "x".join(map(str, dims)), k, re.sub(r"encoderblock_\d+", "block_*", source))
    return result


def _op_times_ms(logdir):
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = names.get(event.metadata_id, "")
                if not _NOT_HLO.match(name):
                    times[name] += event.duration_ps / 1e9
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", default="ViT_Ti16")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--top", type=int, default=25, help="rows of the HLO-kind table")
    parser.add_argument("--backend", choices=sorted(_STEP_MODULE), default="tensorflow")
    parser.add_argument("--depth", type=int, default=None,
                        help="blocks (per stage for Swin) instead of the variant's, for smoke runs")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="profile_step_")
    try:
        _profile(parser, args, workdir)
    finally:
        # The HLO dump and the trace take tens of MB per run: nothing of them outlives the tables.
        shutil.rmtree(workdir, ignore_errors=True)


def _profile(parser, args, workdir):
    """Runs the traced step with its files under `workdir` and prints the tables."""
    dump = os.path.join(workdir, "hlo")
    # XLA reads its flags once, when the backend starts: set them before importing it.
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_cpu_enable_xprof_traceme=true",
                                        f"--xla_dump_to={dump}", "--xla_dump_hlo_as_text"])
    os.environ["KERAS_BACKEND"] = args.backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, ROOT)
    from train.cpu_allocator import use_bfc_cpu_allocator

    use_bfc_cpu_allocator()  # as train/main.py, before TensorFlow starts
    import keras
    import numpy as np

    import keras_vit

    if args.backend == "jax":
        import jax

        start_trace, stop_trace = jax.profiler.start_trace, jax.profiler.stop_trace
    else:
        import tensorflow as tf

        start_trace, stop_trace = tf.profiler.experimental.start, tf.profiler.experimental.stop

    if args.variant not in keras_vit.VARIANTS:
        parser.error(f"--variant: unknown {args.variant!r}; accepted: {', '.join(sorted(keras_vit.VARIANTS))}")
    check_positive(parser, args, "depth")
    model = keras_vit.build_variant(args.variant, image_size=args.image_size,
                                    **depth_overrides(args.variant, args.depth)[0])
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    x = np.random.default_rng(0).uniform(0, 255, (args.batch_size, args.image_size, args.image_size, 3))
    x = x.astype("float32")
    y = np.arange(args.batch_size) % 1000
    for _ in range(3):
        model.train_on_batch(x, y)
    logdir = os.path.join(workdir, "trace")
    start_trace(logdir)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    model.train_on_batch(x, y)
    seconds, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    stop_trace()

    times = _op_times_ms(logdir)
    modules = [p for p in glob.glob(os.path.join(dump, "*cpu_after_optimizations.txt")) if _STEP_MODULE[args.backend] in p]
    with open(max(modules, key=os.path.getsize)) as f:
        dots = _dots(f.read())
    print(f"{args.variant}, {args.image_size} px, {args.backend}, batch {args.batch_size}: traced step {seconds * 1e3:.0f} ms wall, "
          f"{(after.ru_utime - before.ru_utime) * 1e3:.0f} ms user CPU, "
          f"{(after.ru_stime - before.ru_stime) * 1e3:.0f} ms kernel CPU, {sum(times.values()):.0f} ms in HLOs "
          f"(summed over threads)\n")
    kinds, counts = collections.Counter(), collections.Counter()
    for name, ms in times.items():
        kind = re.sub(r"\.\d+$", "", name)
        kinds[kind] += ms
        counts[kind] += 1
    print("| HLO kind | ms | count |\n|---|---|---|")
    for kind, ms in kinds.most_common(args.top):
        print(f"| {kind} | {ms:.1f} | {counts[kind]} |")
    groups = collections.defaultdict(lambda: [0.0, 0, 0])
    for name, (flops, shape, k, source) in dots.items():
        if name in times:
            group = groups[(shape, k, source)]
            group[0] += times[name]
            group[1] += flops
            group[2] += 1
    print("\n| dot output | contracted | from | count | ms | GFLOP/s |\n|---|---|---|---|---|---|")
    for (shape, k, source), (ms, flops, count) in sorted(groups.items(), key=lambda item: -item[1][0]):
        print(f"| {shape} | {k} | {source} | {count} | {ms:.1f} | {flops / ms / 1e6:.0f} |")


if __name__ == "__main__":
    main()

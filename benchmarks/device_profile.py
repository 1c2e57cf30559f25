"""Where one compiled training step spends its time, by kind of work (JAX: GPU, TPU or CPU).

    python benchmarks/device_profile.py --variant=ViT_B16 --batch_size=256 --precision=bfloat16

Compiles the Keras training step (`model.train_on_batch`: loss, gradient and AdamW,
`jit_compile=True`), runs warm-up steps, traces `--steps` steps with `jax.profiler`,
and attributes every kernel the device ran to the HLO instruction it ran for (the
trace's `hlo_op`; on a CPU each HLO is traced itself, with
`--xla_cpu_enable_xprof_traceme`), then each instruction to a kind of work, read
from XLA's optimized program (dumped with `--xla_dump_to`) by `benchmarks/hlo_kinds.py`:
matmul, attention (a fused kernel, or attention's own ops where none runs), elementwise
or optimizer; device time in no instruction of the step (a copy) is "other".

Prints the step's wall time, the device's busy time (the union of its kernels'
intervals: on a GPU the rest of the step is the device idle, waiting for
launches), the time and share of each kind per step, and the `--top` kernels
by time. On a GPU, XLA's command buffers (CUDA graphs) are off while profiling,
so that every kernel carries its instruction's name; the step may then run a
little slower than in `bench.py`. On a CPU, the kernels of concurrent threads add
up: the kinds can sum to more than the busy time.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.hlo_kinds import KINDS, Classifier, parse_hlo  # noqa: E402


def kernel_events(space):
    """`[(kernel, hlo_op, hlo_module, program_id, start_ns, duration_ns)]` of a trace.

    Args:
        space: A `jax.profiler.ProfileData`.

    Returns:
        The events of the device's kernel lines (a GPU's streams, a TPU's XLA ops);
        with no device plane (a CPU), the host's events that name an HLO module.
    """
    devices = [plane for plane in space.planes if re.fullmatch(r"/device:(GPU|TPU):\d+", plane.name)]
    events = []
    for plane in devices or [plane for plane in space.planes if plane.name == "/host:CPU"]:
        lines = list(plane.lines)
        streams = [line for line in lines if line.name.startswith("Stream #")]
        # A GPU's kernels are on its streams; a TPU's on "XLA Ops". Any other device line
        # (modules, steps) spans many kernels and would count them twice.
        kernel_lines = (streams or [line for line in lines if line.name == "XLA Ops"]) if devices else lines
        for line in kernel_lines:
            for event in line.events:
                stats = dict(event.stats)
                if not devices and "hlo_module" not in stats:
                    continue
                # A kernel's instruction is its `hlo_op` (XLA's kernel annotation); a TPU's
                # XLA Ops are named after theirs.
                op = stats.get("hlo_op", event.name if line.name == "XLA Ops" or not devices else "")
                events.append((event.name, str(op), str(stats.get("hlo_module", "")),
                               stats.get("program_id"), event.start_ns, event.duration_ns))
    return events


def describe_trace(space, limit=3):
    """The trace's planes, their lines and a few events with their stats: what to read when
    the attribution fails on a platform whose trace differs from the one expected."""
    found = []
    for plane in space.planes:
        lines = list(plane.lines)
        found.append(f"plane {plane.name!r}: lines {[line.name for line in lines][:12]}")
        if plane.name.startswith("/device:"):
            for line in lines[:2]:
                for event in list(line.events)[:limit]:
                    found.append(f"  {line.name!r}: {event.name[:80]!r} {dict(event.stats)}")
    return "\n".join(found)


def busy_ns(events):
    """The union of the events' intervals: how long at least one of them ran."""
    total, end = 0.0, float("-inf")
    for _, _, _, _, start, duration in sorted(events, key=lambda event: event[4]):
        if start + duration > end:
            total += start + duration - max(start, end)
            end = start + duration
    return total


def step_module(events):
    """`(hlo_module, program_id)` that ran longest in the trace: the training step.

    `(None, None)` when no event names its module (a TPU's ops may not).
    """
    times = collections.Counter()
    for _, _, module, program, _, duration in events:
        if module:
            times[(module, program)] += duration
    return times.most_common(1)[0][0] if times else (None, None)


def find_program(dump, module, program, traced_ops):
    """The optimized program in XLA's dump that ran as `module`, parsed (`parse_hlo`).

    Args:
        dump: The `--xla_dump_to` folder.
        module: The module name (`jit_train_step`), or None: any module dumped.
        program: The trace's `program_id`, or None: XLA numbers its dump files by it.
        traced_ops: HLO op names seen in the trace, to choose among candidates.

    Returns:
        `(instructions, computations)` of the candidate that holds the most traced ops.
    """
    candidates = glob.glob(os.path.join(dump, f"module_*.{module or '*'}.*after_optimizations.txt"))
    numbered = [path for path in candidates
                if program is not None and os.path.basename(path).startswith(f"module_{int(program):04d}.")]
    programs = []
    for path in numbered or candidates:
        with open(path) as f:
            programs.append(parse_hlo(f.read()))
    if not programs:
        raise RuntimeError(f"no optimized program named {module} in XLA's dump {dump}")
    return max(programs, key=lambda parsed: sum(op in parsed[0] for op in traced_ops))


def attention_layers(model):
    """`{name: sublayer names}` of the model's attention layers (ViT's, Swin's, GPSA)."""
    from keras_vit.layers.attention import _AttentionBase  # every attention layer's base

    return {layer.name: {child.name for child in layer._flatten_layers(include_self=False, recursive=False)}
            for layer in model._flatten_layers() if isinstance(layer, _AttentionBase)}


def summarize(events, classifier, steps, top):
    """The per-kind and top-kernel tables of the step's events, as Markdown lines."""
    per_kind, count = collections.Counter(), collections.Counter()
    kernels = collections.defaultdict(lambda: [0.0, 0, collections.Counter(), ""])
    for kernel, op, _, _, _, duration in events:
        kind = classifier.kind(op) if op in classifier.instructions else "other"
        per_kind[kind] += duration
        count[kind] += 1
        row = kernels[kernel]
        row[0] += duration
        row[1] += 1
        row[2][kind] += duration
        if op in classifier.instructions and not row[3]:
            row[3] = re.sub(r"^jit\([\w]+\)/", "", classifier.instructions[op].source)
            row[3] = re.sub(r"(block|stage|layer)_\d+", r"\1_*", row[3])
    total = sum(per_kind.values()) or 1
    lines = ["| kind | ms per step | share | kernels per step |", "|---|---|---|---|"]
    for kind in KINDS:
        lines.append(f"| {kind} | {per_kind[kind] / steps / 1e6:.2f} | {100 * per_kind[kind] / total:.1f}% | "
                     f"{count[kind] / steps:.0f} |")
    lines += ["", f"The {top} kernels that took longest:", "",
              "| kernel | kind | from | per step | ms per step | share |", "|---|---|---|---|---|---|"]
    for kernel, (duration, calls, kinds, source) in sorted(kernels.items(), key=lambda item: -item[1][0])[:top]:
        name = kernel if len(kernel) <= 72 else kernel[:69] + "..."
        lines.append(f"| `{name}` | {kinds.most_common(1)[0][0]} | {source or ' '} | {calls / steps:.0f} | "
                     f"{duration / steps / 1e6:.3f} | {100 * duration / total:.1f}% |")
    return lines, per_kind


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="ViT_B16", help="A keras_vit builder name.")
    parser.add_argument("--image_size", type=int, default=None, help="Defaults to the variant's.")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--precision", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--steps", type=int, default=3, help="Traced steps, after 3 warm-up steps.")
    parser.add_argument("--top", type=int, default=15, help="Rows of the kernel table.")
    parser.add_argument("--depth", type=int, default=None,
                        help="Blocks (per stage for Swin) instead of the variant's, for smoke runs.")
    parser.add_argument("--output", default=None, help="Also write the tables to this file.")
    args = parser.parse_args(argv)
    from runs.reporting import check_positive

    check_positive(parser, args, "batch_size", "steps", "top", "depth")
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="device_profile_")
    try:
        text = _profile(parser, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # the dump and trace: tens of MB
    print(text)
    if args.output:
        from runs.reporting import write_atomic

        write_atomic(args.output, text)


def _profile(parser, args, workdir):
    """Runs the traced steps with their files under `workdir`; returns the tables."""
    dump = os.path.join(workdir, "hlo")
    # XLA reads its flags once, when the backend starts: set them before importing JAX.
    # Command buffers off: a CUDA graph's kernels would carry no instruction's name.
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_cpu_enable_xprof_traceme=true",
                                        "--xla_gpu_enable_command_buffer=", f"--xla_dump_to={dump}",
                                        "--xla_dump_hlo_as_text", "--xla_dump_hlo_module_re=train_step"])
    os.environ["KERAS_BACKEND"] = "jax"
    # A program from JAX's persistent cache is not compiled, so not dumped: this process
    # compiles its own (gpu.sh sets the cache for the benchmarks).
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    import jax
    import keras
    import numpy as np

    import keras_vit
    from keras_vit.layers import attention_kernels, code_path
    from runs.reporting import depth_overrides

    if args.variant not in keras_vit.VARIANTS:
        parser.error(f"--variant: unknown {args.variant!r}; accepted: {', '.join(sorted(keras_vit.VARIANTS))}")
    kwargs = dict(depth_overrides(args.variant, args.depth)[0])
    if args.image_size is not None:
        kwargs["image_size"] = args.image_size
    if args.precision == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    model = keras_vit.build_variant(args.variant, **kwargs)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=True)
    size = model.input_shape[1]
    images = np.random.default_rng(0).uniform(0, 255, (args.batch_size, size, size, 3)).astype("float32")
    labels = np.arange(args.batch_size) % model.output_shape[-1]
    # On the device before timing, as bench.py's batches: the trace holds the step, not a copy-in.
    images, labels = jax.device_put(images), jax.device_put(labels)
    for _ in range(3):
        model.train_on_batch(images, labels)
    trace = os.path.join(workdir, "trace")
    jax.profiler.start_trace(trace)
    start = time.perf_counter()
    for _ in range(args.steps):
        model.train_on_batch(images, labels)  # returns the loss as numpy: the step has finished
    seconds = (time.perf_counter() - start) / args.steps
    jax.profiler.stop_trace()

    space = jax.profiler.ProfileData.from_file(glob.glob(os.path.join(trace, "**", "*.xplane.pb"), recursive=True)[0])
    events = kernel_events(space)
    module, program = step_module(events)
    if module is not None:
        # The step's kernels only: copies outside it (the loss to the host) are not the step.
        events = [event for event in events if event[2] == module]
    if not events:
        raise RuntimeError(f"the trace holds no kernel of the training step:\n{describe_trace(space)}")
    instructions, computations = find_program(dump, module, program, {event[1] for event in events})
    classifier = Classifier(instructions, computations, attention_layers(model), model.optimizer.name)
    tables, _ = summarize(events, classifier, args.steps, args.top)
    attributed = (sum(event[5] for event in events if event[1] in instructions)
                  / max(sum(event[5] for event in events), 1))
    platform = jax.default_backend()
    device = jax.devices()[0].device_kind
    header = [
        f"Time per kind of work in {args.variant}'s training step ({args.precision}, batch {args.batch_size}, "
        f"{size} px, AdamW) on {device} ({platform}), the mean of {args.steps} traced steps, "
        f"`python benchmarks/device_profile.py`: code path {code_path()}, attention kernels {attention_kernels()}. "
        f"Step {seconds * 1e3:.1f} ms wall; the {'device' if platform != 'cpu' else 'HLOs'} busy "
        f"{busy_ns(events) / args.steps / 1e6:.1f} ms of it"
        + (" (summed over threads below)." if platform == "cpu" else ".")
        + f" {100 * attributed:.1f}% of the kernels' time is attributed to an instruction of the step's program"
        " (the rest is \"other\"); the step's wall time includes the profiler's own overhead.",
        "",
    ]
    text = "\n".join(header + tables)
    if attributed < 0.9:
        # A table with most of the time in "other" is no profile: the trace differs from the
        # one this script reads. Say what it holds, and fail (gpu.sh notes the failure).
        print(f"{text}\n\nOnly {100 * attributed:.1f}% of the time was attributed. The trace:\n"
              f"{describe_trace(space)}", file=sys.stderr)
        raise SystemExit(1)
    return text


if __name__ == "__main__":
    main()

"""What a training step keeps for its backward pass, per token x channel x layer, by source line.

    python benchmarks/saved_residuals.py --variant=ViT_B16 [--paths=cpu,accelerator,tpu] [--output=BENCHMARKS.md]

Traces the loss and gradient of one training step with JAX on the CPU, abstractly
(shapes only: nothing is allocated or run, so ViT-B/16 takes seconds), under
`--precision` (default `mixed_bfloat16`, what accelerators train in), once per
code path (`KERAS_VIT_CODE_PATH`, `keras_vit.layers.code_path`), and lists the
residuals JAX saves for the backward pass (`jax.ad_checkpoint`'s
`saved_residuals`, the data behind `print_saved_residuals`) grouped by source line.

Per token x channel x layer: the step is traced at two batch sizes and the
difference taken, which leaves exactly the bytes that grow with the batch
(the activations: weights and their casts cancel), divided by the added tokens,
the width and the depth. "Attention matrices" are the residuals whose last two
axes are both the sequence length (the `L x L` scores and probabilities a fused
kernel would not keep); "the TPU kernel's" are what Pallas's Splash kernel keeps
on the `tpu` path (the emulated TPU, `runs/tpu_emulator.py`): its padded q, k, v
and output, and its per-row log-sum-exp; "outside attention" is the rest. The
gradient's FLOPs are XLA's cost analysis of the lowered step, for the
recomputation's price (not on the `tpu` path, whose kernel is lowered as the
interpreter's loops, not as a TPU runs it).

Prints a Markdown table per path and a summary; `--output` writes them as the
"Activation memory" section of that file (atomically).
"""

import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.abstract_step import abstract_arguments, training_loss  # noqa: E402
from runs.reporting import replace_section, write_atomic  # noqa: E402

SECTION = "## Activation memory"
# The code paths (`keras_vit.layers.code_path`), and the accelerator path on an emulated TPU
# (`runs/tpu_emulator.py`), where attention is Pallas's Splash kernel.
PATHS = ("cpu", "accelerator", "tpu")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="ViT_B16", help="A keras_vit builder name.")
    parser.add_argument("--image_size", type=int, default=None, help="Defaults to the variant's.")
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("mixed_bfloat16", "float32"))
    parser.add_argument("--paths", default=",".join(PATHS), help=f"Comma-separated, of {', '.join(PATHS)}.")
    parser.add_argument("--batch_sizes", default="2,4", help="The two batch sizes whose difference is taken.")
    parser.add_argument("--top", type=int, default=12, help="Source lines listed per path.")
    parser.add_argument("--output", default=None, help="A Markdown file to write the section into.")
    args = parser.parse_args(argv)
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    for path in args.paths:
        if path not in PATHS:
            parser.error(f"--paths takes {', '.join(PATHS)}. Received: --paths={path!r}")
    try:
        small, large = (int(b) for b in args.batch_sizes.split(","))
    except ValueError:
        small = large = 0
    if not 0 < small < large:
        parser.error(f"--batch_sizes takes two increasing positive integers. Received: {args.batch_sizes!r}")
    args.batch_sizes = (small, large)
    return args


def _saved_residuals():
    # Public as `print_saved_residuals`; the list behind it lives here.
    from jax._src.ad_checkpoint import saved_residuals

    return saved_residuals


def _source(description):
    """`"bf16[...] output of dot_general from .../token_dense.py:32:20 (dense_on_tokens)"` -> a short source."""
    match = re.search(r"from (\S+):(\d+)(?::\d+)? \((.+)\)$", description)
    if not match:
        return description.split(" from ")[-1]
    path, line, function = match.groups()
    path = os.path.relpath(path, ROOT) if path.startswith(ROOT) else os.path.basename(path)
    return f"{path}:{line} ({function})"


# Sources of the residuals the TPU's attention kernel keeps: keras_vit's wrapper, and Splash itself.
KERNEL_SOURCES = ("tpu_attention.py", "splash_attention")


def kind(source, shape):
    """`"matrices"` (L x L), `"kernel"` (kept by the TPU's attention kernel) or `"outside"`.

    The shape is asked first: an `L x L` matrix is one wherever it was made (XLA's attention,
    which the TPU's path takes for short sequences, is called from the kernel's module too).
    """
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 1:
        return "matrices"
    return "kernel" if any(name in source for name in KERNEL_SOURCES) else "outside"


def trace(variant, image_size, precision, path, batch_sizes):
    """Residual bytes per batch-grown source line, and the gradient's FLOPs, for one code path.

    Returns:
        dict with `rows` ({(source, dtype, kind): bytes per added example}, `kind` as `kind` says),
        `length` (tokens per example), `width`, `depth` and `flops` (at the larger batch; None on
        the `tpu` path).
    """
    import contextlib

    from runs.tpu_emulator import emulated_tpu

    # "tpu": the accelerator path as a TPU takes it (its Pallas attention), on the emulated TPU.
    os.environ["KERAS_VIT_CODE_PATH"] = "auto" if path == "tpu" else path
    import jax
    import keras
    import numpy as np

    import keras_vit
    from keras_vit.inspection import layers_of
    from keras_vit.layers import TransformerBlock

    keras.mixed_precision.set_global_policy(precision)
    kwargs = {} if image_size is None else {"image_size": image_size}
    with keras.StatelessScope(initialize_variables=False):
        model = getattr(keras_vit, variant)(**kwargs)
    blocks = layers_of(model, TransformerBlock)
    if not blocks:
        raise ValueError(f"`--variant` must be a ViT-like model (ViT, DeiT, hybrid, ConViT). Received: {variant!r}")
    loss = training_loss(model)
    totals = []
    for batch in batch_sizes:
        trainable, frozen, images, labels = abstract_arguments(model, batch)
        with emulated_tpu() if path == "tpu" else contextlib.nullcontext():
            residuals = _saved_residuals()(loss, trainable, frozen, images, labels)
        rows = collections.Counter()
        for aval, description in residuals:
            shape, source = tuple(aval.shape), _source(description)
            rows[(source, aval.dtype.name, kind(source, shape))] += int(np.prod(shape)) * aval.dtype.itemsize
        totals.append(rows)
    flops = None  # on the tpu path the kernel is lowered as the interpreter's loops: not a TPU's FLOPs
    if path != "tpu":
        analysis = jax.jit(jax.grad(loss)).lower(trainable, frozen, images, labels).cost_analysis()
        analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
        flops = float((analysis or {}).get("flops", float("nan")))
    added = batch_sizes[1] - batch_sizes[0]
    grown = {key: (totals[1][key] - totals[0].get(key, 0)) / added for key in totals[1]}
    _, length, width = blocks[0].input.shape
    return {
        "rows": {key: value for key, value in grown.items() if value > 0},
        "width": width,
        "depth": len(blocks),
        "flops": flops,
        "length": length,
    }


def summarize(result):
    """Bytes per token x channel x layer: ({kind: bytes}, [(bytes, source, dtype, kind)] largest first)."""
    unit = result["length"] * result["width"] * result["depth"]
    totals = {name: 0.0 for name in ("outside", "matrices", "kernel")}
    for (_, _, name), value in result["rows"].items():
        totals[name] += value / unit
    return totals, sorted(
        ((v / unit, source, dtype, name) for (source, dtype, name), v in result["rows"].items()), reverse=True
    )


def render(args, results):
    import datetime
    import platform

    import jax
    import keras

    lines = [
        SECTION,
        "",
        f"{datetime.date.today().isoformat()}, {platform.machine()} {platform.system()}, Python "
        f"{platform.python_version()}, JAX {jax.__version__}, Keras {keras.__version__}; a trace, so the "
        "figures are the program's, not the machine's.",
        "",
        f"`python benchmarks/saved_residuals.py --variant={args.variant} --precision={args.precision}`: "
        f"residuals JAX saves for the backward pass of one training step, traced on the CPU, in bytes per "
        f"token x channel x layer (batch {args.batch_sizes[1]} minus batch {args.batch_sizes[0]}). The `tpu` "
        "path is the accelerator path on an emulated TPU (`runs/tpu_emulator.py`), where attention is Pallas's "
        "Splash kernel: it keeps its padded q, k, v and output and a log-sum-exp per row (\"the TPU kernel's\"), "
        "no L x L matrix; its FLOPs are not given (the kernel is lowered as the interpreter's loops).",
        "",
        "| code path | outside attention | attention matrices (L x L) | the TPU kernel's | total "
        "| gradient GFLOPs per step |",
        "|---|---|---|---|---|---|",
    ]
    for path, result in results.items():
        totals, _ = summarize(result)
        flops = "-" if result["flops"] is None else f"{result['flops'] / 1e9:,.0f} (batch {args.batch_sizes[1]})"
        lines.append(
            f"| {path} | {totals['outside']:.1f} | {totals['matrices']:.1f} | {totals['kernel']:.1f} "
            f"| {sum(totals.values()):.1f} | {flops} |"
        )
    labels = {"outside": "", "matrices": "L x L", "kernel": "TPU kernel"}
    for path, result in results.items():
        lines += ["", f"{path} path, by source line:", "", "| bytes | source | dtype | attention |",
                  "|---|---|---|---|"]
        for value, source, dtype, name in summarize(result)[1][: args.top]:
            lines.append(f"| {value:.2f} | `{source}` | {dtype} | {labels[name]} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    results = {
        path: trace(args.variant, args.image_size, args.precision, path, args.batch_sizes) for path in args.paths
    }
    text = render(args, results)
    print(text)
    if args.output:
        existing = open(args.output).read() if os.path.exists(args.output) else ""
        write_atomic(args.output, replace_section(existing, SECTION, text))


if __name__ == "__main__":
    main()

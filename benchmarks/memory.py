"""Memory per device of large ViTs under FSDP and data parallelism (JAX, virtual devices).

    python benchmarks/memory.py --variants=ViT_H14@224,ViT_L16@384 --layouts=fsdp:1x8,fsdp:2x4,dp:8

Every (variant, layout) is one fresh JAX process on `--devices` virtual XLA CPU
devices (the script re-runs itself with `XLA_FLAGS=--xla_force_host_platform_device_count`).
Layouts: `fsdp:BxM` is `keras.distribution.ModelParallel` with `keras_vit.layout_map`
on a mesh of B (batch) x M (model) devices; `dp:N` is `DataParallel` over N devices.

- Parameters per device: the shard shape, on one device, of the layout Keras gives
  each weight (`Distribution.get_variable_layout`), read from an abstract model
  (variables with shapes and no values), so that ViT-H costs nothing to build.
- AdamW moments and EMA copies per device: every optimizer slot takes the layout
  of its weight (`add_variable_from_reference`; `tests/test_distribution.py` checks
  it), so they are 2x and 1x the trainable bytes per device. Where a row fits in
  `--allocate_up_to_gib` of host memory (the virtual devices all live in it), the
  model and `AdamW(use_ema=True)` are also built for real and the shards on
  device 0 summed; the row says whether they agree.
- Activation memory of a training step: the temporary bytes per device in XLA's
  compiled memory analysis of loss and gradients (`jax.value_and_grad` over
  `model.stateless_call`, compiled for abstract arguments, nothing run) at a global
  batch of `--batch_size`, without and with `remat=True`. With remat it is
  compiled twice: with XLA:CPU's default passes, where `cse_barrier_expander`
  drops the optimization barriers that `jax.checkpoint` puts around the
  recomputation early, so that common-subexpression elimination merges the
  recomputation back into the forward pass; and with that pass disabled.

Prints a Markdown table; `--output` also writes it.
"""

import argparse
import math
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from runs.reporting import emit_result, run_measurement, write_atomic  # noqa: E402

MIB = 2**20
# The XLA:CPU pass that removes `jax.checkpoint`'s optimization barriers (see above).
KEEP_REMAT_BARRIERS = {"xla_disable_hlo_passes": "cse_barrier_expander"}
SLOTS = {"moments": ("_momentum", "_velocity"), "ema": ("_average",)}


def parse_layout(layout):
    """`"fsdp:2x4"` -> `("fsdp", (2, 4))`, `"dp:8"` -> `("dp", (8,))`; ValueError otherwise."""
    kind, _, shape = layout.partition(":")
    try:
        sizes = tuple(int(s) for s in shape.split("x"))
    except ValueError:
        sizes = ()
    if (kind, len(sizes)) not in (("fsdp", 2), ("dp", 1)) or min(sizes) < 1:
        raise ValueError(f"expected fsdp:BxM or dp:N. Received: {layout!r}")
    return kind, sizes


def _distribution(layout, template, min_size):
    import keras

    import keras_vit

    kind, sizes = parse_layout(layout)
    devices = keras.distribution.list_devices()[:math.prod(sizes)]
    if kind == "dp":
        return keras.distribution.DataParallel(devices=devices)
    mesh = keras.distribution.DeviceMesh(sizes, ("batch", "model"), devices)
    layouts = keras_vit.layout_map(template, mesh, min_size=min_size)
    return keras.distribution.ModelParallel(layout_map=layouts, batch_dim_name="batch")


def _bytes(shape, dtype):
    import numpy as np

    return math.prod(shape) * np.dtype(dtype).itemsize


def _device_bytes(distribution, variable):
    sharding = distribution.get_variable_layout(variable).backend_layout
    return _bytes(sharding.shard_shape(tuple(variable.shape)), variable.dtype)


def _overrides(args):
    """The builder arguments of the row: its image size, and fewer blocks for a quick check."""
    return dict(image_size=args.image_size, **({"num_layers": args.num_layers} if args.num_layers else {}))


def _abstract_model(args, remat):
    """The model with its variables' shapes and no values: building it allocates nothing."""
    import keras

    import keras_vit

    with keras.StatelessScope(initialize_variables=False):
        return keras_vit.build_variant(args.variant, remat=remat, **_overrides(args))


def _allocated(args, distribution):
    """Builds the model and AdamW with EMA under `distribution`; bytes held by device 0."""
    import keras

    import keras_vit

    with distribution.scope():
        model = keras_vit.build_variant(args.variant, **_overrides(args))
        optimizer = keras.optimizers.AdamW(use_ema=True)
        optimizer.build(model.trainable_variables)
    first = distribution.device_mesh.backend_mesh.devices.flat[0]

    def on_first(variables):
        return sum(shard.data.nbytes for v in variables for shard in v.value.addressable_shards
                   if shard.device == first)

    result = {"params": on_first(model.weights)}
    for name, suffixes in SLOTS.items():
        result[name] = on_first([v for v in optimizer.variables if v.path.endswith(suffixes)])
    return result


def _step_temp_bytes(args, distribution, batch_size):
    """XLA's temporary bytes per device for loss and gradients: no remat, remat, remat with barriers kept."""
    import jax
    import keras

    def abstract(value_shape, dtype, layout):
        return jax.ShapeDtypeStruct(value_shape, dtype, sharding=layout.backend_layout)

    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    temp = {}
    for remat in (False, True):
        model = _abstract_model(args, remat)

        def loss(trainable, non_trainable, x, y):
            logits, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
            return loss_fn(y, logits), non_trainable

        def step(trainable, non_trainable, x, y):
            return jax.value_and_grad(loss, has_aux=True)(trainable, non_trainable, x, y)

        images = (batch_size, args.image_size, args.image_size, 3)
        arguments = (
            [abstract(v.shape, v.dtype, distribution.get_variable_layout(v)) for v in model.trainable_variables],
            [abstract(v.shape, v.dtype, distribution.get_variable_layout(v)) for v in model.non_trainable_variables],
            abstract(images, "float32", distribution.get_data_layout(images)),
            abstract((batch_size,), "int32", distribution.get_data_layout((batch_size,))),
        )
        # The outer scope keeps the stateless call from initialising the abstract model.
        with keras.StatelessScope(initialize_variables=False), distribution.scope():
            lowered = jax.jit(step).lower(*arguments)
        if not remat:
            temp["no_remat"] = lowered.compile().memory_analysis().temp_size_in_bytes
        else:
            temp["remat"] = lowered.compile().memory_analysis().temp_size_in_bytes
            temp["remat_kept"] = lowered.compile(KEEP_REMAT_BARRIERS).memory_analysis().temp_size_in_bytes
    return temp


def single(args):
    """One (variant, layout) in this process; prints a JSON line."""
    from keras_vit.distribution import DEFAULT_MIN_SIZE

    start = time.perf_counter()
    template = _abstract_model(args, remat=False)
    distribution = _distribution(args.layout, template, args.min_size or DEFAULT_MIN_SIZE)
    trainable = {id(v) for v in template.trainable_variables}
    params = sum(_device_bytes(distribution, v) for v in template.weights)
    trainable_bytes = sum(_device_bytes(distribution, v) for v in template.weights if id(v) in trainable)
    result = {
        "variant": args.variant, "image_size": args.image_size, "layout": args.layout,
        "num_params": sum(math.prod(v.shape) for v in template.weights),
        "bytes": sum(_bytes(v.shape, v.dtype) for v in template.weights),
        "device_bytes": {"params": params, "moments": 2 * trainable_bytes, "ema": trainable_bytes},
    }
    devices = len(distribution.device_mesh.devices.flat)
    host_bytes = devices * sum(result["device_bytes"].values())
    result["host_gib"] = host_bytes / 2**30
    result["allocated"] = _allocated(args, distribution) if host_bytes <= args.allocate_up_to_gib * 2**30 else None
    batch_axis = distribution.device_mesh.axis_names.index(distribution.batch_dim_name)
    result["batch_per_device"] = args.batch_size // distribution.device_mesh.shape[batch_axis]
    result["temp_bytes"] = _step_temp_bytes(args, distribution, args.batch_size)
    result["seconds"] = time.perf_counter() - start
    emit_result(result)


def measure(variant, image_size, layout, args):
    arguments = [os.path.abspath(__file__), "--single", f"--variant={variant}", f"--image_size={image_size}",
                 f"--layout={layout}", f"--batch_size={args.batch_size}", f"--min_size={args.min_size}",
                 f"--allocate_up_to_gib={args.allocate_up_to_gib}"] + (
                     [f"--num_layers={args.num_layers}"] if args.num_layers else [])
    return run_measurement(arguments, variant=variant, image_size=image_size, layout=layout)


def _mib(value):
    return f"{value / MIB:,.1f}"


def _layout_name(layout):
    kind, sizes = parse_layout(layout)
    return f"FSDP, batch {sizes[0]} x model {sizes[1]}" if kind == "fsdp" else f"data parallel, {sizes[0]}"


def _allocated_cell(row):
    if row["allocated"] is None:
        return f"not built ({row['host_gib']:.1f} GiB on the host)"
    if row["allocated"] == row["device_bytes"]:
        return "built: equal"
    return "built: differs (" + ", ".join(f"{k} {_mib(v)}" for k, v in row["allocated"].items()) + ")"


def table(rows, args):
    """Markdown table of the measured rows."""
    import jax
    import keras

    header = ("| model | px | layout | params (M) | params MiB | params MiB/device | AdamW moments MiB/device | "
              "EMA MiB/device | params + AdamW (+ EMA) MiB/device | allocated, device 0 | batch/device | "
              "step temp MiB/device: no remat | remat (XLA:CPU default) | remat (barriers kept) |")
    lines = [header, "|" + "---|" * 14]
    for row in rows:
        identity = f"| {row['variant']} | {row['image_size']} | {_layout_name(row['layout'])} |"
        if "error" in row:
            lines.append(f"{identity} failed: {row['error']} |" + " |" * 10)
            continue
        device, temp = row["device_bytes"], row["temp_bytes"]
        with_adamw = device["params"] + device["moments"]
        total = f"{_mib(with_adamw)} ({_mib(with_adamw + device['ema'])})"
        lines.append(
            f"{identity} {row['num_params'] / 1e6:.1f} | {_mib(row['bytes'])} | {_mib(device['params'])} | "
            f"{_mib(device['moments'])} | {_mib(device['ema'])} | {total} | "
            f"{_allocated_cell(row)} | {row['batch_per_device']} | {_mib(temp['no_remat'])} | {_mib(temp['remat'])} | "
            f"{_mib(temp['remat_kept'])} |"
        )
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {args.devices} virtual XLA CPU devices"
    settings = (f"keras {keras.__version__}, jax {jax.__version__}, float32, global batch {args.batch_size} "
                f"for the step, min_size={args.min_size}")
    if args.num_layers:
        settings += f", num_layers={args.num_layers}"
    return "\n".join([f"Machine: {machine}. {settings}. Date: {time.strftime('%Y-%m-%d')}.", "", *lines])


def _child_environment(devices):
    """JAX on `devices` virtual CPU devices, for this process's children (set before any JAX starts)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    os.environ.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2",
                      XLA_FLAGS=" ".join(flags + [f"--xla_force_host_platform_device_count={devices}"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="ViT_H14@224,ViT_L16@384", help="VARIANT@IMAGE_SIZE, comma separated")
    parser.add_argument("--layouts", default="fsdp:1x8,fsdp:2x4,dp:8", help="fsdp:BxM or dp:N, comma separated")
    parser.add_argument("--devices", type=int, default=8, help="virtual XLA CPU devices")
    parser.add_argument("--batch_size", type=int, default=8, help="global batch of the compiled training step")
    parser.add_argument("--min_size", type=int, default=None, help="layout_map's min_size (default: its own)")
    parser.add_argument("--allocate_up_to_gib", type=float, default=6.0,
                        help="also build a row for real when all its devices together hold at most this much")
    parser.add_argument("--num_layers", type=int, default=None,
                        help="build every variant with this many blocks instead (a quick check)")
    parser.add_argument("--output", default=None, help="also write the table to this file")
    # One measurement (internal: each measurement runs in its own process).
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--image_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--layout", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single:
        return single(args)

    for name in ("devices", "batch_size", "min_size", "num_layers"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive integer. Received: {name}={getattr(args, name)}")
    layouts = args.layouts.split(",")
    for layout in layouts:
        try:
            sizes = parse_layout(layout)[1]
        except ValueError as error:
            parser.error(f"--layouts: {error}")
        if math.prod(sizes) != args.devices or args.batch_size % sizes[0]:
            parser.error(f"--layouts: {layout!r} must use all {args.devices} devices and its batch axis must "
                         f"divide --batch_size={args.batch_size}")
    _child_environment(args.devices)
    from keras_vit.distribution import DEFAULT_MIN_SIZE
    from keras_vit.models import VARIANTS

    args.min_size = args.min_size or DEFAULT_MIN_SIZE
    configs = []
    for entry in args.variants.split(","):
        variant, _, size = entry.partition("@")
        if variant not in VARIANTS:
            parser.error(f"--variants: unknown {variant!r}; accepted: {', '.join(sorted(VARIANTS))}")
        if not size.isdigit():
            parser.error(f"--variants: expected VARIANT@IMAGE_SIZE, e.g. ViT_L16@384. Received: {entry!r}")
        configs.append((variant, int(size)))
    rows = []
    for variant, image_size in configs:
        for layout in layouts:
            rows.append(measure(variant, image_size, layout, args))
            print(rows[-1], file=sys.stderr, flush=True)
    text = table(rows, args)
    print(text)
    if args.output:
        write_atomic(args.output, text)


if __name__ == "__main__":
    main()

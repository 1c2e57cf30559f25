"""Training and inference throughput of keras_vit models, optionally side by side with timm.

    python benchmarks/bench.py --variants=ViT_Ti16,ViT_B16 --batch_sizes=32 --modes=train,infer --vs=timm
    python benchmarks/bench.py --variants=Swin_T --batch_sizes=32 --modes=train,infer --vs=timm
    python benchmarks/bench.py --variants=ViT_B16 --modes=train,fit   # train_on_batch beside model.fit
    python benchmarks/bench.py --variants=ViT_Ti16 --vs=timm --isa=avx2   # both capped at AVX2

For every (framework, variant, image size, batch size, mode) one fresh process
builds the model, times the first step apart (tracing and XLA compilation), then
the median of `--steps` steady steps, and reports its peak memory. With
`--repeats=R` every configuration is measured R times, the frameworks taking
turns (and turns about who goes first), so that a machine whose speed drifts
favours neither: a row then shows the median run and all runs, and keras/timm is
the median of the R paired ratios. Model FLOP
utilisation (MFU) is the achieved FLOP/s (analytic FLOPs, `keras_vit.analysis.flops`:
train = 6 x forward MACs) over the peak FLOP/s of a large matrix product measured
on the same machine with the same framework and precision. Prints a Markdown table;
`--output` also writes it (temporary file, then rename). The header names the
CPU's ISA; `--isa=native|avx2` caps both frameworks at one and probes what each
runs at, float32 included (`benchmarks/cpu_isa.py`).
"""

import argparse
import os
import platform
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from runs.reporting import (  # noqa: E402
    check_positive, depth_overrides, emit_result, median_run, rate, run_measurement, write_atomic,
)
from benchmarks.cpu_isa import ISAS, capped_environment, describe, machine_isa, probe  # noqa: E402
from train.cpu_allocator import use_bfc_cpu_allocator  # noqa: E402

TIMM_NAMES = {
    "ViT_Ti16": "vit_tiny_patch16_224", "ViT_S16": "vit_small_patch16_224",
    "ViT_B16": "vit_base_patch16_224", "ViT_B32": "vit_base_patch32_224",
    "ViT_L16": "vit_large_patch16_224", "ViT_B8": "vit_base_patch8_224",
    "DeiT_Ti16": "deit_tiny_patch16_224", "DeiT_S16": "deit_small_patch16_224", "DeiT_B16": "deit_base_patch16_224",
    "ConViT_Ti": "convit_tiny", "ConViT_S": "convit_small", "ConViT_B": "convit_base",
    "R50_ViT_B16": "vit_base_r50_s16_224", "R_ViT_Ti16": "vit_tiny_r_s16_p8_224",
    "R26_ViT_S32": "vit_small_r26_s32_224",
    "Swin_T": "swin_tiny_patch4_window7_224", "Swin_S": "swin_small_patch4_window7_224",
    "Swin_B": "swin_base_patch4_window7_224", "Swin_L": "swin_large_patch4_window7_224",
    "Swin_B384": "swin_base_patch4_window12_384", "Swin_L384": "swin_large_patch4_window12_384",
    "DINOv2_S14": "vit_small_patch14_dinov2", "DINOv2_B14": "vit_base_patch14_dinov2",
}


def classifier_arguments(variant):
    """`(keras_kwargs, timm_kwargs)`: a 1000-class head on both sides for a variant headless by default (DINOv2)."""
    from train.modeling import headless_by_default

    if headless_by_default(variant):
        return {"include_top": True, "num_classes": 1000}, {"num_classes": 1000}
    return {}, {}


# train: `train_on_batch`, one step per call; infer: `predict_on_batch`; fit: `model.fit` with
# `steps_per_execution`, the whole epoch in one call.
MODES = ("train", "infer", "fit")


def _peak_memory_mib(framework):
    if framework == "keras" and _backend() == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            return stats["peak_bytes_in_use"] / 2**20
    if framework == "timm":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # host RSS


def _backend_variable():
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def _backend():
    import keras

    return keras.backend.backend()


def _time_steps(step, steps):
    start = time.perf_counter()
    step()
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return compile_seconds, statistics.median(times)


def peak_matrix_size(on_accelerator):
    """Side of the square product that measures peak FLOP/s.

    2048 fills a CPU; on a GPU a 2048 product takes tens of microseconds, so
    launch overhead would pull the measured peak down (and MFU up): 8192 there.
    """
    return 8192 if on_accelerator else 2048


def keras_peak_flops(precision, size=None):
    """FLOP/s of a jit-compiled `size x size` matrix product, best of 10."""
    import keras

    if size is None:
        size = peak_matrix_size(keras_on_accelerator())
    dtype = "bfloat16" if precision == "bfloat16" else "float32"
    a = keras.random.normal((size, size), dtype=dtype)
    if _backend() == "jax":
        import jax

        matmul = jax.jit(lambda x: x @ x)

        def run():
            matmul(a).block_until_ready()
    else:
        import tensorflow as tf

        matmul = tf.function(lambda x: tf.matmul(x, x), jit_compile=True)

        def run():
            matmul(a).numpy()
    run()
    best = min(_time_steps(run, 1)[1] for _ in range(10))
    return 2 * size**3 / best


def keras_on_accelerator():
    if _backend() == "jax":
        import jax

        return jax.devices()[0].platform != "cpu"
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def run_keras(variant, image_size, batch_size, mode, steps, precision, remat, depth=None, peak_size=None):
    import keras
    import numpy as np

    import keras_vit
    from keras_vit.analysis.flops import inference_flops, train_flops

    kwargs = dict(image_size=image_size, remat=remat, **depth_overrides(variant, depth)[0],
                  **classifier_arguments(variant)[0])
    if precision == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    model = keras_vit.build_variant(variant, **kwargs)
    x = np.random.default_rng(0).uniform(0, 255, (batch_size, image_size, image_size, 3)).astype("float32")
    y = np.arange(batch_size) % 1000
    if _backend() == "jax":
        import jax

        # On the device before timing, as timm's batch is: the host-to-device copy of
        # a batch is the input pipeline's cost, not the step's.
        x, y = jax.device_put(x), jax.device_put(y)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
        # `fit` mode: every step of an epoch in one call of the compiled function.
        steps_per_execution=steps if mode == "fit" else 1,
    )
    if mode == "fit":
        # What a user runs: `model.fit` over `steps` batches held as backend arrays, an epoch
        # per call; one step's time is the median epoch's over its steps.
        xs = keras.ops.concatenate([x] * steps)
        ys = keras.ops.concatenate([y] * steps)

        def epoch():
            model.fit(xs, ys, batch_size=batch_size, epochs=1, shuffle=False, verbose=0)
        compile_seconds, seconds = _time_steps(epoch, 3)
        return compile_seconds, seconds / steps, train_flops(model), keras_peak_flops(precision, peak_size)
    if mode == "train":
        def step():
            model.train_on_batch(x, y)  # returns host values: synchronizes
        flops = train_flops(model)
    else:
        def step():
            model.predict_on_batch(x)
        flops = inference_flops(model)
    compile_seconds, seconds = _time_steps(step, steps)
    return compile_seconds, seconds, flops, keras_peak_flops(precision, peak_size)


def run_timm(variant, image_size, batch_size, mode, steps, precision, compile_model, depth=None, peak_size=None):
    if _backend_variable() == "jax":
        # The Keras model here only counts FLOPs: keep JAX off the GPU, which it would
        # otherwise claim three quarters of on first use, leaving PyTorch the rest.
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from runs.reference import timm, torch  # the torchvision shim, then timm

    import keras

    import keras_vit
    from keras_vit.analysis.flops import inference_flops, train_flops

    device = "cuda" if torch.cuda.is_available() else "cpu"
    keras_depth, timm_depth = depth_overrides(variant, depth)
    keras_head, timm_head = classifier_arguments(variant)
    model = timm.create_model(TIMM_NAMES[variant], img_size=image_size, **timm_depth, **timm_head).to(device)
    x = torch.rand(batch_size, 3, image_size, image_size, device=device)
    y = torch.arange(batch_size, device=device) % 1000
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bfloat16")
    net = torch.compile(model) if compile_model else model
    # Only its FLOPs are counted, from the layers' shapes: no weights need to exist (on JAX their
    # initialisation would compile one program per variable).
    with keras.StatelessScope(initialize_variables=False):
        keras_model = keras_vit.build_variant(variant, image_size=image_size, **keras_depth, **keras_head)
    if mode == "train":
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), 1e-4)

        def step():
            optimizer.zero_grad(set_to_none=True)
            with autocast:
                loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            loss.item()  # synchronizes
        flops = train_flops(keras_model)
    else:
        model.eval()

        def step():
            with torch.inference_mode(), autocast:
                net(x).float().sum().item()
        flops = inference_flops(keras_model)
    compile_seconds, seconds = _time_steps(step, steps)
    dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
    size = peak_size or peak_matrix_size(device == "cuda")
    a = torch.randn(size, size, device=device, dtype=dtype)

    def matmul():
        (a @ a).sum().item()
    matmul()
    peak = 2 * size**3 / min(_time_steps(matmul, 1)[1] for _ in range(10))
    return compile_seconds, seconds, flops, peak


def single(args):
    """One measurement in this process; prints a JSON line."""
    if args.framework == "keras":
        result = run_keras(args.variant, args.image_size, args.batch_size, args.mode, args.steps,
                           args.precision, args.remat, args.depth, args.peak_size)
    else:
        result = run_timm(args.variant, args.image_size, args.batch_size, args.mode, args.steps,
                          args.precision, args.timm_compile, args.depth, args.peak_size)
    compile_seconds, seconds, flops, peak = result
    images_per_second = args.batch_size / seconds
    emit_result({
        "framework": args.framework, "variant": args.variant, "image_size": args.image_size,
        "batch_size": args.batch_size, "mode": args.mode, "compile_s": compile_seconds,
        "images_per_s": images_per_second, "peak_mem_mib": _peak_memory_mib(args.framework),
        "gflops_per_image": flops / 1e9, "achieved_tflops": images_per_second * flops / 1e12,
        "peak_tflops": peak / 1e12, "mfu": images_per_second * flops / peak,
    })


def measure(framework, variant, image_size, batch_size, mode, args):
    arguments = [os.path.abspath(__file__), "--single", f"--framework={framework}", f"--variant={variant}",
                 f"--image_size={image_size}", f"--batch_size={batch_size}", f"--mode={mode}",
                 f"--steps={args.steps}", f"--precision={args.precision}"]
    if args.remat:
        arguments.append("--remat")
    if args.timm_compile:
        arguments.append("--timm_compile")
    if args.depth is not None:
        arguments.append(f"--depth={args.depth}")
    if args.peak_size is not None:
        arguments.append(f"--peak_size={args.peak_size}")
    return run_measurement(arguments, framework=framework, variant=variant, image_size=image_size,
                           batch_size=batch_size, mode=mode)


def paired_ratio(keras_runs, timm_runs):
    """Median over repeats of keras images/s over timm images/s from the same round."""
    if any("error" in r for r in keras_runs + timm_runs):
        return None
    return statistics.median(k["images_per_s"] / t["images_per_s"] for k, t in zip(keras_runs, timm_runs))


def table(results, args, probes=None):
    """Markdown table; `results` maps (framework, variant, px, batch, mode) to that configuration's runs.

    `probes` (`{framework: cpu_isa.probe(...)}`, with `--isa`) adds what each framework ran at.
    """
    import keras

    header = ("| framework | variant | px | batch | mode | compile s | images/s | runs | peak MiB | "
              "GFLOP/img | TFLOP/s | peak TFLOP/s | MFU | keras/timm |")
    lines = [header, "|" + "---|" * 14]
    for (framework, *config), runs in results.items():
        r = median_run(runs)
        if "error" in r:
            lines.append(f"| {framework} | {' | '.join(map(str, config))} | "
                         f"failed: {r['error']} |" + " |" * 9)
            continue
        ratio = ""
        if framework == "keras" and ("timm", *config) in results:
            value = paired_ratio(runs, results[("timm", *config)])
            ratio = "" if value is None else f"{value:.2f}"
        lines.append(
            f"| {framework} | {' | '.join(map(str, config))} | "
            f"{r['compile_s']:.1f} | {rate(r['images_per_s'])} | {', '.join(rate(v) for v in r['runs'])} | "
            f"{r['peak_mem_mib']:.0f} | {r['gflops_per_image']:.2f} | "
            f"{r['achieved_tflops']:.3f} | {r['peak_tflops']:.3f} | {100 * r['mfu']:.0f}% | {ratio} |"
        )
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}"
    settings = (f"backend={os.environ.get('KERAS_BACKEND', 'tensorflow')}, keras {keras.__version__}, "
                f"precision={args.precision}, remat={args.remat}, timm compiled={args.timm_compile}, "
                f"steps={args.steps} (median), repeats={args.repeats}")
    isa = describe(args.isa, probes) if probes else f"CPU: {machine_isa()}"
    return "\n".join([f"Machine: {machine}. {isa}. {settings}. Date: {time.strftime('%Y-%m-%d')}.", "", *lines])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="ViT_Ti16")
    parser.add_argument("--image_sizes", default="224")
    parser.add_argument("--batch_sizes", default="32")
    parser.add_argument("--modes", default="train,infer")
    parser.add_argument("--vs", choices=["timm"], default=None)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=1, help="measure each configuration this many times")
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--remat", action="store_true")
    # A CPU without bfloat16 instructions (AVX2) multiplies PyTorch's bfloat16 2048 x 2048 product
    # in about 20 s, and the peak takes 11 of them: the dry runs measure it on a small product.
    parser.add_argument("--peak_size", type=int, default=None,
                        help="side of the square product that measures the peak FLOP/s (default: 2048 on a CPU, "
                             "8192 on a GPU)")
    parser.add_argument("--timm_compile", action="store_true", help="torch.compile the timm model")
    parser.add_argument("--output", default=None, help="also write the table to this file")
    parser.add_argument("--depth", type=int, default=None,
                        help="blocks (per stage for Swin) instead of the variant's, for smoke runs of the script")
    parser.add_argument("--isa", choices=ISAS, help="cap both frameworks at this ISA (benchmarks/cpu_isa.py)")
    # One measurement (internal: each measurement runs in its own process).
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--framework", default="keras", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--image_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch_size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    use_bfc_cpu_allocator()  # as train/main.py: timed training on a CPU runs with it
    if args.single:
        return single(args)
    import keras_vit

    check_positive(parser, args, "steps", "repeats", "depth", "peak_size")
    probes = None
    if args.isa is not None:
        # Every measuring child inherits the cap; the probes check it took effect there.
        os.environ.update(capped_environment(args.isa))
        probes = {framework: probe(framework, args.isa) for framework in ["keras"] + (["timm"] if args.vs else [])}
    results = {}
    for variant in args.variants.split(","):
        if variant not in keras_vit.VARIANTS:
            parser.error(f"--variants: unknown {variant!r}; accepted: {', '.join(sorted(keras_vit.VARIANTS))}")
        for image_size in map(int, args.image_sizes.split(",")):
            for batch_size in map(int, args.batch_sizes.split(",")):
                for mode in args.modes.split(","):
                    if mode not in MODES:
                        parser.error(f"--modes: unknown {mode!r}; accepted: {', '.join(MODES)}")
                    # `fit` is Keras's own loop: timm's training row is `train`.
                    frameworks = ["keras"] + (["timm"] if args.vs == "timm" and mode != "fit" else [])
                    for framework in frameworks:
                        results[(framework, variant, image_size, batch_size, mode)] = []
                    for repeat in range(args.repeats):
                        # Who goes first alternates, so a drift in the machine's speed cancels out.
                        for framework in frameworks[::-1] if repeat % 2 else frameworks:
                            run = measure(framework, variant, image_size, batch_size, mode, args)
                            results[(framework, variant, image_size, batch_size, mode)].append(run)
                            print(run, file=sys.stderr, flush=True)
    text = table(results, args, probes)
    print(text)
    if args.output:
        write_atomic(args.output, text)


if __name__ == "__main__":
    main()

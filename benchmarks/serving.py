"""CPU inference through every serving path of keras_vit, against timm fp32 and bf16.

    python benchmarks/serving.py --variants=ViT_Ti16,ViT_B16 --batch_sizes=1,16 --write

For each variant (`--image_size`, 224 by default; random weights: speed does not depend on them) and batch
size, one fresh process per path builds the model, prepares the path, runs it
twice (tracing, compilation, the interpreter's first allocation) and reports the
median of `--steps` timed calls:

| path | what runs |
|---|---|
| keras_xla | the Keras model, `predict_on_batch` compiled by XLA (float32) |
| keras_xla_bf16 | the same under `mixed_bfloat16` (XLA:CPU) |
| tf_bf16 | `mixed_bfloat16`, TensorFlow's graph without XLA (oneDNN kernels: AMX/AVX512-BF16 where the CPU has them) |
| tf_fp32 | float32, TensorFlow's graph without XLA |
| saved_model | `keras_vit.export.saved_model`'s SavedModel as a server loads it (`tf.saved_model.load`, uint8 in) |
| litert_fp32 / litert_dynamic / litert_int8 | `keras_vit.export.litert` files, run by the LiteRT interpreter with every core |
| openvino_fp32 / openvino_bf16 | the `keras_vit.export.openvino` file (batch size fixed), compiled by OpenVINO for the CPU in float32 or bfloat16 (AMX/AVX512-BF16 kernels where the CPU has them) |
| timm_fp32 / timm_bf16 | timm's model in `torch.inference_mode()`, the second under `torch.autocast("cpu", torch.bfloat16)` |

The TensorFlow paths need the TensorFlow backend (the default here). The table
names the CPU and whether it has `avx512_bf16` and `amx_bf16` (from `lscpu`);
`--write` puts it into BENCHMARKS.md's "CPU serving" section (temporary file, then
rename), with the command and the date.
"""

import argparse
import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.bench import TIMM_NAMES  # noqa: E402
from runs.reporting import (  # noqa: E402
    check_positive, depth_overrides, emit_result, rate, replace_section, run_measurement, write_atomic,
)

PATHS = ("keras_xla", "keras_xla_bf16", "tf_bf16", "tf_fp32", "saved_model", "litert_fp32", "litert_dynamic",
         "litert_int8", "openvino_fp32", "openvino_bf16", "timm_fp32", "timm_bf16")
SECTION = "## CPU serving: every inference path vs timm"


def cpu_description():
    """`(model name, has avx512_bf16, has amx_bf16)` from `lscpu` (or /proc/cpuinfo)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        text = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    name, flags = platform.processor() or platform.machine(), set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "model name"):
            name = value.strip()
        if key.strip() in ("Flags", "flags"):
            flags |= set(value.split())
    return name, "avx512_bf16" in flags, "amx_bf16" in flags


def _timed(call, steps):
    call()
    call()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _keras_model(variant, image_size, dtype=None, depth=None):
    import keras_vit

    kwargs = {"dtype": dtype} if dtype else {}
    return keras_vit.build_variant(variant, image_size=image_size, **kwargs, **depth_overrides(variant, depth)[0])


def run_path(path, variant, batch_size, steps, image_size=224, depth=None):
    """Seconds per call of `batch_size` images through `path` (one measurement, this process)."""
    import numpy as np

    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (batch_size, image_size, image_size, 3)).astype("float32")
    if path.startswith("timm"):
        from runs.reference import timm, torch  # the torchvision shim, then timm

        model = timm.create_model(TIMM_NAMES[variant], img_size=image_size, **depth_overrides(variant, depth)[1]).eval()
        x = torch.from_numpy(images.transpose(0, 3, 1, 2) / 255.0)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=path == "timm_bf16")

        def call():
            with torch.inference_mode(), autocast:
                model(x).float().sum().item()
        return _timed(call, steps)
    if path.startswith("keras_xla") or path.startswith("tf_"):
        import keras

        bf16 = path.endswith("bf16")
        model = _keras_model(variant, image_size, "mixed_bfloat16" if bf16 else None, depth)
        model.compile(jit_compile=path.startswith("keras_xla"))
        keras.config.set_dtype_policy("float32")
        return _timed(lambda: model.predict_on_batch(images), steps)
    from keras_vit import export

    with tempfile.TemporaryDirectory(prefix="serving-") as folder:
        model = _keras_model(variant, image_size, depth=depth)
        if path == "saved_model":
            import tensorflow as tf

            export.saved_model(model, os.path.join(folder, "saved_model"))
            served = tf.saved_model.load(os.path.join(folder, "saved_model"))
            batch = tf.constant(images.astype("uint8"))
            return _timed(lambda: served.serve(batch).numpy(), steps)
        if path.startswith("openvino"):
            # A fixed batch: OpenVINO then plans every shape once (with a free batch it
            # computes shapes and broadcasts at run time: 1.6x slower for ViT-Ti/16 here).
            file = export.openvino(model, os.path.join(folder, "model.xml"), batch_size=batch_size)
            precision = path.rpartition("_")[2].replace("fp32", "f32")
            compiled = export.openvino_compiled(file, precision=precision)
            if export.openvino_precision(compiled) != precision:  # no bf16 units: OpenVINO runs f32
                raise RuntimeError(f"OpenVINO runs {export.openvino_precision(compiled)} here, not {precision}")
            return _timed(lambda: export.openvino_predict(compiled, images), steps)
        quantize = {"litert_fp32": None, "litert_dynamic": "dynamic", "litert_int8": "int8"}[path]
        file = os.path.join(folder, "model.tflite")
        # Calibration on other random images: speed does not depend on the ranges found.
        calibration = rng.uniform(0, 255, (8, image_size, image_size, 3)).astype("float32")
        kwargs = {"representative_data": calibration} if quantize == "int8" else {}
        export.litert(model, file, quantize=quantize, **kwargs)
        interpreter = export.litert_interpreter(file, num_threads=os.cpu_count())
        return _timed(lambda: export.litert_predict(interpreter, images), steps)


def single(args):
    seconds = run_path(args.path, args.variant, args.batch_size, args.steps, args.image_size, args.depth)
    emit_result({"path": args.path, "variant": args.variant, "batch_size": args.batch_size,
                 "images_per_s": args.batch_size / seconds})


def table(results, cpu, image_size):
    name, bf16, amx = cpu
    lines = [f"CPU: {name}, {os.cpu_count()} cores; avx512_bf16: {'yes' if bf16 else 'no'}, "
             f"amx_bf16: {'yes' if amx else 'no'}. Images {image_size} x {image_size}, random weights.", "",
             "| variant | batch | path | images/s | vs timm_fp32 | vs best timm |", "|---|---|---|---|---|---|"]
    for (variant, batch), rows in results.items():
        timm = {r["path"]: r["images_per_s"] for r in rows if "error" not in r and r["path"].startswith("timm")}
        best_timm = max(timm.values(), default=None)
        for r in rows:
            if "error" in r:
                lines.append(f"| {variant} | {batch} | {r['path']} | failed: {r['error'][:80]} | | |")
                continue
            fp32 = f"{r['images_per_s'] / timm['timm_fp32']:.2f}" if "timm_fp32" in timm else ""
            best = f"{r['images_per_s'] / best_timm:.2f}" if best_timm else ""
            lines.append(f"| {variant} | {batch} | {r['path']} | {rate(r['images_per_s'])} | {fp32} | {best} |")
    return "\n".join(lines)


def write_section(path, command, text):
    """Replaces (or appends) `SECTION` of the Markdown file at `path`."""
    date = datetime.date.today().isoformat()
    body = f"{SECTION}\n\nCommand: `{command}`\nDate: {date}.\n\n{text}\n"
    old = open(path).read() if os.path.exists(path) else ""
    write_atomic(path, replace_section(old, SECTION, body).rstrip("\n"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="ViT_Ti16,ViT_B16")
    parser.add_argument("--batch_sizes", default="1,16")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md's CPU serving section")
    parser.add_argument("--depth", type=int, default=None,
                        help="blocks instead of the variant's, for smoke runs of the script")
    parser.add_argument("--benchmarks_md", default=os.path.join(ROOT, "BENCHMARKS.md"), help=argparse.SUPPRESS)
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--batch_size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.single:
        return single(args)
    check_positive(parser, args, "depth")
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        parser.error(f"--paths: unknown {unknown or args.paths!r}; accepted: {', '.join(PATHS)}")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for variant in variants:
        if variant not in TIMM_NAMES:
            parser.error(f"--variants: {variant!r} has no timm counterpart; accepted: {', '.join(sorted(TIMM_NAMES))}")
    results = {}
    for variant in variants:
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            rows = results.setdefault((variant, batch), [])
            for path in paths:
                rows.append(run_measurement(
                    [os.path.abspath(__file__), "--single", f"--path={path}", f"--variant={variant}",
                     f"--batch_size={batch}", f"--steps={args.steps}", f"--image_size={args.image_size}",
                     *([f"--depth={args.depth}"] if args.depth is not None else [])],
                    path=path, variant=variant, batch_size=batch))
                print(f"{variant} batch {batch} {path}: "
                      f"{rows[-1].get('images_per_s', rows[-1].get('error'))}", file=sys.stderr, flush=True)
    text = table(results, cpu_description(), args.image_size)
    print(text)
    if args.write:
        command = "python benchmarks/serving.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])
                                                              if a != "--write" and not a.startswith("--benchmarks_md"))
        write_section(args.benchmarks_md, command.strip() + " --write", text)
    return results


if __name__ == "__main__":
    main()

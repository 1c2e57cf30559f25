"""Which attention kernel a model's compiled training and inference steps hold (JAX).

    python benchmarks/attention_check.py --variant=ViT_B16 --batch_size=8 [--precision=bfloat16]

Builds the model under `--precision`, compiles its training step (loss and
gradient) and its inference step with `jax.jit` for abstract inputs (nothing
runs), and looks in XLA's compiled program for cuDNN's fused attention (the
custom call `__cudnn$fmha...`). Prints one Markdown row per step with the
platform, the code path (`keras_vit.layers.code_path`), the kernels the
layers asked for while tracing (`keras_vit.layers.attention_kernels`) and
whether the fused kernel is in the compiled program. On a GPU the exit status
is 1 when it is not, so that `benchmarks/gpu.sh` says so loudly; elsewhere (a
CPU has no cuDNN; a TPU's flash kernel is a Pallas call) it is 0.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# The custom-call target of cuDNN's fused attention in XLA's GPU programs.
CUDNN_FUSED_ATTENTION = "cudnn$fmha"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="ViT_B16", help="A keras_vit builder name.")
    parser.add_argument("--image_size", type=int, default=None, help="Defaults to the variant's.")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--precision", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--output", default=None, help="Also write the table to this file.")
    parser.add_argument("--depth", type=int, default=None,
                        help="Blocks (per stage for Swin) instead of the variant's, for smoke runs.")
    args = parser.parse_args(argv)
    from runs.reporting import check_positive

    check_positive(parser, args, "batch_size", "depth")
    return args


def compiled_programs(variant, image_size, batch_size, precision, depth=None):
    """`{"train": text, "infer": text}`: the compiled HLO of the two steps, and the platform."""
    import jax

    import keras_vit
    from benchmarks.abstract_step import abstract_arguments, training_loss
    from runs.reporting import depth_overrides

    kwargs = dict(depth_overrides(variant, depth)[0])
    if image_size is not None:
        kwargs["image_size"] = image_size
    if precision == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    model = keras_vit.build_variant(variant, **kwargs)
    trainable, frozen, images, labels = abstract_arguments(model, batch_size)
    loss = training_loss(model)

    def infer(trainable, frozen, images):
        return model.stateless_call(trainable, frozen, images, training=False)[0]

    return {
        "train": jax.jit(jax.grad(loss)).lower(trainable, frozen, images, labels).compile().as_text(),
        "infer": jax.jit(infer).lower(trainable, frozen, images).compile().as_text(),
    }, jax.default_backend()


def main(argv=None):
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = "jax"
    from keras_vit.layers import attention_kernels, code_path
    from runs.reporting import write_atomic

    programs, platform = compiled_programs(args.variant, args.image_size, args.batch_size, args.precision, args.depth)
    lines = [
        f"Attention in the compiled steps of {args.variant} ({args.precision}, batch {args.batch_size}), "
        f"`python benchmarks/attention_check.py`:",
        "",
        "| step | platform | code path | kernels asked for while tracing | cuDNN fused attention in the program |",
        "|---|---|---|---|---|",
    ]
    fused = {step: CUDNN_FUSED_ATTENTION in text for step, text in programs.items()}
    for step in programs:
        lines.append(f"| {step} | {platform} | {code_path()} | {attention_kernels()} | "
                     f"{'yes' if fused[step] else 'no'} |")
    text = "\n".join(lines)
    print(text)
    if args.output:
        write_atomic(args.output, text)
    if platform == "gpu" and not all(fused.values()):
        print("cuDNN's fused attention is missing from a compiled step on this GPU (see the warnings above).",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

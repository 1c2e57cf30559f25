#!/usr/bin/env bash
# The GPU rows of BENCHMARKS.md: keras_vit on JAX in bfloat16 against timm under
# torch.compile, on one NVIDIA GPU, from the repository root, in one device call of
# at most 9 minutes:
#
#     bash benchmarks/gpu.sh OUTPUT_DIR
#
# Needs JAX with CUDA, Keras 3, PyTorch with CUDA and timm; not TensorFlow (the
# JAX backend runs without it). In order, most important first, each step its own
# process, so that whatever is measured lands in OUTPUT_DIR even if a later step
# runs out of time:
#   1. the attention kernel in ViT-B/16's compiled training and inference steps
#      (cuDNN's fused attention, or the warning that says why not);
#   2. ViT-B/16 training, keras_vit against timm compiled, 3 interleaved repeats;
#   3. ViT-B/16 inference, the same;
#   4. ViT-B/16 with `model.fit` and `steps_per_execution` (what a user runs);
#   5. DeiT-S/16 and Swin-T training against timm, one run each;
#   6. OUTPUT_DIR/table.md: every table above, for BENCHMARKS.md.
# Peak memory is each measuring process's own (`jax.Device.memory_stats`, torch.cuda's):
# one model and its step per process.
#
# DRY_RUN=1 runs every step on the CPU at toy sizes, ViT-Ti/16 and DeiT-Ti/16 standing in
# for ViT-B/16 and DeiT-S/16, one block deep, against timm not compiled (torch.compile on a
# CPU takes minutes), the inference step twice (the tests do this): the script's plumbing,
# timm's rows and the paired ratios included, not its figures.
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu.sh OUTPUT_DIR}
mkdir -p "$out"
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
if [[ "${DRY_RUN:-0}" == 1 ]]; then
    export JAX_PLATFORMS=cpu
    # One block per stage: the plumbing compiles in seconds, not minutes.
    vit=ViT_Ti16 deit=DeiT_Ti16 size=(--image_sizes=32 --depth=1) check=(--image_size=32 --batch_size=2 --depth=1)
    batch=2 small_batch=2 steps=1 repeats=1 infer_repeats=2 vs=(--vs=timm)
else
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
    vit=ViT_B16 deit=DeiT_S16 size=() check=(--batch_size=8)
    batch=256 small_batch=256 steps=20 repeats=3 infer_repeats=3 vs=(--vs=timm --timm_compile)
fi
python3 -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" | tee -a "$out/gpu.txt"
python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)" 2>&1 | tee -a "$out/gpu.txt"
status=0
step() {  # name, command...: runs it, keeps its log, notes a failure and goes on
    local name=$1; shift
    echo "== $name" >&2
    if ! "$@" 2> "$out/$name.log"; then
        echo "$name failed (see $out/$name.log)" | tee -a "$out/failures.txt" >&2
        status=1
    fi
}
bench() {  # name, bench.py flags
    local name=$1; shift
    step "$name" python3 benchmarks/bench.py --precision=bfloat16 --steps="$steps" "${size[@]}" "$@" \
        --output="$out/$name.md"
}
step attention python3 benchmarks/attention_check.py --variant="$vit" "${check[@]}" --output="$out/attention.md"
bench vit_b16_train --variants="$vit" --batch_sizes="$batch" --modes=train --repeats="$repeats" "${vs[@]}"
bench vit_b16_infer --variants="$vit" --batch_sizes="$batch" --modes=infer --repeats="$infer_repeats" "${vs[@]}"
bench vit_b16_fit --variants="$vit" --batch_sizes="$batch" --modes=fit
bench deit_s16_train --variants="$deit" --batch_sizes="$small_batch" --modes=train "${vs[@]}"
bench swin_t_train --variants=Swin_T --batch_sizes="$small_batch" --modes=train "${vs[@]}"
{
    echo "Measured $(date -u +%Y-%m-%d) with \`bash benchmarks/gpu.sh\`:"
    echo
    sed 's/^/    /' "$out/gpu.txt"
    for name in attention vit_b16_train vit_b16_infer vit_b16_fit deit_s16_train swin_t_train; do
        echo
        if [[ -f "$out/$name.md" ]]; then cat "$out/$name.md"; else echo "$name: not measured (see its log)"; fi
    done
} > "$out/table.md"
exit $status

#!/usr/bin/env bash
# The GPU rows of BENCHMARKS.md: keras_vit on JAX in bfloat16 against timm under
# torch.compile, on one NVIDIA GPU, from the repository root, in one device call of
# at most 9 minutes:
#
#     bash benchmarks/gpu.sh OUTPUT_DIR
#
# Needs JAX with CUDA, Keras 3, PyTorch with CUDA and timm; not TensorFlow (the
# JAX backend runs without it). The lent machine's image has all but Keras: run
# `bash benchmarks/gpu_wheels.sh` here first, then carry its folder to the device:
#
#     run(command="bash benchmarks/gpu.sh $OUT", carry=[".whl"], timeout_s=540)
#
# In order, most important first, each step its own process, so that whatever is
# measured lands in OUTPUT_DIR even if a later step runs out of time:
#   1. the attention kernel in ViT-B/16's compiled training and inference steps
#      (cuDNN's fused attention, or the warning that says why not);
#   2. a profile of ViT-B/16's training step: the time in matrix products, attention,
#      elementwise ops and the optimizer, and the kernels that took longest;
#   3. ViT-B/16 training, keras_vit against timm compiled, 3 interleaved repeats;
#   4. ViT-B/16 inference, the same;
#   5. ViT-B/16 with `model.fit` and `steps_per_execution` (what a user runs);
#   6. DeiT-S/16 and Swin-T training against timm, one run each;
# and OUTPUT_DIR/table.md, every table above, for BENCHMARKS.md.
# Peak memory is each measuring process's own (`jax.Device.memory_stats`, torch.cuda's):
# one model and its step per process.
#
# The call keeps inside BUDGET_S seconds (510 by default: a 9-minute device call less the
# time to copy the results back): a step runs in the time left and is stopped at the
# budget, the steps after it are marked "not run", and table.md is rewritten after every
# step with each step's seconds; `ONLY=deit_s16_train,swin_t_train` (step names, as
# table.md gives them) runs those alone, in a second call. JAX's persistent compilation
# cache (and inductor's own) spare the repeats a second compilation: their rows' compile
# seconds are a warm cache's.
#
# DRY_RUN=1 runs every step on the CPU at toy sizes, ViT-Ti/16 and DeiT-Ti/16 standing in
# for ViT-B/16 and DeiT-S/16, one block deep, against timm not compiled (torch.compile on a
# CPU takes minutes), the inference step twice (the tests do this): the script's plumbing,
# timm's rows and the paired ratios included, not its figures.
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu.sh OUTPUT_DIR}
all_steps=(attention profile vit_b16_train vit_b16_infer vit_b16_fit deit_s16_train swin_t_train)
# ONLY=deit_s16_train,swin_t_train runs those steps alone: a second device call for what a
# first one left "not run" at its budget.
if [[ -n "${ONLY:-}" ]]; then
    IFS=', ' read -ra steps_run <<< "$ONLY"
    for name in "${steps_run[@]}"; do
        if [[ " ${all_steps[*]} " != *" $name "* ]]; then
            echo "gpu.sh: ONLY names a step that does not exist. Received: ONLY=$ONLY; the steps are: ${all_steps[*]}" >&2
            exit 2
        fi
    done
else
    steps_run=("${all_steps[@]}")
fi
mkdir -p "$out"
: > "$out/gpu.txt"
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
if [[ "${DRY_RUN:-0}" == 1 ]]; then
    export JAX_PLATFORMS=cpu
    # One block per stage: the plumbing compiles in seconds, not minutes.
    vit=ViT_Ti16 deit=DeiT_Ti16 size=(--image_sizes=32 --depth=1 --peak_size=256)
    check=(--image_size=32 --batch_size=2 --depth=1)
    profile=("${check[@]}" --steps=1)
    batch=2 small_batch=2 steps=1 repeats=1 infer_repeats=2 vs=(--vs=timm)
    wheels=${WHEELS:-}  # only those named: .whl holds builds for the device's Python
else
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee -a "$out/gpu.txt"
    vit=ViT_B16 deit=DeiT_S16 size=() check=(--batch_size=8) profile=(--batch_size=256 --steps=3)
    export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/keras_vit_jax_cache}
    batch=256 small_batch=256 steps=20 repeats=3 infer_repeats=3 vs=(--vs=timm --timm_compile)
    wheels=${WHEELS:-.whl}
fi
# The wheels the device image lacks (Keras and two of its dependencies), carried with the
# working tree from `bash benchmarks/gpu_wheels.sh`: installed into a folder of their own
# ahead of the image's packages, for this script and each step.
carried=()
[[ -n "$wheels" ]] && carried=("$wheels"/*.whl)
if [[ -e "${carried[0]:-}" ]]; then  # an unmatched glob stays the pattern itself
    site=$(mktemp -d)
    trap 'rm -rf "$site"' EXIT
    python3 -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${carried[@]}" \
        || { echo "gpu.sh: the wheels in $wheels did not install" >&2; exit 1; }
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
    echo "wheels carried: ${carried[*]##*/}" >> "$out/gpu.txt"
fi
python3 -c "import jax, keras; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__)" | tee -a "$out/gpu.txt"
# timm's version from its metadata: importing timm needs a working torchvision, which a
# CPU-only dry run may lack (bench.py imports timm its own way).
python3 -c "import torch; from importlib.metadata import version; print('torch', torch.__version__, 'timm', version('timm'))" \
    2>&1 | tee -a "$out/gpu.txt"
status=0
# The whole call stays inside BUDGET_S seconds (the device call's limit, less a margin to
# copy OUTPUT_DIR back): each step gets what is left, and a step with under 20 s left is
# not started. table.md is written again after every step, so a call stopped from outside
# still returns every table measured until then.
budget=${BUDGET_S:-$([[ "${DRY_RUN:-0}" == 1 ]] && echo 1800 || echo 510)}
write_table() {
    {
        echo "Measured $(date -u +%Y-%m-%d) with \`bash benchmarks/gpu.sh\` ($((SECONDS)) s of a ${budget} s budget):"
        echo
        sed 's/^/    /' "$out/gpu.txt"
        for name in "${steps_run[@]}"; do
            echo
            if [[ -f "$out/$name.md" ]]; then
                cat "$out/$name.md"
            elif [[ -f "$out/$name.skipped" ]]; then
                cat "$out/$name.skipped"
            else
                echo "$name: not measured (see its log)"
            fi
        done
        echo
        echo "Seconds per step:$(sed 's/^/ /' "$out/seconds.txt" 2>/dev/null | paste -sd ';' -)"
    } > "$out/table.tmp" && mv "$out/table.tmp" "$out/table.md"
}
step() {  # name, command...: runs it in the time left, keeps its log, notes a failure and goes on
    local name=$1; shift
    [[ " ${steps_run[*]} " == *" $name "* ]] || return 0
    local left=$((budget - SECONDS)) began=$SECONDS
    echo "== $name ($left s left)" >&2
    if ((left < 20)); then
        echo "$name: not run (${SECONDS} s of the ${budget} s budget spent before it)" > "$out/$name.skipped"
        echo "$name not run: out of time" | tee -a "$out/failures.txt" >&2
        status=1
    else
        # `timeout` signals the step's whole process group (bench.py's measuring children
        # too), and kills it 15 s later if it is still there.
        timeout -k 15 "$left" "$@" 2> "$out/$name.log"
        local code=$?
        if ((code == 124 || code == 137)); then
            echo "$name timed out at the budget (see $out/$name.log)" | tee -a "$out/failures.txt" >&2
            status=1
        elif ((code != 0)); then
            echo "$name failed (see $out/$name.log)" | tee -a "$out/failures.txt" >&2
            status=1
        fi
    fi
    echo "$name $((SECONDS - began))" >> "$out/seconds.txt"
    write_table
}
bench() {  # name, bench.py flags
    local name=$1; shift
    step "$name" python3 benchmarks/bench.py --precision=bfloat16 --steps="$steps" "${size[@]}" "$@" \
        --output="$out/$name.md"
}
step attention python3 benchmarks/attention_check.py --variant="$vit" "${check[@]}" --output="$out/attention.md"
step profile python3 benchmarks/device_profile.py --variant="$vit" "${profile[@]}" --output="$out/profile.md"
bench vit_b16_train --variants="$vit" --batch_sizes="$batch" --modes=train --repeats="$repeats" "${vs[@]}"
bench vit_b16_infer --variants="$vit" --batch_sizes="$batch" --modes=infer --repeats="$infer_repeats" "${vs[@]}"
bench vit_b16_fit --variants="$vit" --batch_sizes="$batch" --modes=fit
bench deit_s16_train --variants="$deit" --batch_sizes="$small_batch" --modes=train "${vs[@]}"
bench swin_t_train --variants=Swin_T --batch_sizes="$small_batch" --modes=train "${vs[@]}"
exit $status

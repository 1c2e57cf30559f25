#!/usr/bin/env bash
# The GPU rows of BENCHMARKS.md: keras_vit on JAX in bfloat16 against timm under
# torch.compile, on one NVIDIA GPU, from the repository root:
#
#     bash benchmarks/gpu.sh OUTPUT_DIR
#
# Needs JAX with CUDA, Keras 3, PyTorch with CUDA and timm; not TensorFlow (the
# JAX backend runs without it). Each configuration is its own bench.py call, so
# a table lands in OUTPUT_DIR as soon as it is measured, even if a later one runs
# out of time. The headline configuration (ViT-B/16 training) goes first.
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu.sh OUTPUT_DIR}
mkdir -p "$out"
export KERAS_BACKEND=jax PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import jax, keras, torch, timm; print('jax', jax.__version__, jax.devices(), 'keras', keras.__version__, 'torch', torch.__version__, 'timm', timm.__version__)" | tee -a "$out/gpu.txt"
common=(--vs=timm --precision=bfloat16 --timm_compile --steps=20)
run() {  # name, bench.py flags
    local name=$1; shift
    python3 benchmarks/bench.py "${common[@]}" "$@" --output="$out/$name.md" 2> "$out/$name.log"
}
run vit_b16_train --variants=ViT_B16 --batch_sizes=256 --modes=train
run vit_b16_infer --variants=ViT_B16 --batch_sizes=256 --modes=infer
run convit_s_train --variants=ConViT_S --batch_sizes=256 --modes=train
run r50_vit_b16_train --variants=R50_ViT_B16 --batch_sizes=128 --modes=train

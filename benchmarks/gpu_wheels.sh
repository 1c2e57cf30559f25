#!/usr/bin/env bash
# The wheels that benchmarks/gpu.sh needs on a lent GPU machine, downloaded here beforehand:
#
#     bash benchmarks/gpu_wheels.sh [DIR]      # DIR defaults to .whl, which .gitignore ignores
#
# The device image has JAX with CUDA, PyTorch, timm, NumPy, Pillow, safetensors, h5py,
# ml-dtypes, rich and absl-py for its Python 3.12, but not Keras, nor two of Keras' own
# dependencies (namex, optree), and nothing can be downloaded there. So they travel with
# the working tree: the device call carries DIR, and gpu.sh installs every wheel in it
# before its first step:
#
#     run(command="bash benchmarks/gpu.sh $OUT", carry=[".whl"], timeout_s=540)
#
# Each at the version installed here, the one the tests ran with; optree is compiled,
# so its wheel is the device's (CPython 3.12, x86-64 Linux), whatever this machine runs.
set -euo pipefail
dest=${1:-.whl}
names=(keras namex optree)
specs=()
for name in "${names[@]}"; do
    version=$(python3 -c "from importlib.metadata import version; print(version('$name'))") || {
        echo "gpu_wheels.sh: $name is not installed here; install the test extra first" >&2
        exit 1
    }
    specs+=("$name==$version")
done
# Into a new folder beside DIR, then renamed: an interrupted download leaves no half of it.
partial=$(mktemp -d "${dest%/}.partial.XXXXXX")
trap 'rm -rf "$partial"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$partial" "${specs[@]}"
rm -rf "$dest"
mv "$partial" "$dest"
ls -l "$dest"

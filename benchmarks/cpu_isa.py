"""The CPU's instruction sets, a cap on the ones the frameworks use, and whether float32 stays float32.

The VMs this project measures on differ: some CPUs have AVX-512 (with BF16 and
VNNI, some AMX), some only AVX2, and a laptop is as likely to be either. Both
kinds can be measured on one AVX-512 machine by capping every framework at
AVX2, each through its own switch:

- XLA (JAX, and TensorFlow's `jit_compile`): `--xla_cpu_max_isa=AVX2` in
  `XLA_FLAGS`, which XLA parses when it starts (an unknown flag aborts it, so
  an accepted flag is a read one);
- oneDNN (TensorFlow's and PyTorch's CPU kernels): `ONEDNN_MAX_CPU_ISA=AVX2`;
- PyTorch's own kernels (ATen): `ATEN_CPU_CAPABILITY=avx2`.

`probe` checks, in a fresh process of each framework, that the cap took
effect: the ISA oneDNN reports it dispatches at (`ONEDNN_VERBOSE=1`'s
`isa:` line) and PyTorch's `torch.backends.cpu.get_cpu_capability()`. It also
checks that a float32 product is computed in float32 (no silent bfloat16 from
an AMX or AVX512-BF16 fast path): its error against float64 numpy must be of
float32's order, so that comparing the two frameworks is fair.
"""

import json
import os
import platform
import subprocess
import sys

ISAS = ("native", "avx2")
_CAPS = {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}}
_XLA_CAP = {"avx2": "--xla_cpu_max_isa=AVX2"}
# The largest error of a float32 product of 256 x 256 standard normal matrices relative to
# its largest entry, against float64: float32 rounding gives about 1e-6 (each sum of 256
# products); bfloat16's 8-bit mantissa gives about 1e-2. Anything above this bound is not float32.
FLOAT32_ERROR_BOUND = 1e-4
_PREFIX = "CPU_ISA_PROBE "


def machine_isa(cpuinfo=None):
    """The vector instruction sets of this machine's CPU, as a short phrase for a table header.

    Args:
        cpuinfo: str or None. The text of `/proc/cpuinfo`; read from the
            machine when None.

    Returns:
        str, e.g. `"AVX-512 (avx512_bf16, avx512_vnni, avx512f)"`, `"AVX2 only
        (no AVX-512)"`, or the machine's architecture where it is not x86.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return platform.machine()
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    wide = sorted(flag for flag in flags if flag in ("avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"))
    if "avx512f" in flags:
        return f"AVX-512 ({', '.join(wide)})"
    if "avx2" in flags:
        return "AVX2 only (no AVX-512)"
    return platform.machine()


def capped_environment(isa, environ=None):
    """The environment of a process whose frameworks use at most `isa`.

    Args:
        isa: str. `"native"` (nothing capped) or `"avx2"`.
        environ: dict or None. The environment to start from; `os.environ` when None.

    Returns:
        A new dict: `environ` with the caps added (`XLA_FLAGS` keeps its other flags).

    Raises:
        ValueError: for an `isa` outside `ISAS`.
    """
    if isa not in ISAS:
        raise ValueError(f"`isa` must be one of {ISAS}. Received: isa={isa!r}")
    environ = dict(os.environ if environ is None else environ)
    environ.update(_CAPS.get(isa, {}))
    if isa in _XLA_CAP and _XLA_CAP[isa] not in environ.get("XLA_FLAGS", "").split():
        environ["XLA_FLAGS"] = " ".join(filter(None, [environ.get("XLA_FLAGS", ""), _XLA_CAP[isa]]))
    return environ


def _float32_error(product):
    """Max |float32 product - float64 product| over max |float64 product|, for 256 x 256 normal matrices."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((256, 256)).astype("float32")
    exact = a.astype("float64") @ a.astype("float64")
    return float(np.abs(np.asarray(product(a), "float64") - exact).max() / np.abs(exact).max())


def _probe_here(framework):
    """The probe's measurements in this process (run by `probe` in a fresh one)."""
    found = {}
    if framework == "timm":
        import torch

        found["aten"] = torch.backends.cpu.get_cpu_capability()
        found["float32_error"] = _float32_error(lambda a: (torch.from_numpy(a) @ torch.from_numpy(a)).numpy())
        # A convolution, which PyTorch runs through oneDNN (its products go to its BLAS), so that
        # oneDNN reports the ISA it dispatches at.
        with torch.no_grad():
            torch.nn.functional.conv2d(torch.ones(8, 3, 64, 64), torch.ones(16, 3, 3, 3))
    else:
        import keras

        backend = keras.backend.backend()
        if backend == "jax":
            import jax

            matmul = jax.jit(lambda x: x @ x)
        else:
            import tensorflow as tf

            matmul = tf.function(lambda x: tf.matmul(x, x), jit_compile=True)
            tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))  # oneDNN's own kernel, which reports its ISA
        found["backend"] = backend
        found["float32_error"] = _float32_error(lambda a: keras.ops.convert_to_numpy(matmul(a)))
    print(_PREFIX + json.dumps(found), flush=True)


def probe(framework, isa):
    """What a fresh process of `framework` runs at under the cap of `isa`, and its float32 product's error.

    Args:
        framework: str. `"keras"` (the Keras backend of this environment) or `"timm"` (PyTorch).
        isa: str. One of `ISAS`.

    Returns:
        dict: `onednn_isa` (what oneDNN reports it dispatches at, or None when
        it reports nothing), `aten` (PyTorch's capability; timm only),
        `backend` (keras only), `float32_error` and `float32` (the error
        within `FLOAT32_ERROR_BOUND`).

    Raises:
        RuntimeError: when the probe process fails (an XLA flag it does not
            know aborts it), with its last line of stderr.
    """
    environ = capped_environment(isa)
    environ.update(ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="2")
    if framework == "keras" and environ.get("KERAS_BACKEND", "tensorflow") == "jax":
        environ.setdefault("JAX_PLATFORMS", "cpu")
    code = f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); " \
           f"import cpu_isa; cpu_isa._probe_here({framework!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_PREFIX)]
    if done.returncode or not lines:
        raise RuntimeError(f"the {framework} ISA probe at isa={isa!r} failed: "
                           f"{' '.join(done.stderr.strip().splitlines()[-1:])}")
    found = json.loads(lines[-1][len(_PREFIX):])
    isa_lines = [line for line in done.stdout.splitlines() if line.startswith("onednn_verbose") and ",isa:" in line]
    found["onednn_isa"] = isa_lines[0].split(",isa:", 1)[1].strip() if isa_lines else None
    found["float32"] = found["float32_error"] <= FLOAT32_ERROR_BOUND
    return found


def describe(isa, probes):
    """One line for a table's header: the machine's ISA, the cap, and what each framework's probe found."""
    parts = [f"CPU: {machine_isa()}; frameworks capped at: {isa}"]
    for framework, found in probes.items():
        seen = [f"oneDNN {found['onednn_isa'] or 'reported no ISA'}"]
        if "aten" in found:
            seen.append(f"ATen {found['aten']}")
        if isa != "native" and framework == "keras":
            seen.append("XLA flag accepted")
        float32 = "float32" if found["float32"] else "NOT float32"
        seen.append(f"float32 product error {found['float32_error']:.1e} ({float32})")
        parts.append(f"{framework}: {', '.join(seen)}")
    return "; ".join(parts)

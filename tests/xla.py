"""XLA settings of the test run, without importing Keras (tests/conftest.py sets them before it does)."""

import os

# XLA:CPU's optimisation passes, off for the tests (tests/conftest.py says why).
CPU_PASSES_OFF = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")
_DEVICE_COUNT = "--xla_force_host_platform_device_count"


def xla_flags(devices=None, optimized=False):
    """`XLA_FLAGS` for a JAX subprocess: this session's with `devices` virtual CPU devices (one when None).

    tests/conftest.py turns XLA:CPU's optimisation passes off, which saves compile time; with
    `optimized` they are on again, for a run that computes long enough to pay for them.
    """
    dropped = (_DEVICE_COUNT,)
    if optimized:
        dropped += tuple(flag.split("=")[0] for flag in CPU_PASSES_OFF)
    kept = [flag for flag in os.environ.get("XLA_FLAGS", "").split() if not flag.startswith(dropped)]
    if devices is not None:
        kept.append(f"{_DEVICE_COUNT}={devices}")
    return " ".join(kept)

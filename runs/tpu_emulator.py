"""A TPU host emulated on the CPU: what keras_vit's TPU path is tested and traced on.

No TPU can be reached from the machines this project is built on. Under
`emulated_tpu()` the process looks like a TPU host to JAX's public API, and
the TPU's kernels run on the CPU:

- `jax.default_backend()` answers `"tpu"`, and the devices of `jax.devices()`
  answer `"tpu"` for `.platform` (they are the CPU devices underneath, each
  wrapped; every other attribute is the CPU device's);
- `jax.experimental.pallas.pallas_call` runs every kernel in Pallas's
  interpreter (`interpret=True`): the kernel's program, its grid and blocks,
  lowered to XLA loops on the CPU, forward and backward.

What this proves: the code that a TPU takes is chosen, traced and computes the
right function, with the Pallas kernel in the step. What it cannot: the Mosaic
compiler's verdict on the kernel's blocks, and any speed.

The wrapped devices are for code that asks which platform it runs on; passing
one to `jax.device_put` or a `Mesh` fails. A run over several devices (a
`keras.distribution` over `--xla_force_host_platform_device_count` CPUs) takes
`emulated_tpu(devices=False)`: `jax.devices()` stays the CPU's, the rest is
emulated. Used by the tests (the `emulated_tpu` fixture of `tests/conftest.py`)
and by `benchmarks/saved_residuals.py` (its `tpu` path).
"""

import contextlib
import functools


class EmulatedTPUDevice:
    """A CPU device that says it is a TPU core."""

    platform = "tpu"
    device_kind = "TPU (emulated on the CPU)"

    def __init__(self, device):
        self._device = device

    def __getattr__(self, name):
        return getattr(self._device, name)

    def __repr__(self):
        return f"EmulatedTPUDevice(id={self._device.id})"


@contextlib.contextmanager
def emulated_tpu(devices=True):
    """Within the block, JAX reports a TPU host and Pallas kernels are interpreted on the CPU.

    Args:
        devices: bool. Whether `jax.devices()` answers TPU cores too (see the module docstring).
            Defaults to `True`.
    """
    import jax
    from jax.experimental import pallas

    real_devices, real_backend, real_pallas_call = jax.devices, jax.default_backend, pallas.pallas_call

    def tpu_cores(backend=None):
        return [EmulatedTPUDevice(d) for d in real_devices(None if backend == "tpu" else backend)]

    @functools.wraps(real_pallas_call)
    def interpreted_pallas_call(*args, **kwargs):
        kwargs["interpret"] = True
        return real_pallas_call(*args, **kwargs)

    jax.devices, jax.default_backend, pallas.pallas_call = (
        tpu_cores if devices else real_devices, lambda: "tpu", interpreted_pallas_call
    )
    try:
        yield
    finally:
        jax.devices, jax.default_backend, pallas.pallas_call = real_devices, real_backend, real_pallas_call

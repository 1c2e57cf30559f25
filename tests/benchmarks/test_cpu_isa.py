"""`benchmarks/cpu_isa.py`: the CPU's ISA named, both frameworks capped at AVX2, and float32 checked."""

import pytest

from benchmarks import cpu_isa

_FLAGS = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma {extra}\n"


@pytest.mark.parametrize("extra, expected", [
    ("", "AVX2 only (no AVX-512)"),
    ("avx512f avx512_vnni avx512_bf16 amx_tile", "AVX-512 (amx_tile, avx512_bf16, avx512_vnni, avx512f)"),
])
def test_the_machines_isa_is_read_from_cpuinfo(extra, expected):
    assert cpu_isa.machine_isa(_FLAGS.format(extra=extra)) == expected


def test_the_avx2_cap_sets_each_frameworks_switch_and_keeps_other_xla_flags():
    environ = cpu_isa.capped_environment("avx2", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=AVX2"
    assert cpu_isa.capped_environment("avx2", environ)["XLA_FLAGS"] == environ["XLA_FLAGS"]  # capped once
    assert (environ["ONEDNN_MAX_CPU_ISA"], environ["ATEN_CPU_CAPABILITY"]) == ("AVX2", "avx2")
    assert cpu_isa.capped_environment("native", {"A": "1"}) == {"A": "1"}
    with pytest.raises(ValueError, match=r"`isa` must be one of \('native', 'avx2'\). Received: isa='avx512'"):
        cpu_isa.capped_environment("avx512", {})


@pytest.mark.skipif(cpu_isa.machine_isa().startswith(("AVX2", "AVX-512")) is False,
                    reason="an x86 CPU with AVX2, which the cap is for")
def test_capped_processes_report_avx2_and_compute_float32_products_in_float32(monkeypatch):
    # Fresh processes under the cap: what oneDNN dispatches at, PyTorch's capability, and each
    # framework's float32 product against float64 numpy (bfloat16 would be off by ~1e-2). The Keras
    # side on TensorFlow, whose CPU kernels are oneDNN's (XLA's on JAX report through no oneDNN).
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    keras_side, timm_side = cpu_isa.probe("keras", "avx2"), cpu_isa.probe("timm", "avx2")
    assert keras_side["onednn_isa"] == timm_side["onednn_isa"] == "Intel AVX2"
    assert timm_side["aten"] == "AVX2"
    for found in (keras_side, timm_side):
        assert found["float32"] and 0 < found["float32_error"] < cpu_isa.FLOAT32_ERROR_BOUND
    line = cpu_isa.describe("avx2", {"keras": keras_side, "timm": timm_side})
    assert "frameworks capped at: avx2" in line and "XLA flag accepted" in line and "NOT float32" not in line

"""The extras the notebooks install fit their runtimes (setup.cfg, read as text; nothing is installed).

A Colab TPU runtime ships JAX and libtpu and no TensorFlow: what the notebooks install
there must leave JAX and libtpu alone and bring TensorFlow's CPU build only. TensorFlow's
TPU build must be a release the other extras accept.
"""

import configparser
import pathlib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[2]
TENSORFLOW_BUILDS = {"tensorflow", "tensorflow-cpu", "tensorflow-tpu"}
TPU_RUNTIME_OWNS = {"jax", "jaxlib", "libtpu", "libtpu-nightly"}


def requirements(text):
    return [Requirement(line) for line in text.strip().splitlines() if line.strip() and not line.startswith("#")]


def setup_cfg():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    base = requirements(parser["options"]["install_requires"])
    extras = {name: requirements(text) for name, text in parser["options.extras_require"].items()}
    return base, extras


def names(reqs):
    return {canonicalize_name(req.name) for req in reqs}


def by_name(reqs, name):
    return next(req for req in reqs if canonicalize_name(req.name) == name)


def test_the_base_install_brings_no_tensorflow_or_jax():
    base, _ = setup_cfg()
    assert not names(base) & (TENSORFLOW_BUILDS | TPU_RUNTIME_OWNS), (
        "each runtime needs its own TensorFlow build: it belongs in the extras"
    )


@pytest.mark.parametrize("extra, build", [
    ("cpu", "tensorflow"), ("tpu", "tensorflow-cpu"), ("tensorflow-tpu", "tensorflow-tpu"),
    ("gpu", "tensorflow-cpu"), ("test", "tensorflow"),
])
def test_every_extra_brings_exactly_one_tensorflow_build(extra, build):
    _, extras = setup_cfg()
    assert names(extras[extra]) & TENSORFLOW_BUILDS == {build}


def test_the_tpu_extra_leaves_the_runtimes_jax_and_libtpu_alone():
    _, extras = setup_cfg()
    assert not names(extras["tpu"]) & TPU_RUNTIME_OWNS
    assert not names(extras["tensorflow-tpu"]) & TPU_RUNTIME_OWNS


def test_the_tensorflow_tpu_build_is_a_release_the_other_extras_accept():
    _, extras = setup_cfg()
    pins = {str(by_name(extras[extra], build).specifier) for extra, build in
            [("cpu", "tensorflow"), ("tpu", "tensorflow-cpu"), ("gpu", "tensorflow-cpu"), ("test", "tensorflow")]}
    assert len(pins) == 1, f"one TensorFlow pin for every build: {pins}"
    tpu_build = by_name(extras["tensorflow-tpu"], "tensorflow-tpu").specifier
    (version,) = [spec.version.rstrip(".*") for spec in tpu_build if spec.operator == "=="]
    assert next(iter(by_name(extras["cpu"], "tensorflow").specifier.filter([f"{version}.0"])), None), (
        f"tensorflow-tpu {version} lies outside the TensorFlow pin {pins}"
    )


def test_the_gpu_extra_brings_jax_with_cuda():
    _, extras = setup_cfg()
    jax = by_name(extras["gpu"], "jax")
    assert any(extra.startswith("cuda") for extra in jax.extras)

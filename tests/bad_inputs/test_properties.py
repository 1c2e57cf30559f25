"""Property-based sweep of bad arguments (Hypothesis): every builder and the core layers.

`test_builders.py` and `test_calls.py` pin one message per case; here Hypothesis
draws many wrong values of each kind (wrong type, out of range, wrong shape) for
every argument of that kind, and each must be refused with a `ValueError` or
`TypeError` that names the argument and shows what was received. The draws are
derandomized, so a CI run repeats the same examples.
"""

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import keras_vit
from keras_vit.layers import Patches, PatchCorruption, PatchEncoder, TransformerBlock

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

TINY = dict(image_size=16, num_classes=3)
BUILDERS = {
    "vit": (keras_vit.VisionTransformer, dict(TINY, patch_size=8, hidden_size=8, num_layers=1, num_heads=2, mlp_dim=8)),
    "hybrid": (keras_vit.VisionTransformer, dict(TINY, image_size=32, patch_size=1, hidden_size=8, num_layers=1,
                                                 num_heads=2, mlp_dim=8, resnet_stages=(1,))),
    "convit": (keras_vit.ConViT, dict(TINY, patch_size=8, hidden_size=8, num_layers=2, num_heads=2, mlp_dim=8,
                                      num_gpsa_layers=1)),
    "axial": (keras_vit.AxialViT, dict(TINY, patch_size=8, hidden_size=8, num_layers=1, num_heads=2, mlp_dim=8)),
    "swin": (keras_vit.SwinTransformer, dict(TINY, image_size=32, patch_size=4, embed_dim=8, depths=(1, 1),
                                             num_heads=(1, 2), window_size=4)),
}

# Values no argument of the kind accepts. Integral floats (2.0) and bools count as wrong
# types: a builder that took them would give layers of float widths or silently read True as 1.
NOT_A_POSITIVE_INT = st.one_of(
    st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3),
    st.lists(st.integers(1, 4), min_size=1, max_size=2))
NOT_A_RATE = st.one_of(
    st.sampled_from([1.0, -1e-9, float("inf"), float("nan")]),  # the edges, every time
    st.floats().filter(lambda v: not 0 <= v < 1), st.booleans(), st.text(max_size=3), st.none())
NOT_A_SIZE = st.one_of(
    st.integers(max_value=0), st.floats(), st.booleans(), st.text(max_size=3), st.none(),
    st.tuples(st.integers(1, 8)), st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8)),
    st.tuples(st.integers(max_value=0), st.integers(1, 8)), st.tuples(st.floats(), st.integers(1, 8)))
NOT_A_BOOL = st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none())

POSITIVE_INTS = {
    "vit": ("num_channels", "hidden_size", "num_layers", "num_heads", "mlp_dim", "num_classes"),
    "hybrid": ("hidden_size", "num_layers", "num_heads", "mlp_dim", "num_classes"),
    "convit": ("num_channels", "hidden_size", "num_layers", "num_heads", "mlp_dim", "num_classes"),
    "axial": ("num_channels", "hidden_size", "num_layers", "num_heads", "mlp_dim", "num_classes"),
    "swin": ("num_channels", "embed_dim", "window_size", "num_classes"),
}
RATES = ("dropout_rate", "attention_dropout_rate", "drop_path_rate")
SIZES = {"vit": ("image_size", "patch_size"), "hybrid": ("image_size",), "convit": ("image_size", "patch_size"),
         "axial": ("image_size", "patch_size"), "swin": ("image_size", "patch_size")}
BOOLS = ("include_top", "remat")


def _refused(call, name, value):
    """`call()` raises ValueError or TypeError naming `name` and showing `value`."""
    with pytest.raises((ValueError, TypeError)) as raised:
        call()
    message = str(raised.value)
    assert f"`{name}`" in message or f"{name}=" in message, (name, value, message)
    assert "Received" in message, (name, value, message)
    # The value is shown as repr shows it (nan and inf included), so the user sees what they passed.
    shown = repr(value)
    if not (isinstance(value, float) and math.isnan(value)):
        assert re.search(re.escape(shown), message), (name, value, message)


def _build(family, **overrides):
    builder, config = BUILDERS[family]
    return builder(**{**config, **overrides})


@pytest.mark.parametrize("family", sorted(BUILDERS))
@pytest.mark.parametrize("kind", ["int", "rate", "size", "bool"])
@SETTINGS
@given(data=st.data())
def test_builders_refuse_bad_integers_rates_sizes_and_flags(family, kind, data):
    names, values = {
        "int": (POSITIVE_INTS[family], NOT_A_POSITIVE_INT), "rate": (RATES, NOT_A_RATE),
        "size": (SIZES[family], NOT_A_SIZE), "bool": (BOOLS, NOT_A_BOOL),
    }[kind]
    name, value = data.draw(st.sampled_from(names), label="argument"), data.draw(values, label="value")
    _refused(lambda: _build(family, **{name: value}), name, value)


@pytest.mark.parametrize("layer", ["block_heads", "block_mlp", "block_rate", "patches", "encoder", "corruption"])
@SETTINGS
@given(data=st.data())
def test_core_layers_refuse_bad_arguments(layer, data):
    if layer == "block_heads":
        value = data.draw(NOT_A_POSITIVE_INT)
        _refused(lambda: TransformerBlock(num_heads=value, mlp_dim=8), "num_heads", value)
    elif layer == "block_mlp":
        value = data.draw(NOT_A_POSITIVE_INT)
        _refused(lambda: TransformerBlock(num_heads=2, mlp_dim=value), "mlp_dim", value)
    elif layer == "block_rate":
        value = data.draw(NOT_A_RATE)
        _refused(lambda: TransformerBlock(num_heads=2, mlp_dim=8, dropout_rate=value), "dropout_rate", value)
    elif layer == "patches":
        value = data.draw(NOT_A_SIZE)
        _refused(lambda: Patches(value), "patch_size", value)
    elif layer == "encoder":
        value = data.draw(NOT_A_POSITIVE_INT)
        _refused(lambda: PatchEncoder(value), "hidden_size", value)
    else:
        value = data.draw(st.one_of(st.sampled_from([0.0, 1.5, float("nan")]),
                                    st.floats().filter(lambda v: not 0 < v <= 1), st.text(max_size=2), st.none()))
        _refused(lambda: PatchCorruption(rate=value), "rate", value)

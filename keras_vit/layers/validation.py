"""Argument checks shared by the layers and model builders.

Each check raises a `ValueError` that names the argument, shows the value
received (with `repr`, so that `"8"` and `8` read differently) and says what is
accepted, so that a wrong argument never surfaces as a backend traceback.
"""

import math
import numbers

import keras


def _is_int(value):
    # bool is an int subclass, but `True` is never meant as a size.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def to_pair(value, name):
    """Returns `value` as a tuple of two positive ints.

    Args:
        value: int or sequence of 2 ints.
        name: str. Argument name used in the error message.

    Raises:
        ValueError: if `value` is not a positive int or a pair of them.
    """
    if _is_int(value):
        pair = (value, value)
    elif isinstance(value, (str, bytes)):
        pair = ()  # a string is a sequence of characters, never a size
    else:
        try:
            pair = tuple(value)
        except TypeError:
            pair = ()
    if len(pair) != 2 or not all(_is_int(v) and v > 0 for v in pair):
        raise ValueError(
            f"`{name}` must be a positive integer or a tuple of 2 positive "
            f"integers. Received: {name}={value!r}"
        )
    return pair


def check_positive_int(value, name):
    """Raises a ValueError unless `value` is a positive int."""
    if not _is_int(value) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_rate(value, name):
    """Raises a ValueError unless `value` is a number in [0, 1)."""
    if not _is_real(value) or not 0.0 <= value < 1.0:
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value!r}"
        )


def check_non_negative_float(value, name):
    """Raises a ValueError unless `value` is a finite number >= 0."""
    if not _is_real(value) or not math.isfinite(value) or value < 0:
        raise ValueError(
            f"`{name}` must be a finite number >= 0. Received: {name}={value!r}"
        )


def check_bool(value, name):
    """Raises a ValueError unless `value` is a bool.

    A string such as `"False"` is truthy, so accepting any value would silently
    do the opposite of what was asked.
    """
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


def check_dtype_policy(dtype, name="dtype"):
    """Returns the `keras.DTypePolicy` of `dtype`, refusing non-float policies.

    The models compute with floats (softmax, LayerNorm, GELU) and train float
    variables, so an integer, bool or quantized policy cannot work; this says so
    before any layer is built rather than deep inside one.

    Args:
        dtype: None (the global policy), a policy name or a `keras.DTypePolicy`.
        name: str. Argument name used in the error message.

    Raises:
        ValueError: for anything but a floating-point policy.
    """
    accepted = "'float32', 'bfloat16', 'mixed_bfloat16', 'mixed_float16' or a float keras.DTypePolicy"
    if dtype is None:
        return keras.dtype_policies.get(keras.config.dtype_policy())
    if not isinstance(dtype, (str, keras.DTypePolicy)):
        raise ValueError(f"`{name}` must be None or one of {accepted}. Received: {name}={dtype!r}")
    try:
        policy = keras.dtype_policies.get(dtype)
    except ValueError:
        policy = None
    is_float = policy is not None and all(
        keras.backend.is_float_dtype(d) for d in (policy.compute_dtype, policy.variable_dtype)
    )
    if not is_float or getattr(policy, "quantization_mode", None) is not None:
        raise ValueError(
            f"`{name}` must be None or one of {accepted} (the models compute and "
            f"train in floating point). Received: {name}={dtype!r}"
        )
    return policy


def check_remat_without_dropout(remat, dropout_rate, attention_dropout_rate):
    """Refuses `remat=True` together with dropout or attention dropout.

    Recomputing a block in the backward pass runs its random draws again: with a
    stateful seed they give other masks than the forward pass did (wrong
    gradients, silently, under `tf.recompute_grad`), and `jax.checkpoint` refuses
    the stateful draw outright. Stochastic depth is supported: the blocks draw
    its per-example masks before the recomputed function and pass them in
    (`call_with_remat`). Dropout masks are drawn deep inside the attention and
    the MLP, so remat is for runs without dropout.

    Args:
        remat: bool. The block's or model's `remat`.
        dropout_rate: float. Dropout after the dense layers.
        attention_dropout_rate: float. Dropout on the attention probabilities.

    Raises:
        ValueError: for `remat=True` with a non-zero rate, naming the rates.
    """
    rates = {"dropout_rate": dropout_rate, "attention_dropout_rate": attention_dropout_rate}
    used = {name: rate for name, rate in rates.items() if rate}
    if remat and used:
        received = ", ".join(f"{name}={rate}" for name, rate in used.items())
        raise ValueError(
            "`remat=True` supports stochastic depth but not dropout: the recomputed backward pass "
            "would draw other dropout masks than the forward pass. Set the dropout rates to 0 or "
            f"remat=False. Received: remat=True, {received}"
        )



def key_ignoring_case(name, keys):
    """The key of `keys` that `name` spells in any case, or None (also for a `name` that is not a str).

    The known checkpoint names are matched so: `"vit_b16/AugReg"` is
    `"ViT_B16/augreg"`.
    """
    if not isinstance(name, str):
        return None
    wanted = name.lower()
    return next((key for key in keys if key.lower() == wanted), None)

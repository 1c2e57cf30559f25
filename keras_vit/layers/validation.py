"""Argument checks shared by the layers and model builders."""


def to_pair(value, name):
    """Returns `value` as a tuple of two positive ints.

    Args:
        value: int or sequence of 2 ints.
        name: str. Argument name used in the error message.

    Raises:
        ValueError: if `value` is not a positive int or a pair of them.
    """
    if isinstance(value, int):
        pair = (value, value)
    else:
        try:
            pair = tuple(value)
        except TypeError:
            pair = ()
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
        raise ValueError(
            f"`{name}` must be a positive integer or a tuple of 2 positive "
            f"integers. Received: {name}={value}"
        )
    return pair


def check_positive_int(value, name):
    """Raises a ValueError unless `value` is a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value}"
        )


def check_rate(value, name):
    """Raises a ValueError unless `value` is a probability in [0, 1)."""
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"`{name}` must be a float in [0, 1). Received: {name}={value}"
        )

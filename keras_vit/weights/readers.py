"""Reading checkpoint files into flat dicts of numpy arrays."""

import json
import math
import os
import struct
import zipfile

import numpy as np

FORMATS = ("npz", "safetensors", "keras")
# What a file of each accepted extension starts with, for the message when it does not.
_LAYOUTS = {
    ".keras": "a zip archive (it begins with b'PK') holding config.json",
    ".npz": "a zip archive of .npy arrays (it begins with b'PK')",
    ".safetensors": "an 8-byte header length followed by a JSON header",
}


def detect_format(path):
    """Returns `"npz"`, `"safetensors"` or `"keras"` from the file's contents.

    Raises:
        ValueError: for a file that is none of these.
    """
    with open(path, "rb") as f:
        head = f.read(16)
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile as error:
            raise ValueError(f"Checkpoint {path!r} is a damaged zip archive: {error}") from None
        return "keras" if "config.json" in names else "npz"
    if len(head) >= 9:
        (header_size,) = struct.unpack("<Q", head[:8])
        if head[8:9] == b"{" and 0 < header_size < os.path.getsize(path):
            return "safetensors"
    accepted = "Accepted formats: .npz (official ViT / big_vision), .safetensors (timm state dicts), .keras."
    extension = os.path.splitext(path)[1].lower()
    if extension in _LAYOUTS:
        # The name promises a format the bytes do not have (a failed download, an HTML error
        # page, a file renamed by hand): say so, rather than "unknown format" beside its name.
        raise ValueError(
            f"Checkpoint {path!r} is named {extension} but is not a {extension} file: a {extension} file is "
            f"{_LAYOUTS[extension]}, and this one begins with {head[:8]!r}. {accepted}"
        )
    raise ValueError(f"Unknown checkpoint format of {path!r}. {accepted}")


def read_npz(path):
    """Reads every array of an `.npz`, naming the entry that cannot be read."""
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise ValueError(f"Could not read {path!r} as .npz ({type(error).__name__}: {error})") from None
    arrays = {}
    with archive:
        for key in archive.files:
            try:
                # Reading every array checks every CRC, so truncation shows here.
                arrays[key] = np.asarray(archive[key])
            except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
                # Object arrays (pickles, e.g. a saved `None`) land here too:
                # they are refused because unpickling can run arbitrary code.
                raise ValueError(
                    f"Could not read entry {key!r} of {path!r} as .npz "
                    f"({type(error).__name__}: {error})"
                ) from None
    return arrays


# Bytes per element of the safetensors dtypes.
_SAFETENSORS_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
    "U32": 4, "I32": 4, "F32": 4,
    "U64": 8, "I64": 8, "F64": 8,
}


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _header_entry_problem(entry):
    """What is wrong with one tensor entry of a safetensors header, or None."""
    if not isinstance(entry, dict):
        return f"is {entry!r}; expected an object with 'dtype', 'shape' and 'data_offsets'"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _SAFETENSORS_ITEMSIZE:
        return f"has dtype={dtype!r}; expected one of {sorted(_SAFETENSORS_ITEMSIZE)}"
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        return f"has shape={shape!r}; expected a list of non-negative integers"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        return f"has data_offsets={offsets!r}; expected [begin, end] with 0 <= begin <= end"
    expected = math.prod(shape) * _SAFETENSORS_ITEMSIZE[dtype]
    if offsets[1] - offsets[0] != expected:
        return (
            f"has data_offsets={offsets!r} ({offsets[1] - offsets[0]} bytes) but dtype "
            f"{dtype} and shape {shape} take {expected} bytes"
        )
    return None


def _check_safetensors_header(path, header):
    """Raises a ValueError naming the file and the entry for a malformed header."""
    if not isinstance(header, dict):
        raise ValueError(
            f"Damaged safetensors header in {path!r}: expected a JSON object of "
            f"tensors, got {type(header).__name__}."
        )
    for key, entry in header.items():
        if key == "__metadata__":
            if entry is not None and not (
                isinstance(entry, dict) and all(isinstance(v, str) for v in entry.values())
            ):
                raise ValueError(
                    f"Damaged safetensors header in {path!r}: '__metadata__' must map "
                    f"names to strings. Received: {entry!r}"
                )
            continue
        problem = _header_entry_problem(entry)
        if problem is not None:
            raise ValueError(f"Damaged safetensors header in {path!r}: entry {key!r} {problem}.")


def read_safetensors(path):
    """Reads a `.safetensors` file after checking its header and size."""
    from safetensors.numpy import load_file

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        try:
            header = json.loads(f.read(header_size))
        except ValueError as error:
            raise ValueError(f"Damaged safetensors header in {path!r}: {error}") from None
    _check_safetensors_header(path, header)
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + header_size + end > size:
        raise ValueError(
            f"Checkpoint {path!r} is truncated: its header describes "
            f"{8 + header_size + end} bytes but the file has {size}."
        )
    try:
        arrays = load_file(path)
    except Exception as error:  # safetensors raises its own error types
        raise ValueError(f"Could not read {path!r} as .safetensors: {error}") from None
    return {key: value.astype("float32") if value.dtype == np.float16 else value for key, value in arrays.items()}


def read_keras(path):
    import keras

    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as error:  # Keras raises many types for a bad archive
        raise ValueError(f"Could not read {path!r} as a .keras model: {error}") from None
    return {w.path: np.asarray(keras.ops.convert_to_numpy(w)) for w in model.weights}


def _is_numeric(array):
    # bfloat16 (ml_dtypes) has no numpy kind of its own; it is a number all the same.
    return array.dtype.kind in "biuf" or array.dtype.name == "bfloat16"


def check_numeric(path, arrays):
    """Raises a ValueError naming the file and the entry of any array that is not numbers.

    A string array would otherwise only fail at assignment, deep in the
    backend, with a message that names neither.
    """
    for key, array in arrays.items():
        if not _is_numeric(array):
            raise ValueError(
                f"Entry {key!r} of {path!r} holds {array.dtype} values of shape "
                f"{array.shape}, not numbers; a checkpoint holds numeric arrays only."
            )


def read_checkpoint(path):
    """Reads a checkpoint file.

    Args:
        path: str or path. A `.npz`, `.safetensors` or `.keras` file.

    Returns:
        Tuple `(format, arrays)`: the detected format and a dict of numeric
        numpy arrays keyed by the names stored in the file.

    Raises:
        ValueError: naming the file (and the entry, where one is at fault) for
            a missing, unreadable or malformed file.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"Checkpoint {path!r} is a directory, not a checkpoint file.")
    if not os.path.isfile(path):
        raise ValueError(f"Checkpoint file not found. Received: path={path!r}")
    fmt = detect_format(path)
    reader = {"npz": read_npz, "safetensors": read_safetensors, "keras": read_keras}[fmt]
    arrays = reader(path)
    check_numeric(path, arrays)
    return fmt, arrays

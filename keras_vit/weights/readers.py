"""Reading checkpoint files into flat dicts of numpy arrays."""

import json
import os
import struct
import zipfile

import numpy as np

FORMATS = ("npz", "safetensors", "keras")


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
    raise ValueError(
        f"Unknown checkpoint format of {path!r}. Accepted formats: .npz (official "
        "ViT / big_vision), .safetensors (timm state dicts), .keras."
    )


def read_npz(path):
    try:
        with np.load(path, allow_pickle=False) as data:
            # Reading every array checks every CRC, so truncation shows here.
            return {key: np.asarray(data[key]) for key in data.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as error:
        raise ValueError(f"Could not read {path!r} as .npz ({type(error).__name__}: {error})") from None


def read_safetensors(path):
    from safetensors.numpy import load_file

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        (header_size,) = struct.unpack("<Q", f.read(8))
        try:
            header = json.loads(f.read(header_size))
        except ValueError as error:
            raise ValueError(f"Damaged safetensors header in {path!r}: {error}") from None
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


def read_checkpoint(path):
    """Reads a checkpoint file.

    Args:
        path: str. A `.npz`, `.safetensors` or `.keras` file.

    Returns:
        Tuple `(format, arrays)`: the detected format and a dict of numpy arrays
        keyed by the names stored in the file.
    """
    if not os.path.isfile(path):
        raise ValueError(f"Checkpoint file not found. Received: path={path!r}")
    fmt = detect_format(path)
    reader = {"npz": read_npz, "safetensors": read_safetensors, "keras": read_keras}[fmt]
    return fmt, reader(path)

"""Known checkpoints' downloads, and the check of a record against a model before one.

The records themselves (`KnownCheckpoint`, one per published file, registered
by its family) are `keras_vit.checkpoints`'; this module fetches their files.
Files are fetched with `keras.utils.get_file` into the Keras cache
(`~/.keras/models/keras_vit/`), and every use of a cached file is verified:

- An entry with a pinned `sha256` is checked against it after every fetch; a
  file whose hash differs is removed and refused.
- No entry has a pinned hash yet (none could be established from a source
  independent of the download itself), so all are trust-on-first-use: the
  sha256 of the file is recorded beside it (`<file>.sha256`) at its first use
  and every later use recomputes and compares it, refusing a file that changed
  since. This detects a cached file that was corrupted or replaced; it cannot
  tell whether the first download was the genuine file.

Independently, the readers verify every zip CRC of an `.npz` and the declared
size and header of a `.safetensors`, and a known checkpoint is checked against
the model's architecture before anything is downloaded.
"""

import os
import re

import keras

from keras_vit.architectures import ABLATION_DEFAULTS, ARCHITECTURES, architecture, differing_keys, mismatches
from keras_vit.checkpoints import KNOWN_CHECKPOINTS
from keras_vit.files import file_sha256, write_text_atomically


# Cache root for downloads; `None` is Keras' own (`~/.keras` or $KERAS_HOME).
CACHE_DIR = None


def is_checkpoint_file(weights):
    """True when `weights` is a path (str or `os.PathLike`) that exists."""
    return isinstance(weights, (str, os.PathLike)) and os.path.exists(weights)


def checkpoint_architecture(key):
    """The architecture (see `keras_vit.architectures`) of known checkpoint `key`, or None.

    None for an entry whose variant is not in the table (nothing to compare).
    """
    variant = key.split("/")[0]
    if variant not in ARCHITECTURES:
        return None
    builder, config = ARCHITECTURES[variant]
    return architecture(builder, {**config, **KNOWN_CHECKPOINTS[key].config})


def check_fits(key, actual, target):
    """Raises unless known checkpoint `key` fits the architecture `actual`; downloads nothing.

    Args:
        key: str. A `KNOWN_CHECKPOINTS` key.
        actual: dict. The architecture of the model to load into (see
            `keras_vit.architectures.architecture`), or None to skip.
        target: str. The model or variant, for the message.

    Raises:
        ValueError: naming the checkpoint, its variant, the model and every
            field that differs; for an ablation switch off its published value
            (`keras_vit.architectures.ABLATION_DEFAULTS`), the values of the
            builder's switches that `weights` needs and those of the model.
    """
    expected = checkpoint_architecture(key)
    if expected is None or actual is None:
        return
    differing = differing_keys(expected, actual)
    if not differing:
        return
    variant = key.split("/")[0]
    same_builder = expected["builder"] == actual.get("builder")
    switches = ABLATION_DEFAULTS.get(expected["builder"], {}) if same_builder else {}

    def without_switches(fields):
        return {k: v for k, v in fields.items() if k not in switches}

    problems = mismatches(without_switches(expected), without_switches(actual))
    reasons = [f"{', '.join(problems)} (checkpoint vs model)"] if problems else []
    if any(k in switches for k in differing):
        # All of the builder's switches, so that the message shows the whole call that fits.
        shown = [k for k in switches if k in actual]
        reasons.append(
            f"`weights` needs {', '.join(f'{k}={expected[k]!r}' for k in shown)} (the published "
            f"model's ablation switches) and the model has {', '.join(f'{k}={actual[k]!r}' for k in shown)}, "
            "whose weights differ from the checkpoint's in shape or meaning"
        )
    raise ValueError(
        f"The checkpoint {key!r} is one of {variant} and does not fit {target}: {'; '.join(reasons)}. "
        f"Nothing was downloaded. keras_vit.{variant}(weights={key!r}) builds a model that it fits."
    )


def _cache_name(checkpoint):
    fname = checkpoint.url.rstrip("/").split("/")[-1]
    if fname == "model.safetensors":  # hub files all share one name
        fname = checkpoint.url.split("/")[-4] + ".safetensors"
    return fname


class CheckpointDownloadError(RuntimeError):
    """A known checkpoint could not be downloaded; the message names the local routes."""


def cached_path(checkpoint, cache_dir=None):
    """Where the download of `checkpoint` is kept: `<cache>/models/keras_vit/<file name>`.

    Args:
        checkpoint: `KnownCheckpoint`.
        cache_dir: str or None. Cache root; defaults to `CACHE_DIR`, else Keras's
            (`$KERAS_HOME`, or `~/.keras`).
    """
    root = cache_dir or CACHE_DIR or os.environ.get("KERAS_HOME") or os.path.join("~", ".keras")
    return os.path.join(os.path.expanduser(root), "models", "keras_vit", _cache_name(checkpoint))


def fetch(checkpoint, cache_dir=None):
    """Downloads a known checkpoint into the Keras cache (once) and returns its verified path.

    Args:
        checkpoint: `KnownCheckpoint`.
        cache_dir: str or None. Cache root; defaults to `CACHE_DIR`.

    Raises:
        CheckpointDownloadError: if the file is not cached and cannot be
            downloaded (offline, say); the message says from where, and the
            two local routes: the file's path as `weights=`, or the file put
            where the cache keeps it.
        ValueError: if the file's sha256 differs from the pinned one (the file
            is removed, so the next call downloads it again), or, for an entry
            without a pin, from the one recorded at its first use.
    """
    cache_dir = cache_dir or CACHE_DIR
    if cache_dir is not None:
        # get_file falls back to /tmp/.keras for a root that does not exist yet.
        os.makedirs(cache_dir, exist_ok=True)
    try:
        path = keras.utils.get_file(
            fname=_cache_name(checkpoint),
            origin=checkpoint.url,
            cache_dir=cache_dir,
            cache_subdir=os.path.join("models", "keras_vit"),
        )
    except Exception as error:  # get_file raises a bare Exception for URL and HTTP errors; it removes the part
        reason = str(error).split(" -- ", 1)[-1] or type(error).__name__
        raise CheckpointDownloadError(
            f"The checkpoint could not be downloaded from {checkpoint.url} ({reason}). Offline, fetch the file "
            f"on another machine and either pass its path (weights='/path/to/{_cache_name(checkpoint)}', or "
            f"--pretrained= in train/main.py) or put it at {cached_path(checkpoint, cache_dir)}, where it is "
            "found without a download."
        ) from None
    actual = file_sha256(path)
    if checkpoint.sha256 is not None:
        _check_pinned(checkpoint, path, actual)
    else:
        _check_recorded(path, actual)
    return path


def _check_pinned(checkpoint, path, actual):
    if actual != checkpoint.sha256:
        os.remove(path)
        raise ValueError(
            f"The download of {checkpoint.url} is corrupt or incomplete: its sha256 "
            f"is not the recorded {checkpoint.sha256} but {actual}. The file {path} "
            "was removed; try again."
        )


def _check_recorded(path, actual):
    """Trust on first use: records the hash beside `path`, or compares with the record."""
    record = f"{path}.sha256"
    if not os.path.exists(record):
        write_text_atomically(record, f"{actual}  {os.path.basename(path)}\n")
        return
    with open(record) as f:
        recorded = f.read().split()[:1]
    if not recorded or not re.fullmatch(r"[0-9a-f]{64}", recorded[0]):
        raise ValueError(
            f"The hash record {record} of the cached checkpoint {path} is damaged "
            f"(expected a sha256 in hex). Delete both files to download the checkpoint again."
        )
    if recorded[0] != actual:
        raise ValueError(
            f"The cached checkpoint {path} changed since its first use: its sha256 "
            f"is {actual} but {recorded[0]} was recorded in {record}. Refusing to "
            f"load it. Delete {path} to download it again (and {record} as well if "
            "the published file itself was replaced)."
        )

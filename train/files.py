"""File operations of the workdir, on local paths and on TensorFlow's file systems (`gs://`, `ram://`, ...).

The remote-path shim (`is_remote`, `gfile`), the atomic writes and the folder
moves with a commit point (`move_folder`'s `last`, a checkpoint's manifest)
are the library's, `keras_vit.files`: this module adds the listing, sizing and
syncing the checkpoints need, the exclusive creation of the workdir's lock, and
the naming of a failed write (`os_errors`), and is the trainer's one module of
file operations.
"""

import contextlib
import errno
import os
import re
import uuid

from keras_vit.files import (  # noqa: F401 - the trainer's file operations, used as `files.<name>`
    absolute,
    exists,
    gfile,
    is_remote,
    move_folder,
    open_file,
    remove,
    rmtree,
    walk_files,
)


def isdir(path):
    return gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path):
    if is_remote(path):
        return gfile().exists(path) and not gfile().isdir(path)
    return os.path.isfile(path)


def listdir(path):
    # gfile lists sub-folders of some file systems with a trailing slash.
    return [name.rstrip("/") for name in gfile().listdir(path)] if is_remote(path) else os.listdir(path)


def makedirs(path):
    gfile().makedirs(path) if is_remote(path) else os.makedirs(path, exist_ok=True)


def getsize(path):
    return gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def remove_any(path):
    rmtree(path) if isdir(path) else remove(path)


def sync(path):
    """Makes a local file's content durable (a remote write is durable once closed)."""
    if is_remote(path):
        return
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def getmtime(path):
    """When a file was last written, in seconds since the epoch (remotely by the store's clock)."""
    return gfile().stat(path).mtime_nsec / 1e9 if is_remote(path) else os.path.getmtime(path)


def create_exclusively(path, data):
    """Writes the bytes `data` to `path` if nothing is there yet; raises `FileExistsError` otherwise.

    The content goes to a temporary name first (`staging_path`) and is then
    linked to `path` (locally: atomic, so of two processes creating the same
    path exactly one succeeds, and a reader never sees a half-written file) or
    renamed to it without overwriting (remotely); the temporary name is a
    leftover name of `train.workdir`, removed by the next run if this one dies. An object store (`gs://`)
    checks and copies in two requests, so two processes within the same
    moment can both succeed there: a caller that needs to know reads the file
    back.
    """
    # `staging_path`'s name with a random part: threads of one process share its pid.
    staged = os.path.join(os.path.dirname(absolute(path)),
                          f".tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}-{os.path.basename(path)}")
    try:
        with open_file(staged, "wb") as f:
            f.write(data)
            if not is_remote(staged):
                f.flush()
                os.fsync(f.fileno())
        if is_remote(path):
            _rename_without_overwrite(staged, path)
        else:
            try:
                os.link(staged, path)
            except FileExistsError:
                raise
            except OSError:
                # A file system without hard links: an exclusive create is as atomic,
                # but a reader may see the file before its content.
                descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                with os.fdopen(descriptor, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
    finally:
        if exists(staged):
            remove(staged)


def _rename_without_overwrite(source, target):
    import tensorflow as tf

    if gfile().exists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target)
    try:
        gfile().rename(source, target, overwrite=False)
    except tf.errors.AlreadyExistsError:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), target) from None


# The system's reasons for a failed write that only a write can have: a full disk, a
# quota, a read-only file system, a file over the size limit. Permission (EACCES,
# EPERM) and device (EIO) errors are left out: a failed read of the data or of a
# pretrained file has them too, and must not be re-labelled as a failed write.
WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)
# The libraries that write checkpoints and exports give the reason in their own words:
# h5py ("errno = 28"), TensorStore under Orbax ("[os_error_code='28']"), Python
# ("[Errno 28]"), TensorFlow (the reason's text alone). A stated code decides; the text
# is matched only for the reasons whose text appears in no other kind of error.
_ERRNO_PATTERNS = (re.compile(r"\berrno = (\d+)"), re.compile(r"os_error_code='?(\d+)"), re.compile(r"\[Errno (\d+)\]"))
_TEXT_MATCHED = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
# h5py's "name = '...'" (older HDF5: "filename = '...'"), TensorStore's and TensorFlow's quoted file.
_FILENAME_PATTERNS = (re.compile(r"\b(?:file)?name = '([^']+)'"),
                      re.compile(r'(?:writing|write|create)[^"\n]* file "([^"]+)"'),
                      # TensorFlow's file writers (TensorBoard's events, SavedModel): "<path>; <reason>".
                      re.compile(r"(\S+); (?:No space left on device|Read-only file system|Disk quota exceeded|"
                                 r"File too large)"))


# Permission errors are write failures only where the file is one the run writes: a
# workdir made read-only (chmod) under a running job gives EACCES or EPERM.
PERMISSION_FAILURES = (errno.EACCES, errno.EPERM)


def _stated_codes(error):
    if isinstance(error, OSError) and error.errno:
        return [error.errno]
    return [int(match.group(1)) for pattern in _ERRNO_PATTERNS for match in pattern.finditer(str(error))]


def _named_file(error, path):
    own = isinstance(error, OSError) and bool(error.errno)
    found = (pattern.search(str(error)) for pattern in _FILENAME_PATTERNS)
    return (error.filename if own else None) or next((match.group(1) for match in found if match), path)


def _is_under(filename, folder):
    if not filename or not folder:
        return False
    filename, folder = os.path.abspath(str(filename)), os.path.abspath(str(folder))
    return filename == folder or filename.startswith(folder.rstrip(os.sep) + os.sep)


def _write_failure_code(error, writes_under=None, path=None):
    """The code of the failed write that `error` reports, or None.

    `WRITE_FAILURES` by their code, or (no code stated) by the text of a full
    disk, a quota or a read-only file system; `PERMISSION_FAILURES` by their
    code only, and only for a file under `writes_under`.
    """
    stated = _stated_codes(error)
    code = next((code for code in stated if code in WRITE_FAILURES), None)
    if code is not None:
        return code
    permission = next((code for code in stated if code in PERMISSION_FAILURES), None)
    if permission is not None and _is_under(_named_file(error, path), writes_under):
        return permission
    if stated:
        return None
    return next((code for code in _TEXT_MATCHED if os.strerror(code) in str(error)), None)


def as_os_error(error, path=None, writes_under=None):
    """A library's report of a failed write as an `OSError(errno, reason, file)`; None if it is not one.

    The reasons of `WRITE_FAILURES` count, found by their code (the error's
    own `errno`, or one its message states) or, for a message that states
    none, by the system's text of a full disk, a quota or a read-only file
    system; a permission error (`PERMISSION_FAILURES`) counts only for a file
    under `writes_under`, so that a failed read elsewhere is never re-labelled.

    Args:
        error: the exception raised.
        path: str or None. What was being written, named when the error
            names no file itself.
        writes_under: str or None. The folder the run writes (its workdir).
    """
    code = _write_failure_code(error, writes_under, path)
    if code is None:
        return None
    own = isinstance(error, OSError) and bool(error.errno)
    if own and error.strerror == os.strerror(error.errno) and (error.filename or path is None):
        return error  # already says it plainly
    return OSError(code, os.strerror(code), _named_file(error, path))


@contextlib.contextmanager
def os_errors(path=None, writes_under=None):
    """Re-raises a failed write that a library reports in its own words as an `OSError` naming the file.

    A full or read-only disk then reads the same whoever wrote: the file, the
    system's reason (`"No space left on device"`), nothing else. Other
    errors pass unchanged.

    Args:
        path: str or None. What the block writes, named when the error names
            no file itself.
        writes_under: str or None. The folder the block writes: a permission
            error on a file there is a failed write too (`as_os_error`).
    """
    try:
        yield
    except Exception as error:  # noqa: BLE001 - h5py, TensorStore and TensorFlow raise their own types
        translated = as_os_error(error, path, writes_under)
        if translated is None or translated is error:
            raise
        raise translated from error

"""File operations of the workdir, on local paths and on TensorFlow's file systems (`gs://`, `ram://`, ...).

A local path keeps POSIX semantics: `os.replace` renames files and folders
atomically and `fsync` makes a write durable, which the checkpoints' crash
safety rests on. A path with a scheme (`gs://bucket/run` on a TPU, `ram://`
in tests) goes through `tf.io.gfile`. Object stores have no atomic rename of
a folder, so `move_folder` copies its files one by one with the file named
`last` copied last: a checkpoint's manifest, its commit point. A checkpoint
interrupted part way lacks it and is seen as damaged, never as complete.
"""

import os
import shutil


def is_remote(path):
    return "://" in str(path)


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def join(*parts):
    return os.path.join(*[str(p) for p in parts])


def absolute(path):
    """An absolute local path; a remote one as it is."""
    return str(path) if is_remote(path) else os.path.abspath(path)


def exists(path):
    return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def isdir(path):
    return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path):
    if is_remote(path):
        return _gfile().exists(path) and not _gfile().isdir(path)
    return os.path.isfile(path)


def listdir(path):
    # gfile lists sub-folders of some file systems with a trailing slash.
    return [name.rstrip("/") for name in _gfile().listdir(path)] if is_remote(path) else os.listdir(path)


def makedirs(path):
    _gfile().makedirs(path) if is_remote(path) else os.makedirs(path, exist_ok=True)


def getsize(path):
    return _gfile().stat(path).length if is_remote(path) else os.path.getsize(path)


def open_file(path, mode="r"):
    return _gfile().GFile(path, mode) if is_remote(path) else open(path, mode)


def remove(path):
    _gfile().remove(path) if is_remote(path) else os.remove(path)


def rmtree(path):
    """Removes a folder and what it holds; nothing if it does not exist."""
    if is_remote(path):
        if _gfile().exists(path):
            _gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def remove_any(path):
    rmtree(path) if isdir(path) else remove(path)


def replace_file(source, target):
    """Moves a file onto `target` (atomically on a local disk)."""
    if is_remote(source):
        _gfile().rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def move_folder(source, target, last=None):
    """Moves a folder to `target`, which must not exist.

    Locally one atomic rename. Remotely each file is copied and the source
    removed, the top-level file named `last` (the commit point) after all
    the others.
    """
    if not is_remote(source):
        os.replace(source, target)
        return
    gfile = _gfile()
    source = str(source).rstrip("/")
    for name in sorted(walk_files(source), key=lambda name: name == last):
        gfile.makedirs(os.path.dirname(join(target, name)))
        gfile.copy(join(source, name), join(target, name), overwrite=True)
    gfile.rmtree(source)


def sync(path):
    """Makes a local file's content durable (a remote write is durable once closed)."""
    if is_remote(path):
        return
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def walk_files(folder):
    """Every file under `folder`, as paths relative to it (sorted)."""
    folder = str(folder).rstrip("/")
    walk = _gfile().walk(folder) if is_remote(folder) else os.walk(folder)
    found = []
    for root, _, names in walk:
        relative = str(root).rstrip("/")[len(folder):].lstrip("/")
        found += [join(relative, name) if relative else name for name in names]
    return sorted(found)

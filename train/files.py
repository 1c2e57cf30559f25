"""File operations of the workdir, on local paths and on TensorFlow's file systems (`gs://`, `ram://`, ...).

The remote-path shim (`is_remote`, `gfile`), the atomic writes and the folder
moves with a commit point (`move_folder`'s `last`, a checkpoint's manifest)
are the library's, `keras_vit.files`: this module adds the listing, sizing and
syncing the checkpoints need, and is the trainer's one module of file
operations.
"""

import os

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

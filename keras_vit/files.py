"""Files on a local disk or on TensorFlow's file systems (`gs://`, `ram://`), written atomically.

A local path keeps POSIX semantics: `os.replace` renames a file or a folder
atomically and `fsync` makes a write durable, which the trainer's checkpoints
rest their crash safety on. A path with a scheme (`gs://bucket/run` on a TPU,
`ram://` in tests) goes through `tf.io.gfile`, imported only then, so reading
and writing local files never needs TensorFlow.

Every write of a whole file or folder goes to a temporary name beside its
target and is renamed onto it (`staged_file`, `staged_folder`): a reader sees
the old content or the new one, never a partial write, and a failed write
leaves the target as it was. Object stores have no atomic rename of a folder,
so `move_folder` copies its files one by one with the file named `last` (the
commit point: a checkpoint's manifest, a SavedModel's `saved_model.pb`) copied
last; a folder interrupted part way lacks it and is seen as incomplete.
"""

import contextlib
import hashlib
import os
import shutil


def is_remote(path):
    """Whether `path` has a scheme (`gs://`, `ram://`), so goes through `tf.io.gfile`."""
    return "://" in str(path)


def gfile():
    """TensorFlow's file API (`tf.io.gfile`), for the paths `is_remote` accepts."""
    import tensorflow as tf

    return tf.io.gfile


def absolute(path):
    """An absolute local path; a remote one as it is."""
    return str(path) if is_remote(path) else os.path.abspath(path)


def exists(path):
    return gfile().exists(path) if is_remote(path) else os.path.exists(path)


def open_file(path, mode="r"):
    return gfile().GFile(path, mode) if is_remote(path) else open(path, mode)


def remove(path):
    gfile().remove(path) if is_remote(path) else os.remove(path)


def rmtree(path):
    """Removes a folder and what it holds; nothing if it does not exist."""
    if is_remote(path):
        if gfile().exists(path):
            gfile().rmtree(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def walk_files(folder):
    """Every file under `folder`, as paths relative to it (sorted)."""
    folder = str(folder).rstrip("/")
    walk = gfile().walk(folder) if is_remote(folder) else os.walk(folder)
    found = []
    for root, _, names in walk:
        relative = str(root).rstrip("/")[len(folder):].lstrip("/")
        found += [os.path.join(relative, name) if relative else name for name in names]
    return sorted(found)


def replace_file(source, target):
    """Moves a file onto `target` (atomically on a local disk)."""
    if is_remote(source):
        gfile().rename(source, target, overwrite=True)
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
    source = str(source).rstrip("/")
    for name in sorted(walk_files(source), key=lambda name: name == last):
        gfile().makedirs(os.path.dirname(os.path.join(str(target), name)))
        gfile().copy(os.path.join(source, name), os.path.join(str(target), name), overwrite=True)
    gfile().rmtree(source)


def replace_folder(staged, path, last=None):
    """Moves the folder `staged` onto `path`, replacing the folder there if there is one.

    The old folder is moved aside to `<path>.old-<pid>` first and removed once
    the new one is in place; if moving the new one in fails, the old one goes
    back. Between the two moves `path` does not exist.

    Args:
        staged: str. The complete new folder.
        path: str. Where it goes.
        last: str or None. Its top-level file to move last (see `move_folder`).
    """
    old = f"{path}.old-{os.getpid()}"
    replacing = exists(path)
    if replacing:
        move_folder(path, old)
    try:
        move_folder(staged, path, last=last)
    except BaseException:
        if replacing:
            rmtree(path)  # a remote move may have copied part of the files
            move_folder(old, path)
        raise
    rmtree(old)


def staging_path(path):
    """The temporary name `.tmp-<pid>-<name>` beside `path`, to write it under before the rename.

    It keeps `path`'s ending, which some writers require (Keras saves only to a
    `.keras` name).
    """
    return os.path.join(os.path.dirname(absolute(path)), f".tmp-{os.getpid()}-{os.path.basename(path)}")


@contextlib.contextmanager
def staged_file(path):
    """Yields a temporary file name to write; renames it onto `path` when the block ends.

    An exception in the block (a full disk) removes the temporary file and
    leaves `path` as it was.

    Args:
        path: str. The file to write; the temporary name is `staging_path(path)`.
    """
    staged = staging_path(path)
    try:
        yield staged
        replace_file(staged, path)
    except BaseException:
        if exists(staged):
            remove(staged)
        raise


@contextlib.contextmanager
def staged_folder(path, last=None):
    """Yields a temporary folder name to write; moves it onto `path` (`replace_folder`) when the block ends.

    An exception in the block removes the temporary folder and leaves `path`
    as it was.

    Args:
        path: str. The folder to write.
        last: str or None. The commit point, moved last (see `move_folder`).
    """
    staged = staging_path(path)
    rmtree(staged)  # a killed process's leftover of the same pid
    try:
        yield staged
        replace_folder(staged, path, last=last)
    finally:
        rmtree(staged)


def write_atomically(path, data):
    """Writes `data` (str or bytes) to a temporary file beside `path`, syncs it and renames it onto `path`.

    A reader sees the old file or the new one, never a partial write; a failed
    write (a full disk) removes its temporary file. Paths with a scheme
    (`gs://...`) go through `tf.io.gfile`, where the rename is the store's.
    """
    mode = "wb" if isinstance(data, bytes) else "w"
    with staged_file(path) as staged:
        with open_file(staged, mode) as f:
            f.write(data)
            if not is_remote(staged):
                # Durable before the rename, so a crash never leaves `path` empty.
                f.flush()
                os.fsync(f.fileno())


def write_text_atomically(path, text):
    """`write_atomically` for text (the name the trainer and the weights code use)."""
    write_atomically(path, text)


def file_sha256(path):
    """The sha256 of a file's bytes, as a hex string, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open_file(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

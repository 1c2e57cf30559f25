"""keras_vit.files: atomic writes of files and folders, on a local disk and on `ram://` (as on `gs://`)."""

import hashlib
import os
import pathlib
import uuid

import pytest

from keras_vit import files


def test_write_atomically_text_and_bytes(tmp_path):
    path = tmp_path / "file"
    files.write_atomically(str(path), b"\x00\x01binary")
    assert path.read_bytes() == b"\x00\x01binary"
    files.write_text_atomically(str(path), "text")
    assert path.read_text() == "text" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_write_atomically_failure_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "file"
    path.write_text("old")
    with pytest.raises(TypeError):
        files.write_atomically(str(path), 3)  # neither str nor bytes: the write fails
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_file_sha256_is_the_digest_of_the_bytes(tmp_path):
    data = os.urandom(3 << 20)  # more than one 1 MiB chunk
    (tmp_path / "file").write_bytes(data)
    assert files.file_sha256(str(tmp_path / "file")) == hashlib.sha256(data).hexdigest()


def _folder(path, content):
    os.makedirs(path)
    (path / "data").write_text(content)


def test_staged_folder_replaces_the_folder_and_leaves_nothing_else(tmp_path):
    _folder(tmp_path / "out", "old")
    with files.staged_folder(str(tmp_path / "out")) as staged:
        assert os.path.dirname(staged) == str(tmp_path) and os.path.basename(staged).startswith(".tmp-")
        _folder(pathlib.Path(staged), "new")
    assert os.listdir(tmp_path) == ["out"] and (tmp_path / "out" / "data").read_text() == "new"


def test_a_failed_folder_write_or_move_leaves_the_old_folder(tmp_path, monkeypatch):
    _folder(tmp_path / "out", "old")
    with pytest.raises(RuntimeError, match="failed write"):
        with files.staged_folder(str(tmp_path / "out")) as staged:
            _folder(pathlib.Path(staged), "new")
            raise RuntimeError("failed write")
    assert os.listdir(tmp_path) == ["out"] and (tmp_path / "out" / "data").read_text() == "old"

    # The old folder is moved aside first; when the new one then fails to move in, it goes back.
    replace = os.replace

    def fail_moving_in(source, target):
        if os.path.basename(source).startswith(".tmp-"):
            raise OSError("disk full")
        replace(source, target)

    monkeypatch.setattr(os, "replace", fail_moving_in)
    with pytest.raises(OSError, match="disk full"):
        with files.staged_folder(str(tmp_path / "out")) as staged:
            _folder(pathlib.Path(staged), "new")
    assert os.listdir(tmp_path) == ["out"] and (tmp_path / "out" / "data").read_text() == "old"


def test_remote_paths_go_through_gfile_with_the_commit_point_copied_last(monkeypatch):
    tf = pytest.importorskip("tensorflow")
    root = f"ram://keras_vit_test_files/{uuid.uuid4().hex}"
    files.write_atomically(f"{root}/file", b"remote")
    assert tf.io.gfile.listdir(root) == ["file"]
    assert files.file_sha256(f"{root}/file") == hashlib.sha256(b"remote").hexdigest()

    copied = []
    copy = tf.io.gfile.copy

    def record(source, target, overwrite=False):
        copied.append(os.path.basename(target))
        copy(source, target, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "copy", record)
    # One generation: TensorFlow's ram:// fails to remove a folder beside another whose name
    # starts with it (`out` beside `out.old-<pid>`), which replacing a folder there would need.
    with files.staged_folder(f"{root}/out", last="a_manifest") as staged:
        tf.io.gfile.makedirs(staged)
        for name in ("a_manifest", "b", "c"):
            files.write_text_atomically(f"{staged}/{name}", "new")
    assert copied == ["b", "c", "a_manifest"]
    assert sorted(name.rstrip("/") for name in tf.io.gfile.listdir(root)) == ["file", "out"]
    with files.open_file(f"{root}/out/a_manifest") as f:
        assert f.read() == "new"
    files.rmtree(root)

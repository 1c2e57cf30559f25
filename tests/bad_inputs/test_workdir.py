"""Faults in the workdir: damaged checkpoints, leftovers, strays, bad pointers, another run, no space.

A crash at any moment must never cost a checkpoint, and a user should learn
what is wrong from one line.
"""

import errno
import json
import os
import shutil
import signal
import subprocess

import keras
import numpy as np
import pytest
from absl import flags

from tests.train.helpers import JIT_COMPILE, JIT_FLAG, TINY_MODEL, make_idx_dataset
from train import files
from train import main as cli
from train.checkpoints import CheckpointManager, verify_checkpoint
from train.configs import TrainConfig
from train.trainer import train


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=96, test=16)


def tiny_config(idx_dir, **overrides):
    # 3 steps an epoch: a checkpoint at steps 3, 6, 9 (two kept).
    return TrainConfig(**{
        "model_kwargs": json.loads(TINY_MODEL), "dataset": "fashion_mnist", "data_dir": idx_dir,
        "image_size": 16, "batch_size": 32, "epochs": 3, "warmup_steps": 2, "jit_compile": JIT_COMPILE,
        "augmentation": "flip", **overrides,
    })


def final_weights(workdir):
    model = keras.models.load_model(str(workdir / "model.keras"))
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


def checkpoint_names(workdir):
    return sorted(os.listdir(workdir / "checkpoints"))


def data_files(checkpoint):
    """A checkpoint's data files, largest first, relative to it: the TensorFlow backend's two
    (Keras weights, optimizer arrays) or, on JAX, the files of Orbax's `state/` folder."""
    names = [os.path.relpath(os.path.join(root, name), checkpoint)
             for root, _, found in os.walk(checkpoint) for name in found if name != "manifest.json"]
    return sorted(names, key=lambda name: -os.path.getsize(checkpoint / name))


def test_damaged_latest_checkpoint_falls_back_to_the_older_one_and_resumes_exactly(tmp_path, idx_dir, capsys):
    workdir = tmp_path / "run"
    config = tiny_config(idx_dir)
    train(config, str(workdir), verbose=0)
    assert checkpoint_names(workdir) == ["ckpt-6", "ckpt-9", "latest"]
    reference = final_weights(workdir)
    # Truncate the newest checkpoint's largest file, as a crash of the disk or a copy would.
    name = data_files(workdir / "checkpoints" / "ckpt-9")[0]
    damaged_file = workdir / "checkpoints" / "ckpt-9" / name
    assert damaged_file.stat().st_size > 1000
    damaged_file.write_bytes(damaged_file.read_bytes()[:1000])
    capsys.readouterr()

    summary = train(config, str(workdir), verbose=0)
    err = capsys.readouterr().err
    assert f"checkpoint 'ckpt-9' is damaged ({name} has 1000 bytes" in err
    assert "moved to 'damaged-ckpt-9'" in err
    assert "Resuming from the newest intact checkpoint, 'ckpt-6'" in err
    assert summary["resumed_from"] == "ckpt-6" and summary["resumed_from_step"] == 6 and summary["step"] == 9
    # The damaged one is kept aside, the older one was never deleted, and the
    # epoch trained again ends where the first run ended.
    assert checkpoint_names(workdir) == ["ckpt-6", "ckpt-9", "damaged-ckpt-9", "latest"]
    verify_checkpoint(str(workdir / "checkpoints" / "ckpt-9"))
    for a, b in zip(reference, final_weights(workdir)):
        np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize("damage", ["flipped byte", "emptied file", "no manifest", "garbage manifest"])
def test_every_kind_of_damage_is_detected(tmp_path, idx_dir, damage):
    workdir = tmp_path / "run"
    train(tiny_config(idx_dir, epochs=1), str(workdir), verbose=0)
    checkpoint = workdir / "checkpoints" / "ckpt-3"
    largest, second = data_files(checkpoint)[:2]
    if damage == "flipped byte":
        data = bytearray((checkpoint / largest).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (checkpoint / largest).write_bytes(bytes(data))
    elif damage == "emptied file":
        (checkpoint / second).write_bytes(b"")
    elif damage == "no manifest":
        (checkpoint / "manifest.json").unlink()
    else:
        (checkpoint / "manifest.json").write_text("[1, 2")
    messages = []
    manager = CheckpointManager(str(workdir / "checkpoints"), log=messages.append)
    model = keras.models.load_model(str(workdir / "model.keras"))
    assert manager.restore(model) == 0  # nothing intact: a fresh start, not a crash
    assert "is damaged" in messages[0] and (workdir / "checkpoints" / "damaged-ckpt-3").is_dir()


def test_leftovers_of_a_killed_save_are_removed_and_strays_are_left_alone(tmp_path, idx_dir):
    workdir = tmp_path / "run"
    checkpoints = workdir / "checkpoints"
    (checkpoints / ".ckpt-3.tmp-99999").mkdir(parents=True)
    (checkpoints / ".ckpt-3.tmp-99999" / "model.weights.h5").write_bytes(b"half")
    (checkpoints / "latest.tmp-4242").write_text("ckpt-")
    (workdir / ".tmp-4242-model.keras").write_bytes(b"half a model")
    (workdir / "config.json.tmp-4242").write_text("{")
    (workdir / "saved_model.old-4242").mkdir()
    # Strays: folders and files whose names are not checkpoints, and one that looks like one.
    (checkpoints / "notes").mkdir()
    (checkpoints / "ckpt-final").mkdir()
    (checkpoints / "ckpt-3-backup").mkdir()
    (checkpoints / "ckpt-7").write_text("a file, not a folder")
    summary = train(tiny_config(idx_dir, epochs=2), str(workdir), verbose=0)
    assert summary["step"] == 6 and summary["resumed_from_step"] == 0
    names = set(checkpoint_names(workdir))
    assert {"ckpt-3", "ckpt-6", "latest", "notes", "ckpt-final", "ckpt-3-backup", "ckpt-7"} == names
    assert not [name for name in os.listdir(workdir) if ".tmp-" in name or ".old-" in name]


@pytest.mark.parametrize("pointer", ["../../../etc", "/etc/passwd", "ckpt-3/../../x", ""])
def test_latest_pointer_cannot_lead_out_of_the_folder(tmp_path, pointer):
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "latest").write_text(pointer)
    messages = []
    assert CheckpointManager(str(checkpoints), log=messages.append).latest() is None
    assert "not a checkpoint of this folder" in messages[0]


def test_another_runs_workdir_is_refused_before_anything_is_written(tmp_path, idx_dir, capsys):
    workdir = tmp_path / "run"
    train(tiny_config(idx_dir, epochs=1), str(workdir), verbose=0)
    before = {name: os.path.getmtime(workdir / name) for name in os.listdir(workdir)}
    stored = (workdir / "config.json").read_text()
    with pytest.raises(ValueError, match=r"holds a run of another configuration \(learning_rate: 0\.001 in the "
                                         r"workdir, 0\.003 now\)\. Resume it with the same flags"):
        train(tiny_config(idx_dir, epochs=1, learning_rate=3e-3), str(workdir), verbose=0)
    assert (workdir / "config.json").read_text() == stored
    assert {name: os.path.getmtime(workdir / name) for name in os.listdir(workdir)} == before
    # Settings that do not change what is computed may differ on resume.
    summary = train(tiny_config(idx_dir, epochs=1, checkpoint_every_steps=1, steps_per_execution=2),
                    str(workdir), verbose=0)
    assert summary["resumed_from_step"] == 3


def run_cli(argv, capsys):
    flags.FLAGS.unparse_flags()
    try:
        cli.parse_flags(["main.py", *argv])
        status = cli.main([])
    finally:
        flags.FLAGS.unparse_flags()
    return status, capsys.readouterr().err


def cli_flags(workdir, idx_dir, epochs=1):
    return [f"--workdir={workdir}", "--config=fashion_mnist_vit", "--dataset=fashion_mnist", f"--data_dir={idx_dir}", "--image_size=16",
            "--batch_size=32", f"--model_kwargs={TINY_MODEL}", f"--epochs={epochs}", JIT_FLAG]


def test_workdir_that_is_a_file_or_under_a_file_is_one_line(tmp_path, idx_dir, capsys):
    (tmp_path / "file").write_text("x")
    status, err = run_cli(cli_flags(tmp_path / "file", idx_dir), capsys)
    assert status == 2 and err.strip() == f"error: --workdir must be a directory. Received: workdir='{tmp_path / 'file'}' (a file)"
    status, err = run_cli(cli_flags(tmp_path / "file" / "run", idx_dir), capsys)
    assert status == 1 and "Traceback" not in err
    assert err.strip().startswith("error: cannot read or write") and "Not a directory" in err


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only file system")])
def test_full_or_read_only_workdir_is_one_line_and_keeps_the_last_checkpoint(tmp_path, idx_dir, capsys, monkeypatch,
                                                                               code, reason):
    workdir = tmp_path / "run"
    assert run_cli(cli_flags(workdir, idx_dir, epochs=2), capsys)[0] == 0
    # As if the run had died after its first checkpoint; on resuming, the disk
    # fills up (or turns read-only) while the next checkpoint is written.
    import train.checkpoints as checkpoints

    shutil.rmtree(workdir / "checkpoints" / "ckpt-6")

    def failing_write(path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    if keras.backend.backend() == "jax":
        import orbax.checkpoint as ocp

        # Orbax writes the arrays on JAX; its save fails as the disk does.
        monkeypatch.setattr(ocp.StandardCheckpointer, "save", lambda self, path, *a, **k: failing_write(path))
    else:
        monkeypatch.setattr(checkpoints.np, "savez", failing_write)
    status, err = run_cli(cli_flags(workdir, idx_dir, epochs=2), capsys)
    lines = err.strip().splitlines()
    assert status == 1 and "Traceback" not in err
    assert lines[-1].startswith("error: cannot read or write") and reason in lines[-1]
    assert f"in --workdir '{workdir}'" in lines[-1]
    monkeypatch.undo()
    verify_checkpoint(str(workdir / "checkpoints" / "ckpt-3"))  # the last good one is intact
    assert not [name for name in os.listdir(workdir / "checkpoints") if ".tmp-" in name]


@pytest.fixture
def small_file_system(tmp_path):
    """A 32 MiB tmpfs of its own at `tmp_path / "fs"`, unmounted at the end (the tests run as root, as CI does)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)], check=True, capture_output=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False, capture_output=True)


def test_a_really_full_file_system_stops_the_run_keeps_the_last_checkpoint_and_resumes(small_file_system, idx_dir,
                                                                                        capsys):
    # The test above makes one library call fail; here the file system itself fills up, under
    # Orbax and TensorStore on JAX, NumPy and h5py on TensorFlow, and the TensorBoard writer.
    workdir = small_file_system / "run"
    assert run_cli(cli_flags(workdir, idx_dir, epochs=2), capsys)[0] == 0
    shutil.rmtree(workdir / "checkpoints" / "ckpt-6")  # as if the run had died after its first checkpoint
    stat = os.statvfs(small_file_system)
    filler = small_file_system / "filler"
    with open(filler, "wb") as f:  # all but 8 KiB: less than any checkpoint
        f.write(b"\0" * (stat.f_bavail * stat.f_frsize - 8192))
    status, err = run_cli(cli_flags(workdir, idx_dir, epochs=2), capsys)
    lines = err.strip().splitlines()
    assert status == 1 and "Traceback" not in err, err[-3000:]
    # The file that could not be written is named, whichever writer found the disk full.
    assert lines[-1].startswith(f"error: cannot read or write '{workdir}/") and lines[-1].endswith(
        f"No space left on device (in --workdir '{workdir}': is it read-only or full?)"), lines[-1]
    verify_checkpoint(str(workdir / "checkpoints" / "ckpt-3"))  # the last good one is intact
    assert not [name for name in os.listdir(workdir / "checkpoints") if ".tmp-" in name]
    # Room again: the same command resumes from it and finishes.
    filler.unlink()
    assert run_cli(cli_flags(workdir, idx_dir, epochs=2), capsys)[0] == 0
    summary = json.loads((workdir / "summary.json").read_text())
    assert (summary["resumed_from_step"], summary["step"]) == (3, 6)


@pytest.mark.parametrize("error, code, filename", [
    # h5py, TensorStore (Orbax), Python and TensorFlow words for a full disk, a quota, a read-only one.
    (OSError(errno.ENOSPC, "Unable to synchronously create file (unable to open file: name = "
             "'/w/ckpt/model.weights.h5', errno = 28, error message = 'No space left on device', flags = 13)"),
     errno.ENOSPC, "/w/ckpt/model.weights.h5"),
    (ValueError("Error writing local file \"/w/ckpt/state/d/0\": [OS error: os_error_code=122 Disk quota "
                "exceeded]"), errno.EDQUOT, "/w/ckpt/state/d/0"),
    (RuntimeError("[Errno 27] File too large"), errno.EFBIG, "/w/given"),
    (RuntimeError("/w/saved_model/variables; Read-only file system"), errno.EROFS, "/w/saved_model/variables"),
    (RuntimeError("{{function_node __wrapped__CreateSummaryFileWriter}} /w/logs/events.out.v2; No space left on "
                  "device\n\tFailed to flush 1 events"), errno.ENOSPC, "/w/logs/events.out.v2"),
    (OSError(errno.ENOSPC, "write failed", "/w/summary.json"), errno.ENOSPC, "/w/summary.json"),
])
def test_a_failed_write_in_a_librarys_words_becomes_one_os_error(error, code, filename):
    translated = files.as_os_error(error, "/w/given")
    assert (translated.errno, translated.strerror, translated.filename) == (code, os.strerror(code), filename)
    with pytest.raises(OSError) as raised, files.os_errors("/w/given"):
        raise error
    assert (raised.value.errno, raised.value.filename) == (code, filename)


@pytest.mark.parametrize("error", [
    # Reads (of the data, of a pretrained file) fail with these too: they are not failed writes.
    RuntimeError("Failed to read /data/train-images-idx3-ubyte: Permission denied"),
    OSError(errno.EACCES, "Permission denied", "/data/train-images-idx3-ubyte"),
    ValueError("Error reading local file \"/data/x.tfrecord\": [OS error: os_error_code=5 Input/output error]"),
    RuntimeError("Unable to open file (unable to open file: name = '/p/vit.h5', errno = 1, error message = "
                 "'Operation not permitted')"),
    # A stated code decides over words elsewhere in the message.
    RuntimeError("[Errno 13] Permission denied: '/data/no space left on device.txt'"),
    OSError(errno.EIO, "short read", "/data/x"),
])
def test_other_errors_pass_unchanged(error):
    assert files.as_os_error(error, "/w/given") is None
    with pytest.raises(type(error)) as raised, files.os_errors("/w/given"):
        raise error
    assert raised.value is error


@pytest.mark.parametrize("error, filename", [
    # A workdir made read-only (chmod) under the run: h5py's, TensorStore's and Python's words.
    (RuntimeError("Unable to create file (unable to open file: name = '/w/ckpt/model.weights.h5', errno = 13, "
                  "error message = 'Permission denied', flags = 13)"), "/w/ckpt/model.weights.h5"),
    (ValueError("Error writing local file \"/w/ckpt/state/d/0\": [OS error: os_error_code=1 Operation not "
                "permitted]"), "/w/ckpt/state/d/0"),
    (OSError(errno.EACCES, "Permission denied", "/w/summary.json"), "/w/summary.json"),
])
def test_a_permission_error_is_a_failed_write_only_under_the_workdir(error, filename):
    translated = files.as_os_error(error, writes_under="/w")
    assert translated.filename == filename and translated.errno in files.PERMISSION_FAILURES
    assert files.as_os_error(error, writes_under="/elsewhere") is None
    assert files.as_os_error(error) is None  # no workdir given: never
    with pytest.raises(OSError) as raised, files.os_errors(writes_under="/w"):
        raise error
    assert raised.value.filename == filename
    # A sibling folder that only shares the prefix is not under the workdir.
    assert files.as_os_error(OSError(errno.EACCES, "Permission denied", "/w2/x"), writes_under="/w") is None


def test_sigterm_handler_is_restored_when_training_ends(tmp_path, idx_dir):
    def previous(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, previous)
    try:
        train(tiny_config(idx_dir, epochs=1), str(tmp_path / "run"), verbose=0)
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        signal.signal(signal.SIGTERM, old)


def _tree(workdir):
    """Every file under `workdir`: its bytes and modification time."""
    return {
        os.path.relpath(os.path.join(root, name), workdir): (
            open(os.path.join(root, name), "rb").read(), os.stat(os.path.join(root, name)).st_mtime_ns)
        for root, _, names in os.walk(workdir) for name in names
    }


def test_a_refused_resume_leaves_the_workdir_byte_for_byte(tmp_path, idx_dir):
    """Whatever refuses a run (flags, model, teacher, analyses) does so before the first write."""
    workdir = tmp_path / "run"
    train(tiny_config(idx_dir, epochs=1), str(workdir), verbose=0)
    before = _tree(workdir)
    corrupt = tmp_path / "teacher.keras"
    corrupt.write_bytes(b"not a zip file")
    refusals = [
        (dict(log_analysis="gates"), r"gates"),  # a plain ViT has no GPSA gates: known only once it is built
        (dict(teacher=str(corrupt), distillation="hard"), r"teacher"),
        (dict(pretrained=str(corrupt)), r"pretrained|teacher\.keras|not a"),
    ]
    for overrides, message in refusals:
        with pytest.raises((ValueError, OSError), match=message):
            train(tiny_config(idx_dir, epochs=1, **overrides), str(workdir), verbose=0)
        assert _tree(workdir) == before, overrides


def test_a_workdir_written_before_a_setting_existed_resumes_at_its_default():
    from train.configs import get_config
    from train.workdir import config_dict, differences

    config = get_config("fashion_mnist_vit")
    stored = config_dict(config)
    del stored["objective"], stored["mpp_target"]  # a config.json from before these flags
    assert differences(stored, config) == []
    config.objective = "masked_patch_prediction"
    assert differences(stored, config) == [("objective", "classification", "masked_patch_prediction")]

"""Two runs on one workdir: the second is refused while the first lives; a killed run's lock does not block.

The lock is `<workdir>/lock.json` (`train.workdir.WorkdirLock`). The unit tests
below put a lock in place as another process would have written it (a live
`sleep`, a killed one, another host) and check what a new run does; the
end-to-end test runs three real trainers (`python train/main.py`) on one
workdir: a live one, a second one refused, and after `kill -9` a third that
takes the lock over and finishes.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.train.helpers import (
    BACKEND,
    JIT_COMPILE,
    ROOT,
    TINY_MODEL,
    main_command,
    make_idx_dataset,
    run_main,
    tiny_flags,
)
from train import files
from train import workdir as workdir_lib
from train.checkpoints import PreemptionCheckpoint
from train.configs import TrainConfig
from train.trainer import train
from train.workdir import (
    LOCK_FILE,
    STALE_AFTER_SECONDS,
    WorkdirLock,
    WorkdirLockedError,
    WorkdirLockLostError,
)


@pytest.fixture
def sleeper():
    """A live process of this host that holds no lock of its own; killed and collected at the end."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def put_lock(workdir, pid, host=None, age=0, **fields):
    """Writes a lock as the process `pid` of `host` (this one if None) would have, `age` seconds ago."""
    state = workdir_lib._process_state(pid)
    holder = {"host": host or socket.gethostname(), "pid": pid, "started": "2026-01-02T03:04:05+00:00",
              "process_start": state[1] if state else None, "boot_id": workdir_lib._boot_id(),
              "token": "f" * 32, **fields}
    path = os.path.join(workdir, LOCK_FILE)
    # Renamed into place: a holder's heartbeat reading it meanwhile never sees half a lock.
    with open(f"{path}.tmp-0", "w") as f:
        json.dump(holder, f)
    os.replace(f"{path}.tmp-0", path)
    if age:
        os.utime(path, (time.time() - age, time.time() - age))
    return path


def take_over(workdir, **fields):
    """Puts another host's lock in place of this process's held one, as a run taking it over would.

    The holder's heartbeat may have read its own lock just before and write it
    back over this one (the last writer wins); once it has read the other lock
    it never writes again, so the other lock is put back until it stays.
    """
    path = os.path.join(workdir, LOCK_FILE)
    for _ in range(20):
        put_lock(workdir, 4242, host="tpu-vm-7", **fields)
        time.sleep(5 * workdir_lib.HEARTBEAT_SECONDS)
        with open(path) as f:
            if json.load(f)["host"] == "tpu-vm-7":
                return
    raise AssertionError("the holder's heartbeat kept overwriting the other lock")


def tree(folder):
    return {name: (Path(folder) / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_the_lock_names_its_holder_and_is_removed_on_release(tmp_path):
    lock = WorkdirLock(str(tmp_path)).acquire()
    holder = json.loads((tmp_path / LOCK_FILE).read_text())
    assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
    assert {"started", "token", "command", "heartbeat"} <= set(holder)
    assert os.listdir(tmp_path) == [LOCK_FILE]  # written under a temporary name, which is gone
    lock.release()
    assert os.listdir(tmp_path) == []


def test_a_live_holder_of_this_host_is_refused_even_with_break_lock(tmp_path, sleeper):
    path = put_lock(tmp_path, sleeper.pid)
    before = tree(tmp_path)
    for break_lock in (False, True):
        with pytest.raises(WorkdirLockedError, match=(
                rf"--workdir '{tmp_path}' is in use by another run \(pid {sleeper.pid} on host "
                rf"'{socket.gethostname()}', started 2026-01-02T03:04:05\+00:00; lock file '{path}'\)\. Wait for "
                rf"it to end or stop it \(kill {sleeper.pid}\)")):
            WorkdirLock(str(tmp_path), break_lock=break_lock).acquire()
        assert tree(tmp_path) == before


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path, sleeper):
    put_lock(tmp_path, sleeper.pid)
    sleeper.send_signal(signal.SIGKILL)
    sleeper.wait()
    messages = []
    lock = WorkdirLock(str(tmp_path), log=messages.append).acquire()
    assert f"taking over the lock of --workdir '{tmp_path}' from pid {sleeper.pid}" in messages[0]
    assert f"process {sleeper.pid} is gone" in messages[0]
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert os.listdir(tmp_path) == [LOCK_FILE]  # the stale lock, moved aside, is gone too
    lock.release()


def test_a_pid_given_to_another_process_is_not_a_live_holder(tmp_path, sleeper):
    if workdir_lib._process_state(sleeper.pid) is None:
        pytest.skip("no /proc: a process's start time is unknown here")
    # As after a container restart: the same host name and pid, another process.
    put_lock(tmp_path, sleeper.pid, process_start=workdir_lib._process_state(sleeper.pid)[1] - 100)
    messages = []
    WorkdirLock(str(tmp_path), log=messages.append).acquire().release()
    assert f"process {sleeper.pid} is gone" in messages[0]


def test_another_hosts_lock_is_refused_until_stale_or_broken(tmp_path):
    path = put_lock(tmp_path, 4242, host="tpu-vm-7", age=60)
    with pytest.raises(WorkdirLockedError, match=(
            rf"in use by another run \(pid 4242 on host 'tpu-vm-7', .*last refreshed 6\d s ago\. This machine cannot "
            rf"tell whether that run is still alive; .*pass --break_workdir_lock or delete '{path}'")):
        WorkdirLock(str(tmp_path)).acquire()
    messages = []
    WorkdirLock(str(tmp_path), break_lock=True, log=messages.append).acquire().release()
    assert "from pid 4242 on host 'tpu-vm-7'" in messages[0] and "--break_workdir_lock" in messages[0]

    put_lock(tmp_path, 4242, host="tpu-vm-7", age=STALE_AFTER_SECONDS + 60)
    messages = []
    WorkdirLock(str(tmp_path), log=messages.append).acquire().release()
    assert "not refreshed for 16 min" in messages[0]


def test_another_boot_under_this_host_name_is_treated_as_another_host(tmp_path, sleeper):
    # A restarted machine, or a clone with the same host name sharing the workdir: its
    # run may be live (the pid here is, and means nothing across machines), so the
    # rule for other hosts applies.
    put_lock(tmp_path, sleeper.pid, age=60, boot_id="another-boot")
    with pytest.raises(WorkdirLockedError, match=r"This machine cannot tell whether that run is still alive"):
        WorkdirLock(str(tmp_path)).acquire()
    put_lock(tmp_path, sleeper.pid, age=STALE_AFTER_SECONDS + 60, boot_id="another-boot")
    messages = []
    WorkdirLock(str(tmp_path), log=messages.append).acquire().release()
    assert "not refreshed for 16 min" in messages[0]


def test_an_unreadable_lock_is_refused_until_stale(tmp_path):
    path = tmp_path / LOCK_FILE
    path.write_text("{half a lock")
    with pytest.raises(WorkdirLockedError, match=r"in use by another run \(an unreadable lock; .*\d s old"):
        WorkdirLock(str(tmp_path)).acquire()
    os.utime(path, (time.time() - STALE_AFTER_SECONDS - 1,) * 2)
    messages = []
    WorkdirLock(str(tmp_path), log=messages.append).acquire().release()
    assert "from an unreadable lock: unreadable and" in messages[0]


def test_release_leaves_a_lock_that_another_run_took_over(tmp_path):
    lock = WorkdirLock(str(tmp_path)).acquire()
    put_lock(tmp_path, 4242, host="tpu-vm-7")
    lock.release()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == "tpu-vm-7"


def test_the_holder_refreshes_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
    lock = WorkdirLock(str(tmp_path)).acquire()
    path = tmp_path / LOCK_FILE
    os.utime(path, (time.time() - 600,) * 2)
    deadline = time.time() + 10
    while time.time() - os.path.getmtime(path) > 60 and time.time() < deadline:
        time.sleep(0.05)
    assert time.time() - os.path.getmtime(path) < 60
    assert json.loads(path.read_text())["token"] == lock.holder["token"]
    lock.release()
    assert not path.exists()


def test_a_lock_taken_over_while_held_is_found_lost_by_the_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
    messages = []
    lock = WorkdirLock(str(tmp_path), log=messages.append).acquire()
    lock.check_held()  # still this run's
    assert not lock.lost.is_set()
    # Another host's run took the workdir over (it found this one stale, or was told to break the lock).
    take_over(tmp_path, command="python train/main.py --workdir=gs://b/run")
    assert lock.lost.wait(10)
    expected = (rf"--workdir '{tmp_path}' was taken over by another run \(pid 4242 on host 'tpu-vm-7', started "
                rf"2026-01-02T03:04:05\+00:00, command 'python train/main.py --workdir=gs://b/run'; lock file "
                rf"'{tmp_path / LOCK_FILE}'\)\. This run stopped without writing anything more there, so as not "
                rf"to corrupt that run's checkpoints\.")
    with pytest.raises(WorkdirLockLostError, match=expected):
        lock.check_held()
    assert "was taken over by another run (pid 4242 on host 'tpu-vm-7'" in messages[0]
    # The heartbeat wrote nothing over the other run's lock, and release leaves it.
    assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == "tpu-vm-7"
    lock.release()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == "tpu-vm-7"


def test_check_held_reads_the_lock_without_waiting_for_the_heartbeat(tmp_path):
    lock = WorkdirLock(str(tmp_path)).acquire()  # the heartbeat is a minute away
    try:
        put_lock(tmp_path, 4242, host="tpu-vm-7")
        with pytest.raises(WorkdirLockLostError, match=r"taken over by another run \(pid 4242 on host 'tpu-vm-7'"):
            lock.check_held()
        assert lock.lost.is_set()
    finally:
        lock.release()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == "tpu-vm-7"


def test_a_removed_lock_is_found_lost_by_the_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
    lock = WorkdirLock(str(tmp_path), log=lambda message: None).acquire()
    try:
        # As a user told to delete it to start another run. A heartbeat caught between its
        # read and its rewrite puts it back once; the next one finds it gone.
        for _ in range(20):
            if (tmp_path / LOCK_FILE).exists():
                os.remove(tmp_path / LOCK_FILE)
            if lock.lost.wait(0.25):
                break
        with pytest.raises(WorkdirLockLostError, match=r"taken over by another run \(its lock file was removed; "):
            lock.check_held()
    finally:
        lock.release()
    assert os.listdir(tmp_path) == []


def test_a_failed_read_of_the_lock_is_not_a_lost_lock(tmp_path, monkeypatch):
    # An NFS hiccup (EIO, ESTALE) while the heartbeat reads its own lock: a warning, not a stop.
    import errno

    monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
    messages = []
    lock = WorkdirLock(str(tmp_path), log=messages.append).acquire()
    original = workdir_lib.files.open_file

    def flaky(path, *args, **kwargs):
        if path == lock.path:
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        return original(path, *args, **kwargs)

    try:
        monkeypatch.setattr(workdir_lib.files, "open_file", flaky)
        for _ in range(100):
            if messages:
                break
            time.sleep(0.05)
        assert messages and "could not refresh the lock" in messages[0]
        assert not lock.lost.is_set()
        lock.check_held()  # a failed read is left to the heartbeat: no error
        monkeypatch.setattr(workdir_lib.files, "open_file", original)
        time.sleep(0.3)
        assert not lock.lost.is_set()
    finally:
        monkeypatch.setattr(workdir_lib.files, "open_file", original)
        lock.release()
    assert os.listdir(tmp_path) == []


def test_of_racing_creators_exactly_one_gets_the_file(tmp_path):
    path = str(tmp_path / LOCK_FILE)
    won = []
    start = threading.Barrier(8)

    def create(i):
        start.wait()
        try:
            files.create_exclusively(path, json.dumps({"i": i}).encode())
            won.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with open(path) as f:
        assert len(won) == 1 and json.load(f) == {"i": won[0]}
    assert os.listdir(tmp_path) == [LOCK_FILE]


@pytest.mark.skipif(BACKEND != "tensorflow", reason="ram:// is TensorFlow's in-process file system")
def test_the_lock_on_a_remote_file_system(tmp_path):
    """`ram://` through tf.io.gfile, as `gs://` goes: create without overwrite, read back, refuse, release."""
    workdir = "ram://keras_vit_lock/run"
    files.makedirs(workdir)
    lock = WorkdirLock(workdir).acquire()
    assert json.loads(files.open_file(f"{workdir}/{LOCK_FILE}").read())["token"] == lock.holder["token"]
    # Another host's view of it: a live lock it cannot check.
    other = WorkdirLock(workdir)
    _, holder, age = other.read()
    assert holder["pid"] == os.getpid() and age < 60
    with pytest.raises(WorkdirLockedError, match="in use by another run"):
        workdir_lib.WorkdirLock(workdir).acquire()  # this process's own live lock
    lock.release()
    assert not files.exists(f"{workdir}/{LOCK_FILE}")
    assert files.listdir(workdir) == []


def wait_for(predicate, process, timeout=240):
    deadline = time.time() + timeout
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"the first run ended early: {process.communicate()}")
        assert time.time() < deadline, "the first run took no lock"
        time.sleep(0.02)


def full_tree(folder):
    return {os.path.relpath(path, folder): Path(path).read_bytes()
            for root, _, names in os.walk(folder) for path in (os.path.join(root, name) for name in names)}


def test_a_second_trainer_is_refused_and_a_killed_ones_lock_is_taken_over(tmp_path):
    data = make_idx_dataset(tmp_path / "data", train=96, test=16)
    workdir = tmp_path / "run"
    run_flags = tiny_flags(workdir, data, "--epochs=2")
    first = subprocess.Popen(main_command(*run_flags), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "KERAS_BACKEND": BACKEND}, cwd=ROOT)
    try:
        wait_for(lambda: (workdir / LOCK_FILE).exists(), first)
        # Stopped, the first run is alive but writes nothing: the workdir can be compared byte for byte.
        first.send_signal(signal.SIGSTOP)
        holder = json.loads((workdir / LOCK_FILE).read_text())
        before = full_tree(workdir)
        second = run_main(*run_flags)
        assert second.returncode == 2, second.stderr[-3000:]
        error = second.stderr.strip().splitlines()[-1]
        assert error.startswith(f"error: --workdir '{workdir}' is in use by another run (pid {first.pid} on host "
                                f"'{socket.gethostname()}', started {holder['started']}; lock file "
                                f"'{workdir / LOCK_FILE}')"), second.stderr[-3000:]
        assert full_tree(workdir) == before
    finally:
        first.kill()  # kill -9: the lock stays behind
        first.wait()
    assert (workdir / LOCK_FILE).exists()
    third = run_main(*run_flags)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"warning: taking over the lock of --workdir '{workdir}' from pid {first.pid}" in third.stderr
    assert f"process {first.pid} is gone" in third.stderr
    assert not (workdir / LOCK_FILE).exists()  # released at the normal end
    assert json.loads((workdir / "summary.json").read_text())["step"] == 6


def test_a_trainer_whose_lock_is_taken_over_stops_before_its_next_write(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
    data = make_idx_dataset(tmp_path / "data", train=96, test=16)
    workdir = tmp_path / "run"
    on_epoch_end = PreemptionCheckpoint.on_epoch_end

    def take_over_after_the_first_epoch(self, epoch, logs=None):
        on_epoch_end(self, epoch, logs)
        if epoch == 0:
            self.manager.finish()  # JAX: Orbax's first save is committed, as the TensorFlow one is
            take_over(workdir)

    monkeypatch.setattr(PreemptionCheckpoint, "on_epoch_end", take_over_after_the_first_epoch)
    # 3 steps an epoch: without the take-over, checkpoints at steps 3, 6 and 9 and the exports.
    config = TrainConfig(model_kwargs=json.loads(TINY_MODEL), dataset="fashion_mnist", data_dir=str(data),
                         image_size=16, batch_size=32, epochs=3, warmup_steps=2, jit_compile=JIT_COMPILE,
                         augmentation="flip")
    with pytest.raises(WorkdirLockLostError, match=(
            rf"--workdir '{workdir}' was taken over by another run \(pid 4242 on host 'tpu-vm-7', .*This run "
            r"stopped without writing anything more there")):
        train(config, str(workdir), verbose=0)
    checkpoints = workdir / "checkpoints"
    assert sorted(name for name in os.listdir(checkpoints) if not name.startswith(".")) == ["ckpt-3", "latest"]
    assert (checkpoints / "latest").read_text().strip() == "ckpt-3"
    assert not {"model.keras", "saved_model", "summary.json"} & set(os.listdir(workdir))
    assert json.loads((workdir / LOCK_FILE).read_text())["host"] == "tpu-vm-7"  # left to its holder

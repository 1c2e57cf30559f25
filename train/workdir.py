"""The workdir of a run: refuse another run's folder, lock it, clear a killed run's leftovers.

(Over 400 lines on purpose: refusing, locking and tidying a workdir are one protocol whose
steps read and write the same files; split, each half would need the other's names.)

A workdir holds one run: `config.json` (its configuration), `checkpoints/`,
TensorBoard `logs/`, and at the end `model.keras`, `saved_model/` and
`summary.json`. Running the same command again resumes that run; a different
configuration is refused before anything in the folder is written.

While a run writes the folder it holds `lock.json` (`WorkdirLock`): who holds
it (host, pid, start time) and when it last said it was alive. A second run on
the same folder is refused, naming the holder. A lock that a killed run left
(`kill -9`, a machine that went away) is taken over: on the same host once its
process is gone, on another host (a `gs://` workdir shared by TPU VMs) once
the holder has stopped refreshing it for `STALE_AFTER_SECONDS`, or at once
with `--break_workdir_lock`.
"""

import dataclasses
import datetime
import json
import os
import re
import socket
import sys
import threading
import time
import uuid

from keras_vit.files import write_atomically, write_text_atomically
from train import files
from train.checkpoints import CheckpointManager

CONFIG_FILE = "config.json"
LOCK_FILE = "lock.json"
# The holder rewrites its lock this often; a lock of another host left unrefreshed for
# `STALE_AFTER_SECONDS` (a preempted or deleted VM) is taken over. The margin covers a
# slow file system and clocks that differ by minutes.
HEARTBEAT_SECONDS = 60
STALE_AFTER_SECONDS = 15 * 60
# What a run leaves behind once it has made progress worth protecting.
RESULTS = ("checkpoints", "model.keras", "saved_model", "summary.json", "labels.txt")
# Settings that change how a run is executed or logged but not what it computes:
# a resumed run may change them.
RESUMABLE_FIELDS = ("checkpoint_every_steps", "eval_batch_size", "steps_per_execution", "jit_compile", "data_dir",
                    "log_analysis", "analysis_images")
# Temporary names of the atomic writes in the workdir (`keras_vit.files`: `staging_path`, `write_atomically`,
# `replace_folder`).
LEFTOVER_NAME = re.compile(r"^(\.tmp-\d+-.+|.+\.tmp-\d+|.+\.old-\d+)$")


def config_dict(config):
    """The configuration as `config.json` stores it (JSON types: tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def differences(stored, config):
    """`(field, stored value, new value)` for each field that a resumed run may not change."""
    current = config_dict(config)
    # A field added after the stored run was written held its default there.
    defaults = config_dict(type(config)())
    fields = sorted(set(stored) | set(current))
    return [
        (field, stored.get(field, defaults.get(field)), current.get(field))
        for field in fields
        if field not in RESUMABLE_FIELDS and stored.get(field, defaults.get(field)) != current.get(field)
    ]


def has_results(workdir):
    return any(files.exists(os.path.join(workdir, name)) for name in RESULTS)


def check_workdir(workdir, config):
    """Refuses a workdir that holds a run of another configuration; writes nothing.

    A workdir on TensorFlow's in-process file system (`ram://`) is refused on
    JAX, whose Orbax checkpoints cannot be written there, and warned about on
    TensorFlow: what a run writes there vanishes when the process exits.

    Raises:
        ValueError: naming the workdir and the settings that differ.
    """
    if str(workdir).startswith("ram://"):
        import keras

        if keras.backend.backend() == "jax":
            raise ValueError(
                "--workdir must be a local directory or a persistent file system (gs://, s3://, hdfs://) on the "
                "JAX backend: ram:// is TensorFlow's in-process memory, where Orbax cannot write checkpoints. "
                f"Received: workdir={workdir!r}")
        print(f"warning: --workdir={workdir} is TensorFlow's in-process file system: the checkpoints, logs and "
              "exported models written there vanish when this process exits.", file=sys.stderr, flush=True)
    if files.exists(workdir) and not files.isdir(workdir):
        raise ValueError(f"--workdir must be a directory. Received: workdir={workdir!r} (a file)")
    path = os.path.join(workdir, CONFIG_FILE)
    if not (files.isfile(path) and has_results(workdir)):
        return  # a new workdir, or one whose run stopped before it saved anything
    try:
        with files.open_file(path) as f:
            stored = json.load(f)
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        raise ValueError(
            f"--workdir {workdir!r} holds results but its {CONFIG_FILE} is unreadable ({error}), so it cannot "
            "be resumed safely. Use another --workdir, or delete this one to start over."
        ) from None
    changed = differences(stored, config)
    if changed:
        listed = "; ".join(f"{field}: {old!r} in the workdir, {new!r} now" for field, old, new in changed[:6])
        more = f"; and {len(changed) - 6} more" if len(changed) > 6 else ""
        raise ValueError(
            f"--workdir {workdir!r} holds a run of another configuration ({listed}{more}). Resume it with "
            "the same flags, use another --workdir, or delete this one to start over."
        )


def remove_leftovers(workdir):
    """Removes the temporary files of writes that a killed run left half-done."""
    removed = []
    if files.isdir(workdir):
        for name in files.listdir(workdir):
            if LEFTOVER_NAME.match(name):
                files.remove_any(os.path.join(workdir, name))
                removed.append(name)
    removed += CheckpointManager(os.path.join(workdir, "checkpoints")).remove_leftovers()
    return removed


def prepare_workdir(workdir, config, break_lock=False):
    """Checks the workdir against `config`, locks it, clears leftovers, then records the configuration.

    Args:
        workdir: str. The run's folder.
        config: `TrainConfig`.
        break_lock: bool. Take over a lock that another host holds (see
            `WorkdirLock`). Defaults to `False`.

    Returns:
        The acquired `WorkdirLock`: release it when the run ends.

    Raises:
        ValueError: if the workdir holds a run of another configuration.
        WorkdirLockedError: if another live run holds the workdir.
        OSError: if the workdir cannot be written (read-only, full).
    """
    check_workdir(workdir, config)
    check_workdir_lock(workdir, break_lock)  # refuses before the folder is created
    files.makedirs(workdir)
    lock = WorkdirLock(workdir, break_lock=break_lock)
    lock.acquire()
    try:
        remove_leftovers(workdir)
        write_text_atomically(os.path.join(workdir, CONFIG_FILE), json.dumps(config_dict(config), indent=2))
    except BaseException:
        lock.release()
        raise
    return lock


# ---- the lock ------------------------------------------------------------------

class WorkdirLockedError(ValueError):
    """Another run, live or possibly live, holds the workdir."""


class WorkdirLockLostError(WorkdirLockedError):
    """Another run took over the workdir while this one held it: this run must write nothing more there."""


# Tokens of the locks this process holds: a lock naming this process but none of them
# was left by an earlier run in the same process (a notebook) whose release failed.
_HELD_HERE = set()


def _same_machine(holder):
    """Whether the lock's holder ran on this machine since it last booted.

    Another boot id under this host name is a restarted machine, or another
    machine of the same name (cloned images, containers) sharing the workdir:
    the rule for other hosts applies to it, since its run may be live.
    """
    boot = _boot_id()
    return holder.get("host") == socket.gethostname() and not (
        boot and holder.get("boot_id") and holder["boot_id"] != boot)


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _process_state(pid):
    """`(state letter, start time in clock ticks since boot)` from Linux's /proc, or None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name, in parentheses, may hold spaces and parentheses itself.
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _is_alive(pid, process_start):
    """Whether the process `pid` of this host runs and is the one that started at `process_start`."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    state = _process_state(pid)
    if state is None:
        return True  # no /proc: a live pid is all there is to go by
    letter, start = state
    # A zombie has exited (its parent has not collected it); another start time is
    # another process that was given the same pid (a restarted container's pid 1).
    return letter not in "ZX" and (process_start is None or start == process_start)


def _now_text(seconds=None):
    return datetime.datetime.fromtimestamp(seconds or time.time()).astimezone().isoformat(timespec="seconds")


def _describe(holder):
    if holder is None:
        return "an unreadable lock"
    return f"pid {holder.get('pid')} on host {holder.get('host')!r}, started {holder.get('started')}"


def _describe_taker(found):
    """Who holds a lock that this run lost, from `WorkdirLock.read`'s answer (None: the file is gone)."""
    if found is None:
        return "its lock file was removed"
    holder = found[1]
    if holder is None:
        return "its lock file now holds an unreadable lock"
    command = f", command {holder['command']!r}" if holder.get("command") else ""
    return f"{_describe(holder)}{command}"


class WorkdirLock:
    """The lock of a run on its workdir: `<workdir>/lock.json`.

    The file names the holder (host, pid, the process's start time, the
    machine's boot id, a random token, the command) and is created atomically
    (`files.create_exclusively`): of two runs starting together one gets it.
    A thread rewrites it every `HEARTBEAT_SECONDS` (`files.write_atomically`),
    so another host can tell a live holder from a gone one by the file's age.

    A lock found in place is stale, and taken over with a warning, when
    - it names this host and its process is gone (or the pid is another
      process now, or the machine has restarted since);
    - it names another host and was last refreshed `STALE_AFTER_SECONDS` ago
      or more (or `break_lock` is set: the user knows that run is gone);
    - it is unreadable and older than `STALE_AFTER_SECONDS`.
    Otherwise `acquire` raises `WorkdirLockedError` naming the workdir and
    the holder. `break_lock` never takes over from a live process of this
    host: that run is known to be writing.

    On an object store (`gs://`) creation is a check and a copy, not one
    atomic step; the lock reads its file back and gives way if another run's
    token is there, which leaves a window of one request's latency.

    A lock can still be lost while held: another host took it over as stale
    (this run's machine stalled past `STALE_AFTER_SECONDS`), someone passed
    `--break_workdir_lock` or deleted the file, or two writers raced on an
    object store. The heartbeat then sets `lost`, and `check_held` (which the
    trainer calls before each of its writes) raises `WorkdirLockLostError`:
    the run stops rather than overwrite the checkpoints of the run that now
    owns the workdir.

    Args:
        workdir: str. The run's folder.
        break_lock: bool. Take over a lock of another host at once.
            Defaults to `False`.
        log: callable taking a str, for warnings. Defaults to printing on stderr.
    """

    def __init__(self, workdir, break_lock=False, log=None):
        self.workdir = workdir
        self.path = os.path.join(workdir, LOCK_FILE)
        self.break_lock = break_lock
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.holder = None
        # Set once another run's lock (or none) is found in place of this run's.
        self.lost = threading.Event()
        self._taker = None  # `read`'s answer when the loss was found
        self._stop = threading.Event()
        self._heartbeat = None

    # ---- reading the lock in place ----------------------------------------------

    def read(self):
        """`(raw bytes, holder dict or None if unreadable, age in seconds)`; None if there is no lock."""
        try:
            with files.open_file(self.path, "rb") as f:
                raw = f.read()
            written = files.getmtime(self.path)
        except FileNotFoundError:
            return None  # gone in between: released
        except ValueError:
            return None  # tf.io.gfile's error for a path that vanished mid-read
        # Any other OSError (EIO, ESTALE on NFS, EACCES) is raised: a failed read says
        # nothing about who holds the lock, and the heartbeat must not take it for a loss.
        except Exception as error:  # noqa: BLE001 - tf.io.gfile's NotFoundError for a remote path
            if type(error).__name__ == "NotFoundError":
                return None
            raise
        try:
            holder = json.loads(raw)
            if not (isinstance(holder, dict) and isinstance(holder.get("pid"), int) and holder["pid"] > 0):
                holder = None
        except ValueError:
            holder = None
        if written <= 0 and holder is not None and isinstance(holder.get("heartbeat_time"), (int, float)):
            written = holder["heartbeat_time"]  # a file system without modification times (ram://)
        return raw, holder, max(time.time() - written, 0.0) if written > 0 else 0.0

    def stale_reason(self, holder, age):
        """Why the lock in place may be taken over, or None if its holder may be live."""
        if holder is None:
            return f"unreadable and {age:.0f} s old" if age >= STALE_AFTER_SECONDS else None
        if _same_machine(holder):
            if holder["pid"] == os.getpid() and holder.get("token") not in _HELD_HERE:
                return "left by an earlier run of this process"
            if not _is_alive(holder["pid"], holder.get("process_start")):
                return f"process {holder['pid']} is gone"
            return None
        if age >= STALE_AFTER_SECONDS:
            return f"not refreshed for {age / 60:.0f} min"
        if self.break_lock:
            return "--break_workdir_lock"
        return None

    def refusal(self, holder, age):
        """The message of a refused start, with what the user can do."""
        where = f"--workdir {self.workdir!r} is in use by another run ({_describe(holder)}; lock file {self.path!r})"
        if holder is not None and _same_machine(holder):
            return (f"{where}. Wait for it to end or stop it (kill {holder['pid']}), or use another --workdir. A "
                    "killed run's lock is taken over by the next start.")
        last = f"last refreshed {age:.0f} s ago" if holder is not None else f"{age:.0f} s old"
        return (f"{where}, {last}. This machine cannot tell whether that run is still alive; its lock is taken "
                f"over once unrefreshed for {STALE_AFTER_SECONDS // 60} min. If you are sure it is gone (its "
                f"machine was preempted or deleted), pass --break_workdir_lock or delete {self.path!r}. Two runs "
                "writing one workdir corrupt its checkpoints.")

    def check(self):
        """Raises `WorkdirLockedError` if a live (or possibly live) run holds the workdir; writes nothing."""
        found = self.read()
        if found is not None and self.stale_reason(found[1], found[2]) is None:
            raise WorkdirLockedError(self.refusal(found[1], found[2]))

    # ---- taking and giving back -------------------------------------------------

    def acquire(self):
        """Creates the lock, taking over a stale one; starts the heartbeat.

        Raises:
            WorkdirLockedError: if another run holds the workdir.
        """
        for _ in range(5):
            holder = self._new_holder()
            # Known as this process's before the file exists: another thread reading it
            # must not take it for a lock left by an earlier run of this process.
            _HELD_HERE.add(holder["token"])
            try:
                files.create_exclusively(self.path, json.dumps(holder, indent=2).encode())
            except BaseException as error:
                _HELD_HERE.discard(holder["token"])
                if not isinstance(error, FileExistsError):
                    raise
                found = self.read()
                if found is None:
                    continue  # released in between
                raw, other, age = found
                reason = self.stale_reason(other, age)
                if reason is None:
                    raise WorkdirLockedError(self.refusal(other, age)) from None
                self.log(f"warning: taking over the lock of --workdir {self.workdir!r} from {_describe(other)}: "
                         f"{reason}.")
                self._remove_if_unchanged(raw)
                continue
            if self._read_token() != holder["token"]:
                _HELD_HERE.discard(holder["token"])
                continue  # an object store let another run overwrite it: look again
            self.holder = holder
            self._heartbeat = threading.Thread(target=self._beat, name="keras_vit-workdir-lock", daemon=True)
            self._heartbeat.start()
            return self
        raise WorkdirLockedError(f"--workdir {self.workdir!r}: its lock file {self.path!r} kept changing while "
                                 "this run tried to take it; is another run starting there?")

    def check_held(self):
        """Raises `WorkdirLockLostError` if another run has taken the workdir over; call before each write.

        Besides what the heartbeat found, the lock file is read once more
        here, so another run's lock in its place is seen before the write
        that follows, not up to `HEARTBEAT_SECONDS` later. A missing file or
        a failed read is left to the heartbeat: on a remote file system the
        heartbeat's own rewrite may briefly show no file to another thread,
        and the heartbeat, the one writer of this run's lock, cannot race
        with itself.

        Raises:
            WorkdirLockLostError: naming the workdir and the run that holds it now.
        """
        holder = self.holder
        if holder is not None and not self.lost.is_set():
            try:
                found = self.read()
            except Exception:  # noqa: BLE001 - tf.io.gfile raises its own types for a remote path
                found = None
            if found is not None:
                self._notice_loss(holder["token"], found)
        if self.lost.is_set():
            raise WorkdirLockLostError(
                f"--workdir {self.workdir!r} was taken over by another run ({_describe_taker(self._taker)}; lock "
                f"file {self.path!r}). This run stopped without writing anything more there, so as not to corrupt "
                "that run's checkpoints.")

    def _notice_loss(self, token, found):
        """Records the loss if `found` (`read`'s answer) is not this run's lock; returns whether it is lost."""
        if found is not None and found[1] is not None and found[1].get("token") == token:
            return False
        if not self.lost.is_set():
            self._taker = found
            self.lost.set()
        return True

    def release(self):
        """Stops the heartbeat and removes the lock if it is still this run's; never raises."""
        if self.holder is None:
            return
        self._stop.set()
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join()
        token, self.holder = self.holder["token"], None
        _HELD_HERE.discard(token)
        try:
            if self._read_token() == token:
                files.remove(self.path)
        except Exception as error:  # noqa: BLE001 - a full or read-only disk must not hide the run's own error
            self.log(f"warning: could not remove the lock {self.path!r} ({error}); the next run on this "
                     "workdir takes it over.")

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc_info):
        self.release()

    def _new_holder(self):
        state = _process_state(os.getpid())
        return {
            "host": socket.gethostname(), "pid": os.getpid(), "started": _now_text(),
            "process_start": state[1] if state else None, "boot_id": _boot_id(),
            "token": uuid.uuid4().hex, "command": " ".join(sys.argv)[:1000], "heartbeat": _now_text(),
            "heartbeat_time": time.time(),
        }

    def _read_token(self):
        found = self.read()
        return found[1].get("token") if found is not None and found[1] is not None else None

    def _remove_if_unchanged(self, raw):
        """Removes the stale lock whose bytes were `raw`, not a newer run's that replaced it meanwhile."""
        if files.is_remote(self.path):
            files.remove(self.path)  # no atomic rename: a window of one request
            return
        aside = f"{self.path}.old-{os.getpid()}"  # a leftover name, if this process dies here
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return
        try:
            with open(aside, "rb") as f:
                moved = f.read()
            if moved != raw:
                # Another run took the stale lock over first: its lock goes back.
                try:
                    os.link(aside, self.path)
                except FileExistsError:
                    pass
        finally:
            os.remove(aside)

    def _beat(self):
        failed = False
        while not self._stop.wait(HEARTBEAT_SECONDS):
            holder = self.holder
            if holder is None:
                return
            try:
                if self._notice_loss(holder["token"], self.read()):
                    self._warn_lost()
                    return
                write_atomically(self.path, json.dumps({**holder, "heartbeat": _now_text(), "heartbeat_time": time.time()}, indent=2).encode())
                # Read back: on an object store another run's write can land between
                # the check above and this one, and the last writer wins.
                if self._notice_loss(holder["token"], self.read()):
                    self._warn_lost()
                    return
                failed = False
            except Exception as error:  # noqa: BLE001 - the run's own writes report a full or read-only disk
                if not failed:
                    self.log(f"warning: could not refresh the lock {self.path!r}: {error}")
                failed = True

    def _warn_lost(self):
        self.log(f"warning: the lock of --workdir {self.workdir!r} was taken over by another run "
                 f"({_describe_taker(self._taker)}); this run stops before its next write.")


def check_workdir_lock(workdir, break_lock=False):
    """Refuses a workdir that another live run holds, writing nothing (`WorkdirLock.check`)."""
    WorkdirLock(workdir, break_lock=break_lock).check()

"""Runs `train/main.py`'s `main` for many command lines in one process; prints JSON results.

`python tests/train/run_many.py` reads a JSON list of argument lists (each without the
script's name) on stdin, parses each as the script does (absl, `main.parse_flags`) and runs
`main.main`, and prints one JSON list of `{"status", "stdout", "stderr"}`. For dry runs and
flag checks that need an environment of their own (a backend, 8 virtual devices): the
commands that share one share this process, so TensorFlow and Keras are imported once, not
once per command (a second a command, against about nine for a process of its own).

An entry may also be `{"argv": [...], "env": {...}}`: variables the trainer reads when it
runs (`TF_CONFIG`, `KERAS_DISTRIBUTION_*`), set for that call only. Those read at import
(`KERAS_BACKEND`, `XLA_FLAGS`) belong to the process's environment.
"""

import contextlib
import io
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "train"))


def main():
    from tests.train.helpers import call_main

    results = []
    for entry in json.load(sys.stdin):
        argv, env = (entry["argv"], entry["env"]) if isinstance(entry, dict) else (entry, {})
        out, err = io.StringIO(), io.StringIO()
        with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = call_main(argv)
        results.append({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()})
    print(json.dumps(results))


@contextlib.contextmanager
def _environment(env):
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


if __name__ == "__main__":
    main()

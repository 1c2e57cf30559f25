"""What the benchmark and experiment scripts share: one measurement per process, their tables' rows, reports.

Each script re-runs itself with `--single` for every measurement, so that compiled
functions, allocator pools and thread pools never carry over from one to the next;
the child prints one `RESULT {json}` line that the parent reads back.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PREFIX = "RESULT "


def emit_result(result):
    """Prints a measurement for the parent process (called in the child)."""
    print(_PREFIX + json.dumps(result))


def run_measurement(arguments, **identity):
    """Runs `python *arguments` from the repository root and returns its result.

    Args:
        arguments: The script and its flags.
        **identity: What was measured; returned with an `error` (the child's last
            line of stderr) when the child fails or reports nothing.
    """
    done = subprocess.run([sys.executable, *arguments], capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(_PREFIX)]
    if done.returncode or not lines:
        return dict(identity, error=" ".join(done.stderr.strip().splitlines()[-1:]))
    return json.loads(lines[-1][len(_PREFIX):])


def median_run(runs):
    """The run with the median images/s (the lower middle one for an even count), all runs listed.

    A failed run makes the row that failure.
    """
    failed = [r for r in runs if "error" in r]
    if failed:
        return failed[0]
    ordered = sorted(runs, key=lambda r: r["images_per_s"])
    return dict(ordered[(len(ordered) - 1) // 2], runs=[r["images_per_s"] for r in runs])


def rate(value):
    """Images/s to 3 significant digits, without an exponent."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def write_atomic(path, text):
    """Writes `text` and a final newline to `path` atomically, so no half-written table is left."""
    # Imported here: importing keras_vit loads Keras, which the parent process and the
    # children that measure other frameworks must not (it would count in their memory).
    from keras_vit.files import write_text_atomically

    write_text_atomically(path, text + "\n")


def replace_section(text, heading, body):
    """`text` (Markdown) with the section under the `heading` line replaced by `body`, or `body` appended.

    A section runs from its `## ` heading to the next `## ` heading or the end;
    `body` starts with the heading itself.
    """
    padded = "\n" + text  # a heading on the first line is found like any other
    start = padded.find("\n" + heading + "\n")
    if start < 0:
        return text.rstrip("\n") + "\n\n" + body.rstrip("\n") + "\n"
    end = padded.find("\n## ", start + len(heading) + 1)
    after = "" if end < 0 else "\n\n" + padded[end + 1:]
    return padded[1 : start + 1] + body.rstrip("\n") + ("\n" if end < 0 else after)



def check_positive(parser, args, *names):
    """Exits through `parser.error` naming the first flag of `names` set below 1 (unset, None, passes)."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be a positive integer. Received: {name}={value}")


def depth_overrides(variant, depth):
    """Builder arguments that give a named variant `depth` blocks (per stage for Swin), for smoke runs.

    The tests and `gpu.sh`'s dry run exercise a script's plumbing, not its figures:
    a one-block model compiles in a fraction of a twelve-block one's time.

    Args:
        variant: str. A key of `keras_vit.VARIANTS`.
        depth: int or None. Blocks (per stage); None for the variant's own.

    Returns:
        `(keras_kwargs, timm_kwargs)`: for `keras_vit.build_variant` and for
        `timm.create_model` of the same model; two empty dicts for None.
    """
    if depth is None:
        return {}, {}
    import keras_vit

    builder = keras_vit.VARIANTS[variant][0]
    if builder is keras_vit.SwinTransformer:
        return {"depths": (depth,) * 4}, {"depths": (depth,) * 4}
    if builder is keras_vit.ConViT:
        return {"num_layers": depth, "num_gpsa_layers": depth}, {"depth": depth, "local_up_to_layer": depth}
    return {"num_layers": depth}, {"depth": depth}

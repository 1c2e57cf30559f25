"""The checkpoint table of the site, generated from the registry so that it cannot drift.

One row per entry of `KNOWN_CHECKPOINTS` (every family's, once registered): the
resolution and evaluation transform (`keras_vit.preprocessing.eval_config`), the
parameter count of the model the checkpoint loads into (built without
allocating its weights), the file's format and host, the ImageNet-1k top-1 the
authors report with where they report it, and the line that builds the model
with the weights. The site's "Checkpoints" page, `docs/checkpoints.md`, is
`checkpoint_table()`, written by

    python -m keras_vit.catalog docs/checkpoints.md

and a test fails when the page differs from what the registry gives (building
every model, even without its weights, takes seconds: too long for every build of
the site).
"""

import argparse
import math

import keras

from keras_vit.files import write_text_atomically
from keras_vit.models.variants import build_variant
from keras_vit.preprocessing.checkpoints import IMAGENET_MEAN, IMAGENET_STD
from keras_vit.checkpoints import KNOWN_CHECKPOINTS

_FORMATS = {".npz": "`.npz` (vit_jax)", ".safetensors": "`.safetensors` (timm hub)"}


def describe_transform(config):
    """A short phrase for an `EvalConfig`: resize, crop, interpolation, mean/std.

    Args:
        config: `keras_vit.preprocessing.EvalConfig`.

    Returns:
        str, e.g. "bicubic: shorter side to 256, centre crop 224; ImageNet mean/std".
    """
    size = config.image_size
    resized = math.floor(size / config.crop_fraction)
    if config.crop_mode == "center":
        geometry = f"shorter side to {resized}, centre crop {size}"
    elif resized == size:
        geometry = f"whole image to {size} x {size}"
    else:
        geometry = f"whole image to {resized} x {resized}, centre crop {size}"
    filtering = "" if config.antialias else ", no antialiasing"
    if (tuple(config.mean), tuple(config.std)) == (IMAGENET_MEAN, IMAGENET_STD):
        statistics = "ImageNet mean/std"
    else:
        statistics = f"mean {_triple(config.mean)}, std {_triple(config.std)}"
    return f"{config.interpolation}{filtering}: {geometry}; {statistics}"


def _triple(values):
    values = tuple(float(v) for v in values)
    return f"{values[0]:g}" if len(set(values)) == 1 else "(" + ", ".join(f"{v:g}" for v in values) + ")"


def file_format(checkpoint):
    """The checkpoint file's format and where it is published, from its URL."""
    for suffix, name in _FORMATS.items():
        if checkpoint.url.endswith(suffix):
            return name
    raise ValueError(f"No format is known for the file of this checkpoint. Received: url={checkpoint.url!r}")


def parameter_count(key):
    """Parameters of the model that known checkpoint `key` loads into, counted without allocating them.

    The variant's table entry with the checkpoint's own settings (classes,
    resolution, pre-logits layer), as `keras_vit.<Variant>(weights=...)` builds it.
    """
    with keras.StatelessScope(initialize_variables=False):
        model = build_variant(key.split("/")[0], **KNOWN_CHECKPOINTS[key].config)
    return model.count_params()


def load_line(key):
    """The one line that builds the model with checkpoint `key`'s weights."""
    variant, name = key.split("/", 1)
    return f'keras_vit.{variant}(weights="{name}")'


def reported_top1(checkpoint):
    """`"83.97"` with its source, or the reason there is no figure."""
    if checkpoint.top1 is None:
        return f"— ({checkpoint.top1_source})" if checkpoint.top1_source else "—"
    return f"{checkpoint.top1:g} ({checkpoint.top1_source})"


def checkpoint_rows():
    """One dict per known checkpoint, in the registry's order: every column of the site's table."""
    rows = []
    for key, checkpoint in KNOWN_CHECKPOINTS.items():
        config = checkpoint.eval_config
        trained = checkpoint.config.get("image_size", config.image_size)
        # The model's own input size; DINOv2's files are built at 518 px and evaluated at 224.
        resolution = str(trained) if trained == config.image_size else f"{trained}; evaluated at {config.image_size}"
        rows.append({
            "checkpoint": key,
            "resolution": resolution,
            "preprocessing": describe_transform(config),
            "parameters": parameter_count(key),
            "file": file_format(checkpoint),
            "top1": reported_top1(checkpoint),
            "load": load_line(key),
        })
    return rows


def checkpoint_table(rows=None):
    """The site's checkpoint page, in Markdown.

    Args:
        rows: list of dicts as `checkpoint_rows()` gives; None makes them.

    Returns:
        str: a heading, a paragraph and the table.
    """
    rows = checkpoint_rows() if rows is None else rows
    lines = [
        "# Checkpoints",
        "",
        "<!-- Written by `python -m keras_vit.catalog docs/checkpoints.md`; tests/test_catalog.py fails "
        "when it differs from the registry. -->",
        "",
        "Every checkpoint `weights=` can name, generated from "
        "[KNOWN_CHECKPOINTS][keras_vit.weights.KNOWN_CHECKPOINTS]. *Resolution* is the input size the "
        "model is built at with these weights (and the evaluation's, where it differs); the *evaluation "
        "transform* is [eval_config][keras_vit.preprocessing.eval_config]'s, read from "
        "each release's own code (the models normalise inside, so mean/std is informative); *parameters* "
        "are those of the model the file loads into (its classes and pre-logits layer included); "
        "*top-1* is the ImageNet-1k validation accuracy the authors report, with where they report it. "
        "keras_vit has not re-measured these figures: ImageNet cannot be downloaded where it is built "
        "and tested. The [pretrained guide](guides/pretrained.md) shows how to use them.",
        "",
        "| checkpoint | resolution | evaluation transform | parameters | file | top-1 (%) and source | load |",
        "|---|---|---|---:|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['checkpoint']}` | {row['resolution']} | {row['preprocessing']} | {row['parameters']:,} | "
            f"{row['file']} | {row['top1']} | `{row['load']}` |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Writes the site's checkpoint table from the registry.")
    parser.add_argument("path", help="the Markdown file to write, e.g. docs/checkpoints.md")
    args = parser.parse_args(argv)
    write_text_atomically(args.path, checkpoint_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

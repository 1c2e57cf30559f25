"""The papers' analysis of a model, logged as it trains (`--log_analysis`).

ConViT's Fig. 6 follows the GPSA gates `sigma(lambda)` and the nonlocality (Eq. 8)
of each layer through training; ViT's Fig. 7 shows the mean attention distance per
head and the similarity of the position embeddings. `AnalysisLogger` computes the
chosen ones on a fixed batch of evaluation images before training and after every
epoch, writes them as TensorBoard scalars and images (`<workdir>/logs/analysis`)
and keeps their history in `<workdir>/analysis.json`, so that a user can watch
them on their own runs and a script can plot them afterwards.
"""

import json

import keras
import numpy as np

from keras_vit import analysis, inspection
from keras_vit.files import write_text_atomically
from keras_vit.layers.patching import PatchEncoder
from train import files

# What `--log_analysis` accepts (comma-separated).
ANALYSES = ("gates", "nonlocality", "distance", "position_similarity")
# Pixels of a table cell in the TensorBoard images.
_CELL = 12


def parse_analyses(value):
    """`--log_analysis` as a tuple of names; raises a one-line `ValueError` naming the flag.

    Args:
        value: None, `""`, or a comma-separated string of `ANALYSES`, or `"all"`.

    Returns:
        Tuple of names in `ANALYSES` order (empty when off).
    """
    if value is None or value == "":
        return ()
    if not isinstance(value, str):
        raise ValueError(f"--log_analysis must be a comma-separated string of {', '.join(ANALYSES)} or 'all'. "
                         f"Received: log_analysis={value!r}")
    names = [name.strip() for name in value.split(",") if name.strip()]
    if names == ["all"]:
        return ANALYSES
    unknown = [name for name in names if name not in ANALYSES]
    if unknown or not names:
        raise ValueError(f"--log_analysis must be a comma-separated list of {', '.join(ANALYSES)}, or 'all'. "
                         f"Received: log_analysis={value!r}")
    return tuple(name for name in ANALYSES if name in names)


def check_model_supports(model, analyses):
    """Raises a one-line `ValueError` when `model` lacks what an analysis reads."""
    if "gates" in analyses:
        # The shared function asks each block (no family is named here) and refuses a model without gates.
        try:
            analysis.attention_gates(model)
        except ValueError:
            raise ValueError("--log_analysis=gates needs a model whose attention has gates "
                             "(keras_vit.analysis.attention_gates). "
                             f"Received: log_analysis={','.join(analyses)!r} for model {model.name!r}") from None
    if "position_similarity" in analyses and inspection.first_layer(model, PatchEncoder) is None:
        raise ValueError("--log_analysis=position_similarity needs a model with learned position embeddings "
                         "on one patch grid (a PatchEncoder's; windowed attention has relative ones). "
                         f"Received: log_analysis={','.join(analyses)!r} for model {model.name!r}")


def heatmap(table, low=None, high=None):
    """A `(rows, cols)` table as a `(1, rows * _CELL, cols * _CELL, 1)` uint8 image.

    Values are scaled from `[low, high]` (default: the table's own range) to
    black..white; NaN (Swin's missing heads) is black.
    """
    table = np.asarray(table, "float64")
    finite = table[np.isfinite(table)]
    if low is None:
        low = float(finite.min()) if finite.size else 0.0
    if high is None:
        high = float(finite.max()) if finite.size else 1.0
    scaled = np.clip((np.nan_to_num(table, nan=low) - low) / max(high - low, 1e-12), 0.0, 1.0)
    pixels = np.kron(scaled, np.ones((_CELL, _CELL)))
    return (pixels * 255).round().astype("uint8")[None, :, :, None]


def similarity_mosaic(similarity):
    """ViT Fig. 7 (centre): one `rows x cols` tile per patch, its similarity to every patch.

    Args:
        similarity: `(rows, cols, rows, cols)` cosine similarities, as
            `analysis.position_embedding_similarity` returns them.

    Returns:
        `(rows * (rows + 1), cols * (cols + 1))` float array; a NaN line separates tiles.
    """
    rows, cols = similarity.shape[:2]
    tiles = np.full((rows, cols, rows + 1, cols + 1), np.nan)
    tiles[:, :, :rows, :cols] = similarity
    return tiles.transpose(0, 2, 1, 3).reshape(rows * (rows + 1), cols * (cols + 1))


def neighbour_similarity(similarity):
    """Mean cosine similarity of 4-neighbouring patches, and of all other pairs.

    A position embedding that has learned the 2D layout (ViT Sec. 4.5) gives
    neighbours a clearly higher similarity than the average pair.

    Args:
        similarity: `(rows, cols, rows, cols)` cosine similarities.

    Returns:
        Two floats: the neighbours' mean and the other (distinct) pairs' mean.
    """
    rows, cols = similarity.shape[:2]
    flat = similarity.reshape(rows * cols, rows * cols)
    y, x = np.divmod(np.arange(rows * cols), cols)
    manhattan = np.abs(y[:, None] - y[None, :]) + np.abs(x[:, None] - x[None, :])
    return float(flat[manhattan == 1].mean()), float(flat[manhattan > 1].mean())


def compute(model, images, analyses):
    """The chosen analyses of `model` on `images`, as plain (JSON-ready) values.

    Returns:
        Dict with, for each name asked: `gates` `(gpsa_layers, heads)`;
        `nonlocality` `(layers, heads)` in patches; `distance` `(layers, heads)`
        in pixels; `position_similarity` `(rows, cols, rows, cols)` (stored in the
        history as the two means of `neighbour_similarity`).
    """
    values = {}
    if "gates" in analyses:
        values["gates"] = analysis.attention_gates(model)
    if "nonlocality" in analyses or "distance" in analyses:
        maps = analysis.attention_maps(model, images)
        grid, pixels = analysis.attention_grid(model)
        table = analysis.nonlocality(maps, grid)
        if "nonlocality" in analyses:
            values["nonlocality"] = table
        if "distance" in analyses:
            values["distance"] = table * pixels
    if "position_similarity" in analyses:
        similarity = analysis.position_embedding_similarity(model)
        values["position_similarity"] = similarity
    return values


class AnalysisLogger(keras.callbacks.Callback):
    """Logs `compute`'s analyses before training and after every `every` epochs.

    TensorBoard (in `logdir`): a scalar per layer (the mean over heads; for the
    gates also one per head) and a heatmap image (layers x heads) per analysis,
    and the position-embedding similarity mosaic; the step is the optimizer's.
    `history_path` gets a JSON list of `{"epoch", "step", <analysis>: table}`,
    rewritten atomically after each entry; a resumed run keeps the entries up
    to its starting step.

    Args:
        model: the keras_vit model to analyse (for a distillation run, the
            student, not the wrapper that trains it).
        analyses: tuple of names from `ANALYSES`.
        images: array `(batch, height, width, channels)`, the fixed batch.
        logdir: TensorBoard folder, or None for none.
        history_path: path of the JSON history, or None for none.
        every: int. Epochs between two entries. Defaults to 1.
    """

    def __init__(self, model, analyses, images, logdir=None, history_path=None, every=1):
        super().__init__()
        check_model_supports(model, analyses)
        self.analysed = model
        self.analyses = tuple(analyses)
        self.images = images
        self.logdir = logdir
        self.history_path = history_path
        self.every = every
        self.history = []
        self._writer = None

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        step = self._step()
        if self.history_path is not None and files.exists(self.history_path):
            with files.open_file(self.history_path) as f:
                self.history = [entry for entry in json.load(f) if entry["step"] <= step]
        if not any(entry["step"] == step for entry in self.history):
            self._log(epoch=0 if step == 0 else None, step=step)

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every == 0:
            self._log(epoch=epoch + 1, step=self._step())

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _log(self, epoch, step):
        values = compute(self.analysed, self.images, self.analyses)
        entry = {"epoch": epoch, "step": step}
        for name, value in values.items():
            if name == "position_similarity":
                neighbours, others = neighbour_similarity(value)
                entry[name] = {"neighbours": neighbours, "others": others}
            else:
                entry[name] = np.where(np.isfinite(value), value, None).tolist()
        self.history.append(entry)
        if self.history_path is not None:
            write_text_atomically(self.history_path, json.dumps(self.history))
        if self.logdir is not None:
            self._summaries(values, entry, step)

    def _summaries(self, values, entry, step):
        import tensorflow as tf  # TensorBoard's writer; TensorFlow feeds the data on every backend

        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        with self._writer.as_default(step=step):
            for name, value in values.items():
                if name == "position_similarity":
                    tf.summary.image("position_similarity", heatmap(similarity_mosaic(value), -1.0, 1.0))
                    tf.summary.scalar("position_similarity/neighbours", entry[name]["neighbours"])
                    tf.summary.scalar("position_similarity/others", entry[name]["others"])
                    continue
                table = np.asarray(value, "float64")
                for layer, row in enumerate(table):
                    tf.summary.scalar(f"{name}/layer_{layer}", float(np.nanmean(row)))
                    if name == "gates":
                        for head, gate in enumerate(row):
                            tf.summary.scalar(f"gates/layer_{layer}/head_{head}", float(gate))
                tf.summary.image(f"{name}/layers_by_heads", heatmap(table, 0.0, 1.0 if name == "gates" else None))
        self._writer.flush()

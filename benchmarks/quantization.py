"""Accuracy, file size and CPU speed of a trained model: float32 and int8, in Keras and LiteRT.

    python benchmarks/quantization.py --model=WORKDIR/model.keras [--limit=1000]

Takes the `model.keras` a training run leaves in its workdir (`train/main.py`)
and the Fashion-MNIST test set (the Debian package `dataset-fashion-mnist`,
read as `train/data.py` reads it) and prints one markdown row per form:

- Keras float32: the model as trained.
- Keras int8: `model.quantize("int8")` (int8 kernels with a scale per output
  unit; each product's input quantized per token at run time).
- LiteRT float32, dynamic, int8: `keras_vit.export.litert` with `quantize=None`,
  `"dynamic"` and `"int8"` (calibrated on `--calibration` training images).

Accuracy and top-1 agreement with the float Keras model are over the first
`--limit` test images; file sizes are of the files written here (`.keras` files
re-saved without the training state); speed is images/s over the same images in batches of
`--batch_size` on the CPU (after one warm-up batch), for Keras through its
compiled predict step, for LiteRT in the interpreter with `--threads` threads.
"""

import argparse
import os
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # as train/main.py
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from runs.reporting import write_atomic  # noqa: E402
from train.data import FASHION_MNIST_DIR, read_idx  # noqa: E402

HEADER = ("| form | test accuracy | top-1 agreement with float | file MB | images/s (CPU) |\n"
          "|---|---|---|---|---|")


def load_split(data_dir, prefix, limit, input_shape):
    """`limit` images of an IDX split as float32 `(n, *input_shape)` in [0, 255], and labels."""
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))[:limit, ..., None]
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))[:limit].astype("int64")
    images = images.astype("float32")
    height, width, channels = input_shape
    if images.shape[1:3] != (height, width):
        import tensorflow as tf

        # As the trainer's evaluation pipeline (train/pipeline.py, `resize`).
        images = tf.image.resize(images, (height, width)).numpy()
    if channels != images.shape[-1]:
        images = np.repeat(images, channels, axis=-1)
    return images, labels


def keras_row(model, images, batch_size):
    """Predictions and images/s of a Keras model through its compiled predict step."""
    batches = [images[i : i + batch_size] for i in range(0, len(images), batch_size)]
    model.predict_on_batch(batches[0])  # compiles
    start = time.perf_counter()
    outputs = [np.asarray(model.predict_on_batch(batch)) for batch in batches]
    return np.concatenate(outputs), len(images) / (time.perf_counter() - start)


def litert_row(path, images, batch_size, threads):
    """Predictions and images/s of a `.tflite` file in the LiteRT interpreter."""
    from keras_vit.export import litert_interpreter, litert_predict

    interpreter = litert_interpreter(path, num_threads=threads)
    batches = [images[i : i + batch_size] for i in range(0, len(images), batch_size)]
    litert_predict(interpreter, batches[0])  # allocates
    start = time.perf_counter()
    outputs = [litert_predict(interpreter, batch) for batch in batches]
    return np.concatenate(outputs), len(images) / (time.perf_counter() - start)


def format_row(form, outputs, labels, reference, size, speed):
    predicted = outputs.argmax(-1)
    return (f"| {form} | {(predicted == labels).mean():.4f} | {(predicted == reference).mean():.4f} "
            f"| {size / 2**20:.3f} | {speed:.0f} |")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="A trained `.keras` classifier (WORKDIR/model.keras).")
    parser.add_argument("--data_dir", default=FASHION_MNIST_DIR, help="Folder of the Fashion-MNIST IDX files.")
    parser.add_argument("--limit", type=int, default=10000, help="Test images to evaluate and time.")
    parser.add_argument("--calibration", type=int, default=200, help="Training images calibrating LiteRT int8.")
    parser.add_argument("--batch_size", type=int, default=32, help="Images per inference call.")
    parser.add_argument("--threads", type=int, default=None, help="LiteRT CPU threads (default: the runtime's).")
    parser.add_argument("--workdir", default=None, help="Where the int8 .keras and .tflite files go (a temp dir).")
    parser.add_argument("--output", default=None, help="Also write the table to this file.")
    args = parser.parse_args(argv)
    for name in ("limit", "calibration", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive integer. Received: {getattr(args, name)}")
    return args


def main(argv=None):
    """Prints (and returns) the markdown table."""
    args = parse_args(argv)
    import keras

    import keras_vit  # noqa: F401  (registers the layers the file names)
    from keras_vit.export import litert

    # Without the training state (optimizer slots, EMA): file sizes are the weights'.
    model = keras.saving.load_model(args.model, compile=False)
    input_shape = tuple(model.input_shape[1:])
    images, labels = load_split(args.data_dir, "t10k", args.limit, input_shape)
    calibration, _ = load_split(args.data_dir, "train", args.calibration, input_shape)
    workdir = args.workdir or tempfile.mkdtemp(prefix="quantization-")
    os.makedirs(workdir, exist_ok=True)

    rows = [HEADER]
    float_path = os.path.join(workdir, "model_float32.keras")
    model.save(float_path)
    outputs, speed = keras_row(model, images, args.batch_size)
    reference = outputs.argmax(-1)
    rows.append(format_row("Keras float32", outputs, labels, reference, os.path.getsize(float_path), speed))

    exports = [("LiteRT float32", None), ("LiteRT dynamic-range int8", "dynamic"), ("LiteRT int8", "int8")]
    for form, quantize in exports:
        path = os.path.join(workdir, f"model_{quantize or 'float32'}.tflite")
        try:
            litert(model, path, quantize=quantize, representative_data=calibration)
            outputs, speed = litert_row(path, images, args.batch_size, args.threads)
        except ValueError as error:  # e.g. full int8 under JAX: the row says why
            rows.append(f"| {form} | failed: {str(error).splitlines()[0]} | | | |")
            continue
        rows.append(format_row(form, outputs, labels, reference, os.path.getsize(path), speed))

    quantized = keras.saving.load_model(args.model, compile=False)
    with warnings.catch_warnings():
        # `Model.quantize` warns for every layer without weights to quantize.
        warnings.simplefilter("ignore", UserWarning)
        quantized.quantize("int8")
    int8_path = os.path.join(workdir, "model_int8.keras")
    quantized.save(int8_path)
    outputs, speed = keras_row(quantized, images, args.batch_size)
    rows.insert(2, format_row("Keras int8", outputs, labels, reference, os.path.getsize(int8_path), speed))

    settings = (f"{len(images)} test images, batches of {args.batch_size}, LiteRT int8 calibrated on "
                f"{len(calibration)} training images, Keras on {keras.backend.backend()}")
    table = "\n".join(rows) + f"\n\n{settings}."
    print(table)
    if args.output:
        write_atomic(args.output, table)
    return table


if __name__ == "__main__":
    main()

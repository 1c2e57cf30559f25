"""Input-pipeline throughput: images/s decoded, augmented and batched, per CPU core.

    python benchmarks/input_pipeline.py --images=1000 --image_size=224

Generates a JPEG folder (random 320x256 images), then times the training
pipeline of `train/data.py` (Inception crop to `--image_size`, flip, batch) on:
the folder source (Pillow decode, counting bad files), the same folder through
TFDS (`tfds.folder_dataset.ImageFolder`, TensorFlow's JPEG decoder), and an
in-memory array source (the Fashion-MNIST path). Each runs with a one-thread
tf.data pool and with all cores, so one can tell whether training is input-bound:
compare with the model's images/s from `benchmarks/bench.py`. Prints a Markdown table.
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from train import data, pipeline  # noqa: E402


def make_jpeg_folder(root, count, seed=0):
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split in ("train", "test"):
        for i in range(count if split == "train" else 8):
            directory = os.path.join(root, split, f"class_{i % 4}")
            os.makedirs(directory, exist_ok=True)
            # Smooth random images compress like photos; pure noise would not.
            small = rng.integers(0, 255, (16, 20, 3), dtype=np.uint8)
            Image.fromarray(small).resize((320, 256), Image.BILINEAR).save(
                os.path.join(directory, f"{i}.jpg"), quality=90)
    return root


def tfds_folder_source(root):
    import tensorflow_datasets as tfds

    builder = tfds.folder_dataset.ImageFolder(root)
    dataset = builder.as_dataset(split="train", as_supervised=True, shuffle_files=False)
    info = builder.info
    return data.Source(dataset.map(lambda x, y: (x, tf.cast(y, tf.int64))), info.splits["train"].num_examples,
                       info.features["label"].num_classes, 3)


def time_pipeline(source, image_size, batch_size, threads, batches):
    # Only the epochs the measurement reads: each epoch is one more dataset in the chain.
    epochs = -(-(batches + 1) // max(source.size // batch_size, 1)) + 1
    stream = pipeline.make_train_dataset(source, (image_size, image_size), batch_size, seed=0,
                                     augmentation="inception_crop", end_epoch=epochs)
    options = tf.data.Options()
    if threads:
        options.threading.private_threadpool_size = threads
    stream = stream.with_options(options)
    iterator = iter(stream)
    next(iterator)  # warm up
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--batches", type=int, default=30)
    args = parser.parse_args()
    cores = os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        root = make_jpeg_folder(os.path.join(tmp, "jpegs"), args.images)
        sources = {
            "JPEG folder (Pillow)": lambda: data.load_source(f"folder:{root}", "train"),
            "JPEG folder via TFDS ImageFolder": lambda: tfds_folder_source(root),
            "in-memory arrays (28x28 Fashion-MNIST path)": lambda: data.synthetic("train", size=28, examples=4096),
        }
        rows = []
        for name, make in sources.items():
            one = time_pipeline(make(), args.image_size, args.batch_size, 1, args.batches)
            every = time_pipeline(make(), args.image_size, args.batch_size, None, args.batches)
            rows.append(f"| {name} | {one:.0f} | {every:.0f} | {every / cores:.0f} |")
    print(f"Machine: {cores} CPUs. Inception crop to {args.image_size}, flip, batch {args.batch_size}; "
          f"{args.batches} batches after one warm-up batch. Date: {time.strftime('%Y-%m-%d')}.\n")
    print("| source | images/s, 1 thread | images/s, all cores | per core (all cores) |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

"""DeiT's training input pipeline, ours beside timm's, in images/s per CPU core.

    python benchmarks/input_pipeline.py --images=1000 --batch_size=128 --batches=20 --repeats=3 --stages

Writes a folder of JPEGs (quality 90) cut from scikit-image's photographs
(astronaut, chelsea, coffee, rocket: random crops, rescaled to 300-500 px wide,
about ImageNet's average size), then times the whole DeiT training pipeline on
those files, for each pipeline and core count:

- ours: `train.pipeline.make_train_dataset` as the trainer's `deit` preset calls
  it (JPEG decode, random resized crop, flip, RandAugment `rand-m9-mstd0.5-inc1`,
  random erasing 0.25, repeated augmentation 3, batching, MixUp 0.8 / CutMix 1.0),
  over `train.data.folder_source` as the trainer reads a folder (TensorFlow's
  decoders, which give Pillow's pixels, falling back to Pillow for what they do
  not read), over `folder_source(decoder="pillow")` (Pillow in `tf.py_function`),
  and over a bare `tf.io.decode_jpeg` without the fallback (what the fallback
  costs);
- timm: `timm.data.create_transform(224, is_training=True, auto_augment=...,
  interpolation="bicubic", re_prob=0.25, re_mode="pixel", re_count=1)` on a
  Dataset of the same files (PIL open and convert to RGB), a torch `DataLoader`
  (shuffled, default collate, `drop_last`) and timm's `Mixup` on each batch in
  the main process, as DeiT's `main.py` and `engine.py` run them.

Each measurement runs in its own process pinned to `N` cores
(`os.sched_setaffinity`, inherited by DataLoader workers): ours with a tf.data
thread pool of `N` threads and one thread per op, timm with `N` workers (one
torch thread each). After `--warmup` batches (which also drain what the
pipelines prefetched while starting), `--batches` batches are timed, in wall
time and in the CPU time of every process involved (`/proc/<pid>/stat`: the
main process's threads and the DataLoader workers). Prints a Markdown table:
images/s, images/s per core, images per CPU-second (which other load on the
machine disturbs less than wall time), and ours/timm at the same cores.
`--stages` adds the CPU time per image of each stage, cumulatively, on one core.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from runs.reporting import emit_result, rate, run_measurement  # noqa: E402
from train.cpu_allocator import use_bfc_cpu_allocator  # noqa: E402

POLICY = "rand-m9-mstd0.5-inc1"
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket")
PIPELINES = {
    "ours-tensorflow": "ours, `folder_source` (TensorFlow decode, the trainer's)",
    "ours-pillow": "ours, `folder_source(decoder=\"pillow\")`",
    "ours-bare": "ours, bare `tf.io.decode_jpeg` (no fallback)",
    "timm": "timm: DataLoader + `Mixup`",
}
# Cumulative stages of `--stages`: crop and flip, then RandAugment, erasing, MixUp/CutMix.
STAGES = {
    "decode, crop, flip, batch": {"rand_augment": False, "erasing": False, "mixing": False},
    "+ RandAugment": {"rand_augment": True, "erasing": False, "mixing": False},
    "+ random erasing": {"rand_augment": True, "erasing": True, "mixing": False},
    "+ MixUp/CutMix (whole pipeline)": {"rand_augment": True, "erasing": True, "mixing": True},
}
WHOLE = STAGES["+ MixUp/CutMix (whole pipeline)"]


def make_jpeg_folder(root, count, classes=10, seed=0):
    """`root/train/class_<k>/<i>.jpg`: `count` crops of scikit-image's photographs, ~400 x 350 on average."""
    import skimage.data
    from PIL import Image

    rng = np.random.default_rng(seed)
    photos = [Image.fromarray(getattr(skimage.data, name)()) for name in PHOTOS]
    for i in range(count):
        photo = photos[i % len(photos)]
        width = int(rng.integers(300, 501))
        height = round(width * rng.uniform(0.65, 1.15))
        # A random box of the output's aspect, 30-100% of what fits, so that the files differ in content.
        fit = min(photo.width / width, photo.height / height)
        box_width, box_height = width * fit * np.sqrt(rng.uniform(0.3, 1.0)), height * fit
        box_height *= box_width / (width * fit)
        left = rng.uniform(0, photo.width - box_width)
        top = rng.uniform(0, photo.height - box_height)
        image = photo.resize((width, height), Image.BICUBIC, box=(left, top, left + box_width, top + box_height))
        if rng.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        directory = os.path.join(root, "train", f"class_{i % classes}")
        os.makedirs(directory, exist_ok=True)
        image.save(os.path.join(directory, f"{i}.jpg"), quality=90)
    return root


def image_size(path):
    """`(width, height)` of an image file."""
    from PIL import Image

    with Image.open(path) as image:
        return image.size


def list_jpegs(root):
    """`(files, labels, classes)` of `root/train`, in `folder_source`'s order."""
    split = os.path.join(root, "train")
    classes = sorted(os.listdir(split))
    files, labels = [], []
    for label, name in enumerate(classes):
        for filename in sorted(os.listdir(os.path.join(split, name))):
            files.append(os.path.join(split, name, filename))
            labels.append(label)
    return files, labels, len(classes)


def tf_decode_source(files, labels, num_classes):
    """A `train.data.Source` of JPEGs decoded by `tf.io.decode_jpeg` alone: no fallback, no skipping."""
    import tensorflow as tf

    from train import data

    paths = tf.constant(files)
    labels_t = tf.constant(labels, tf.int64)

    def read(index):
        # INTEGER_ACCURATE is libjpeg's ISLOW DCT, the one Pillow uses.
        image = tf.io.decode_jpeg(tf.io.read_file(tf.gather(paths, index)), channels=3,
                                  dct_method="INTEGER_ACCURATE")
        return image, tf.gather(labels_t, index), tf.constant(True)

    dataset = tf.data.Dataset.from_tensor_slices((paths, labels_t))
    return data.Source(dataset, len(files), num_classes, 3, read=read)


def ours_batches(root, decoder, image_size, batch_size, total, threads, rand_augment, erasing, mixing):
    import tensorflow as tf

    from train import data, pipeline

    if decoder == "bare":
        source = tf_decode_source(*list_jpegs(root))
    else:
        source = data.folder_source(root, "train", decoder=decoder)
    epochs = -(-total // (source.size // batch_size)) + 1
    stream = pipeline.make_train_dataset(
        source, (image_size, image_size), batch_size, seed=0, augmentation="random_resized_crop",
        randaugment=POLICY if rand_augment else None, random_erasing=0.25 if erasing else 0.0,
        mixup=0.8 if mixing else 0.0, cutmix=1.0 if mixing else 0.0, repeated_augmentation=3, end_epoch=epochs)
    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    options.threading.max_intra_op_parallelism = 1
    return iter(stream.with_options(options)), []


def _posterize_as_earlier_pillows(timm):
    """timm's RandAugment with 0-bit Posterize giving black, as the Pillows timm was written for.

    Pillow 12+ rejects `ImageOps.posterize(image, 0)`, which `PosterizeIncreasing`
    reaches at level 10 (about one image in 700 under `rand-m9-mstd0.5-inc1`).
    """
    auto_augment = timm.data.auto_augment

    def posterize(image, bits_to_keep, **kwargs):
        if bits_to_keep <= 0:
            return image.point([0] * 256 * len(image.getbands()))
        return auto_augment.posterize(image, bits_to_keep, **kwargs)

    for name, op in list(auto_augment.NAME_TO_OP.items()):
        if op is auto_augment.posterize:
            auto_augment.NAME_TO_OP[name] = posterize


def timm_batches(root, image_size, batch_size, total, threads, rand_augment, erasing, mixing):
    from PIL import Image

    from runs.reference import timm, torch  # the torchvision shim, then timm

    _posterize_as_earlier_pillows(timm)
    files, labels, num_classes = list_jpegs(root)
    # No colour jitter: RandAugment turns timm's off, and without RandAugment (a `--stages`
    # row) it would add a stage that our pipeline does not have.
    transform = timm.data.create_transform(
        image_size, is_training=True, auto_augment=POLICY if rand_augment else None, interpolation="bicubic",
        re_prob=0.25 if erasing else 0.0, re_mode="pixel", re_count=1, color_jitter=None)

    class JpegFiles(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, index):
            with open(files[index], "rb") as f:  # torchvision's `pil_loader`, as ImageFolder reads
                image = Image.open(f).convert("RGB")
            return transform(image), labels[index]

    # One sampler over every batch timed: DataLoader restarts its workers each epoch, which
    # ImageNet's 10,000 batches per epoch hide and a few hundred files would not.
    dataset = JpegFiles()
    sampler = torch.utils.data.RandomSampler(dataset, num_samples=total * batch_size,
                                             generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=threads,
                                         drop_last=True, worker_init_fn=lambda _: torch.set_num_threads(1))
    mixup = timm.data.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1,
                            num_classes=num_classes) if mixing else None
    torch.set_num_threads(threads)
    iterator = iter(loader)

    def batches():
        for images, targets in iterator:
            yield mixup(images, targets) if mixup else (images, targets)

    return batches(), [worker.pid for worker in iterator._workers]


def cpu_seconds(pids):
    """User + system CPU seconds of the processes `pids`, all their threads included."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def measure(args):
    """Images/s and images per CPU-second of one pipeline on `args.threads` cores (in a child process)."""
    threads = int(args.threads)
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    stages = json.loads(args.stage)
    total = args.warmup + args.batches
    if args.single == "timm":
        iterator, workers = timm_batches(args.root, args.image_size, args.batch_size, total, threads, **stages)
    else:
        use_bfc_cpu_allocator()  # as train/main.py, before TensorFlow starts
        iterator, workers = ours_batches(args.root, args.single.split("-")[1], args.image_size, args.batch_size,
                                         total, threads, **stages)
    for _ in range(args.warmup):
        images, _ = next(iterator)
    pids = [os.getpid(), *workers]
    start, start_cpu = time.perf_counter(), cpu_seconds(pids)
    for _ in range(args.batches):
        images, _ = next(iterator)
    seconds, cpu = time.perf_counter() - start, cpu_seconds(pids) - start_cpu
    assert images.shape[0] == args.batch_size
    count = args.batches * args.batch_size
    # The kernel counts CPU time in clock ticks (10 ms): a tiny run may see none.
    emit_result({"images_per_s": count / seconds, "images_per_cpu_s": count / max(cpu, 1 / os.sysconf("SC_CLK_TCK"))})


def run_one(args, root, pipeline, threads, stages):
    result = run_measurement(
        [__file__, f"--single={pipeline}", f"--threads={threads}", f"--stage={json.dumps(stages)}", f"--root={root}",
         f"--image_size={args.image_size}", f"--batch_size={args.batch_size}", f"--batches={args.batches}",
         f"--warmup={args.warmup}"], pipeline=pipeline, threads=threads)
    if "error" in result:
        raise SystemExit(f"{pipeline} on {threads} cores failed: {result['error']}")
    return result


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1000, help="JPEG files written (default 1000)")
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch_size", type=int, default=128, help="DeiT's per-GPU batch (default 128)")
    parser.add_argument("--batches", type=int, default=20, help="batches timed (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="batches before the timing (default 5)")
    parser.add_argument("--threads", default="1,all",
                        help="comma-separated core counts; 'all' is every core this process may use")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help=f"some of {','.join(PIPELINES)}")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each measurement, interleaved (default 1)")
    parser.add_argument("--stages", action="store_true", help="also time each stage's cumulative cost on one core")
    parser.add_argument("--single", help=argparse.SUPPRESS)
    parser.add_argument("--stage", default=json.dumps(WHOLE), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single:
        return measure(args)
    cores = len(os.sched_getaffinity(0))
    threads = sorted({cores if t.strip() == "all" else int(t) for t in args.threads.split(",")})
    pipelines = [p.strip() for p in args.pipelines.split(",")]
    unknown = [p for p in pipelines if p not in PIPELINES]
    if unknown or any(not 0 < t <= cores for t in threads):
        parser.error(f"--pipelines must be some of {list(PIPELINES)} and --threads within 1..{cores}. "
                     f"Received: pipelines={args.pipelines!r}, threads={args.threads!r}")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = make_jpeg_folder(os.path.join(tmp, "jpegs"), args.images)
        files = list_jpegs(root)[0]
        sizes = [image_size(path) for path in files]
        megabytes = sum(os.path.getsize(path) for path in files) / 2**20
        # Repeats interleave the pipelines, so that a burst of load on the machine hits them alike.
        runs = {}
        for _ in range(args.repeats):
            for t in threads:
                for p in pipelines:
                    runs.setdefault((p, t), []).append(run_one(args, root, p, t, WHOLE))
        stage_cpu = {}
        if args.stages:
            for name, stages in STAGES.items():
                for p in pipelines:
                    results = runs[p, 1] if stages == WHOLE and 1 in threads else [run_one(args, root, p, 1, stages)]
                    stage_cpu[name, p] = 1000 / statistics.median(r["images_per_cpu_s"] for r in results)
    mean_width, mean_height = np.mean(sizes, axis=0)
    print(f"Machine: {cpu_model()}, {cores} cores; 1-minute load {load:.2f} before, {os.getloadavg()[0]:.2f} "
          f"after. Date: {time.strftime('%Y-%m-%d %H:%M %Z')}.\n{args.images} JPEGs (quality 90, mean "
          f"{mean_width:.0f}x{mean_height:.0f}, {megabytes:.0f} MiB) to {args.image_size} px, batch "
          f"{args.batch_size}; {args.batches} batches timed after {args.warmup}; median of {args.repeats} "
          f"run(s), ratios the median of the runs' ratios.\n")
    print("| pipeline | threads/workers | images/s | per core | ours/timm | images per CPU-second | ours/timm (CPU) "
          "| runs (images/s) |")
    print("|---|---|---|---|---|---|---|---|")
    for t in threads:
        for p in pipelines:
            wall = [r["images_per_s"] for r in runs[p, t]]
            cpu = [r["images_per_cpu_s"] for r in runs[p, t]]
            ratios = ["-", "-"]
            if p != "timm" and "timm" in pipelines:
                for i, key in enumerate(("images_per_s", "images_per_cpu_s")):
                    ratios[i] = f"{statistics.median(a[key] / b[key] for a, b in zip(runs[p, t], runs['timm', t])):.2f}"
            print(f"| {PIPELINES[p]} | {t} | {rate(statistics.median(wall))} | {rate(statistics.median(wall) / t)} | "
                  f"{ratios[0]} | {rate(statistics.median(cpu))} | {ratios[1]} | {', '.join(rate(w) for w in wall)} |")
    if args.stages:
        print("\nCumulative stages on one core, CPU milliseconds per image (the difference between rows is the "
              "stage's cost):\n")
        print("| stages | " + " | ".join(PIPELINES[p] for p in pipelines) + " |")
        print("|---" * (len(pipelines) + 1) + "|")
        for name in STAGES:
            print(f"| {name} | " + " | ".join(f"{stage_cpu[name, p]:.2f}" for p in pipelines) + " |")


if __name__ == "__main__":
    main()

"""Classify photos with a finished run: `python train/classify.py --workdir=workdir photo.jpg [more.png ...]`.

Prints each photo's most probable classes, named from the run's `labels.txt`. The
photos may have any size: the run's SavedModel (or, with `--format`, the LiteRT or
OpenVINO file that `train/export.py` made) prepares them inside with the run's
evaluation transform, as its evaluation images were prepared.
"""

import argparse
import os
import sys

# `python train/classify.py` puts train/ on sys.path; the repository root goes there too.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from train import serving  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].split(": ", 1)[0] + ".")
    parser.add_argument("photos", nargs="+", help="Image files (JPEG, PNG, BMP, GIF, WebP), any size.")
    parser.add_argument("--workdir", default="workdir", help="The run's folder (train/main.py --workdir).")
    parser.add_argument("--format", default="saved_model", help=f"The file to run: {', '.join(serving.EXPORTED)} "
                        "(the last two made by train/export.py).")
    parser.add_argument("--top", type=int, default=3, help="Classes printed per photo.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        serving.check_format(args.format)
        if args.top < 1:
            raise ValueError(f"--top must be a positive integer. Received: --top={args.top}")
        summary = serving.run_summary(args.workdir)
        names = summary["class_names"]  # labels.txt's lines, in label order
        predict = serving.predictor(args.workdir, args.format)
        for path in args.photos:
            probabilities = predict(serving.read_photo(path, summary["channels"]))
            best = probabilities.argsort()[::-1][: args.top]
            print(f"{path}: " + ", ".join(f"{names[k]} {probabilities[k]:.3f}" for k in best), flush=True)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

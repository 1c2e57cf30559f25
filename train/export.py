"""Export a finished run for photos: `python train/export.py --workdir=workdir --format=litert` (or openvino).

Writes `model.tflite` (LiteRT) or `model.xml` and `model.bin` (OpenVINO) into the
workdir, made from the run's `model.keras` with the run's evaluation transform
inside (`EvalTransform`) and a softmax: like the run's SavedModel, the file takes
uint8 photos `(batch, height, width, channels)` of any size and returns class
probabilities. `train/classify.py --format=...` runs it on photos. Keras runs on
TensorFlow here (JAX traces only image sizes it knows); the run may have trained
on either backend.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_BACKEND = os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from train import serving  # noqa: E402

FORMATS = ("litert", "openvino")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].split(": ", 1)[0] + ".")
    parser.add_argument("--workdir", default="workdir", help="The run's folder (train/main.py --workdir).")
    parser.add_argument("--format", required=True, help=f"One of {', '.join(FORMATS)}.")
    parser.add_argument("--quantize", default=None, help="LiteRT only: 'dynamic' for int8 weights (float by "
                        "default).")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.format not in FORMATS:
            raise ValueError(f"--format must be one of {', '.join(FORMATS)} (the run's SavedModel is made by "
                             f"train/main.py). Received: --format={args.format!r}")
        if args.quantize not in (None, "dynamic"):
            raise ValueError(f"--quantize must be 'dynamic' or left out. Received: --quantize={args.quantize!r}")
        if args.quantize and args.format != "litert":
            raise ValueError(f"--quantize applies to --format=litert only. Received: --format={args.format!r}")
        if _BACKEND != "tensorflow":
            raise ValueError("train/export.py runs Keras on TensorFlow (JAX exports only image sizes it knows): "
                             f"unset KERAS_BACKEND or set it to tensorflow. Received: KERAS_BACKEND={_BACKEND!r}")
        serving.run_summary(args.workdir)  # a finished run with classes, before anything loads
        from keras_vit import export

        model = serving.photo_model(args.workdir)
        path = os.path.join(args.workdir, serving.EXPORTED[args.format])
        if args.format == "litert":
            export.litert(model, path, quantize=args.quantize)
        else:
            export.openvino(model, path)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{path}: uint8 photos of any size -> probabilities\n"
          f"classify a photo: python train/classify.py --workdir={args.workdir} --format={args.format} photo.jpg",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

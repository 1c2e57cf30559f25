"""A finished run's models for photos: its evaluation transform in front, its class names after.

The run's SavedModel (`saved_model/`) already takes photos of any size: the trainer
exports it with the run's evaluation transform inside
(`keras_vit.export.saved_model(image_transform=...)`). This module makes the
LiteRT and OpenVINO files from the run's `model.keras` with the same transform
(`EvalTransform`, from `summary.json`'s `eval_transform`) and a softmax, so
every file answers probabilities for a uint8 photo of any size; and reads a
photo as the run's image folders were read; the classes are the summary's `class_names`
(as in `labels.txt`). `train/export.py` and `train/classify.py` are its command lines.
"""

import json
import os

import numpy as np

# What `train/export.py --format` writes into the workdir, and `train/classify.py --format` reads.
EXPORTED = {"saved_model": "saved_model", "litert": "model.tflite", "openvino": "model.xml"}


def check_format(name):
    """Raises a ValueError naming `--format` unless `name` is one of `EXPORTED`."""
    if name not in EXPORTED:
        raise ValueError(f"--format must be one of {', '.join(EXPORTED)}. Received: --format={name!r}")


def check_local(workdir):
    """Raises a ValueError naming `--workdir` for a remote one (`gs://`): the files are read locally."""
    if "://" in str(workdir):
        raise ValueError(f"--workdir must be a local folder here: copy the run's folder to this machine first "
                         f"(e.g. gcloud storage cp -r). Received: --workdir={workdir!r}")


def run_summary(workdir):
    """The finished run's `summary.json` as a dict, or a ValueError naming `--workdir`."""
    check_local(workdir)
    path = os.path.join(workdir, "summary.json")
    if not os.path.isfile(path):
        raise ValueError(
            f"--workdir must be the folder of a finished training run (train/main.py --workdir=...), which "
            f"holds summary.json, model.keras and saved_model/. Received: --workdir={workdir!r} (no summary.json)"
        )
    with open(path) as file:
        summary = json.load(file)
    if not summary.get("class_names"):
        raise ValueError(
            "The run in --workdir was not trained on labels (a pretraining or feature run): it has no classes "
            f"to name. Received: --workdir={workdir!r}"
        )
    return summary


def photo_model(workdir):
    """The run's `model.keras` taking uint8 photos of any size to probabilities, as its SavedModel does.

    The run's evaluation transform (`summary.json`'s `eval_transform`) is an
    `EvalTransform` layer in front; a run evaluated with `--eval_flip` averages
    each photo's logits with its mirror image's, as it evaluated. Needs Keras on
    TensorFlow: JAX traces only image sizes it knows.
    """
    import keras

    import keras_vit
    from keras_vit.preprocessing.checkpoints import EvalConfig
    from train.modeling import mirror_averaged

    summary = run_summary(workdir)
    if not summary.get("eval_transform"):
        raise ValueError(
            "The run evaluated on non-square images (a dataset's own size, with no --image_size): its "
            "transform has no EvalTransform, so no LiteRT or OpenVINO file takes photos of any size; its "
            f"SavedModel does. Received: --workdir={workdir!r}"
        )
    model = keras.saving.load_model(os.path.join(workdir, "model.keras"), compile=False)
    if "one_view_accuracy" in summary:  # --eval_flip: the run evaluated and served the mirror average
        model = mirror_averaged(model)
    classifier = keras_vit.image_classifier(EvalConfig(**summary["eval_transform"]), model=model)
    images = keras.Input((None, None, model.input_shape[-1]), dtype="uint8", name="images")
    # Float32 probabilities, as the SavedModel serves, from a mixed-precision model's logits too.
    logits = keras.ops.cast(classifier(images), "float32")
    return keras.Model(images, keras.layers.Softmax(dtype="float32")(logits), name=f"{model.name}_photos")


def read_photo(path, channels):
    """A photo as uint8 `(height, width, channels)`, decoded as the run's image folders were (Pillow's pixels).

    Raises:
        ValueError: naming the file, when it is missing or not an image.
    """
    from keras_vit.images import read_rgb

    image = read_rgb(path)
    # Pillow's RGB -> L for a grayscale run, as train.data reads its folders.
    return np.asarray(image.convert("L"))[..., None] if channels == 1 else np.asarray(image)


def predictor(workdir, file_format):
    """A function of one photo (uint8 `(height, width, channels)`) returning the probabilities of the run's file.

    The file (`EXPORTED[file_format]` in the workdir) is loaded once. A LiteRT or
    OpenVINO file older than the run's `model.keras` is refused: it was made
    from an earlier run in the same workdir.
    """
    from keras_vit import export

    path = os.path.join(workdir, EXPORTED[file_format])
    make = f"make it with train/export.py --workdir={workdir} --format={file_format}"
    if not os.path.exists(path):
        where = "" if file_format == "saved_model" else f": {make}"
        raise ValueError(f"The run has no {file_format} file at {path!r}{where}. Received: --workdir={workdir!r}")
    if file_format != "saved_model" and os.path.getmtime(path) < os.path.getmtime(os.path.join(workdir, "model.keras")):
        raise ValueError(f"{path!r} is older than the run's model.keras (made from an earlier run in this workdir): "
                         f"{make} again. Received: --format={file_format!r}")
    if file_format == "saved_model":
        import tensorflow as tf

        loaded = tf.saved_model.load(path)
        return lambda photo: loaded.serve(tf.constant(photo[None])).numpy()[0]
    if file_format == "litert":
        interpreter = export.litert_interpreter(path)
        return lambda photo: export.litert_predict(interpreter, photo[None])[0]
    compiled = export.openvino_compiled(path)
    return lambda photo: export.openvino_predict(compiled, photo[None])[0]

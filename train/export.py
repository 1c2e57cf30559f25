"""Final artifacts: `model.keras` and a SavedModel serving uint8 images."""

import os

import keras

from train import files


def save_keras_atomically(model, path):
    """`model.save(path)` through a temporary file and a rename."""
    tmp = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}-{os.path.basename(path)}")
    model.save(tmp)
    files.replace_file(tmp, path)


def _replace_directory(tmp, path):
    old = f"{path}.old-{os.getpid()}"
    if files.exists(path):
        files.move_folder(path, old)
    files.move_folder(tmp, path, last="saved_model.pb")
    files.rmtree(old)


def export_saved_model(model, path):
    """Writes a SavedModel whose `serve` signature maps uint8 images to class probabilities.

    Args:
        model: keras_vit classifier returning logits.
        path: str. Output directory (replaced if it exists).
    """
    import tensorflow as tf

    height, width, channels = model.input_shape[1:]

    def serve(images):
        logits = model(keras.ops.cast(images, "float32"), training=False)
        return keras.ops.softmax(keras.ops.cast(logits, "float32"), axis=-1)

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        name="serve",
        fn=serve,
        input_signature=[tf.TensorSpec((None, height, width, channels), tf.uint8, name="images")],
    )
    tmp = os.path.join(os.path.dirname(files.absolute(path)), f".tmp-{os.getpid()}-{os.path.basename(path)}")
    files.rmtree(tmp)
    archive.write_out(tmp, verbose=False)
    _replace_directory(tmp, path)

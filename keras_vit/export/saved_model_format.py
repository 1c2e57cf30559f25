"""SavedModel export: a classifier served on uint8 images, and the inference call the converters read."""

import keras

from keras_vit import files


def saved_model(model, path):
    """Writes a SavedModel whose `serve` signature maps uint8 images to class probabilities.

    The signature takes `images`, uint8 `(batch, height, width, channels)`
    with a free batch size, and returns float32 softmax probabilities, as a
    server loading it with `tf.saved_model.load` calls it. The folder is
    written beside `path` and moved onto it with `saved_model.pb` last (see
    `keras_vit.files.staged_folder`): a failed export leaves `path` as it was.
    Works on TensorFlow and on JAX (which Keras traces with jax2tf).

    Args:
        model: A keras_vit classifier returning logits.
        path: str. The folder to write (replaced if it exists); a path with a
            scheme (`gs://`) goes through `tf.io.gfile`.

    Returns:
        str. `path`.
    """
    import tensorflow as tf

    height, width, channels = model.input_shape[1:]

    def serve(images):
        logits = model(keras.ops.cast(images, "float32"), training=False)
        # Float32 probabilities from a mixed-precision model's bfloat16 logits too.
        return keras.ops.softmax(keras.ops.cast(logits, "float32"), axis=-1)

    with files.staged_folder(path, last="saved_model.pb") as staged:
        _write_archive(model, serve, tf.TensorSpec((None, height, width, channels), tf.uint8, name="images"), staged)
    return path


def inference_saved_model(model, input_shape, folder):
    """Writes a SavedModel of `model`'s inference call (`serve`, the model's input dtype) into `folder`.

    What the LiteRT and OpenVINO converters read (Keras on TensorFlow).

    Args:
        model: A built single-input Keras model.
        input_shape: tuple. The input's shape, batch size first (None: free).
        folder: str. The folder to write.
    """
    import tensorflow as tf

    spec = tf.TensorSpec(input_shape, model.inputs[0].dtype, name="images")
    _write_archive(model, lambda images: model(images, training=False), spec, folder)


def _write_archive(model, serve, input_spec, folder):
    """Writes `model` with one endpoint, `serve`, taking one tensor of `input_spec`."""
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(name="serve", fn=serve, input_signature=[input_spec])
    archive.write_out(folder, verbose=False)

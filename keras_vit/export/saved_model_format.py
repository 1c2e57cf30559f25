"""SavedModel export: a classifier served on uint8 images (or photos of any size), and the inference call the
converters read."""

import keras

from keras_vit import files


def saved_model(model, path, image_transform=None):
    """Writes a SavedModel whose `serve` signature maps uint8 images to class probabilities.

    The signature takes `images`, uint8 `(batch, height, width, channels)`
    with a free batch size, and returns float32 softmax probabilities, as a
    server loading it with `tf.saved_model.load` calls it. With
    `image_transform` the height and width are free too: each image goes
    through the transform (a TensorFlow function, run inside the signature)
    before the model, so the SavedModel serves photos of any size prepared as
    the model's evaluation images were. The folder is written beside `path`
    and moved onto it with `saved_model.pb` last (see
    `keras_vit.files.staged_folder`): a failed export leaves `path` as it was.
    Works on TensorFlow and on JAX (which Keras traces with jax2tf; the
    transform stays TensorFlow's, so JAX needs no symbolic image sizes).

    Args:
        model: A keras_vit classifier returning logits.
        path: str. The folder to write (replaced if it exists); a path with a
            scheme (`gs://`) goes through `tf.io.gfile`.
        image_transform: A function of one image, a uint8 `tf.Tensor`
            `(height, width, channels)`, returning the model's float32 input
            image, written with TensorFlow ops (e.g.
            `keras_vit.preprocessing.eval_transform(...)`, or the trainer's
            evaluation transform); or None for images of the model's input
            size. Defaults to None.

    With `image_transform`, the SavedModel has a second signature,
    `serve_prepared`: float32 images already transformed, of the model's
    input size (what the photos' signature calls after the transform).

    Returns:
        str. `path`.

    Raises:
        ValueError: for an `image_transform` that is not callable.
    """
    import tensorflow as tf

    if image_transform is not None and not callable(image_transform):
        raise ValueError(
            "`image_transform` must be a function of one image (a TensorFlow function) or None. "
            f"Received: image_transform={image_transform!r}"
        )
    height, width, channels = model.input_shape[1:]

    def serve(images):
        logits = model(keras.ops.cast(images, "float32"), training=False)
        # Float32 probabilities from a mixed-precision model's bfloat16 logits too.
        return keras.ops.softmax(keras.ops.cast(logits, "float32"), axis=-1)

    with files.staged_folder(path, last="saved_model.pb") as staged:
        if image_transform is None:
            images = tf.TensorSpec((None, height, width, channels), tf.uint8, name="images")
            _write_archive(model, serve, images, staged)
        else:
            prepared = tf.TensorSpec((None, height, width, channels), tf.float32, name="images")
            photos = tf.TensorSpec((None, None, None, channels), tf.uint8, name="images")
            _write_archive(model, serve, prepared, staged, photos=(photos, image_transform))
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


def _write_archive(model, serve, input_spec, folder, photos=None):
    """Writes `model` with one endpoint, `serve`, taking one tensor of `input_spec`.

    With `photos`, a pair `(spec, transform)`, `serve` takes a batch of `spec`
    instead: each image mapped by `transform` to one of `input_spec` first.
    """
    archive = keras.export.ExportArchive()
    archive.track(model)
    if photos is None:
        archive.add_endpoint(name="serve", fn=serve, input_signature=[input_spec])
    else:
        import tensorflow as tf

        photo_spec, transform = photos
        # Keras's own recipe for TensorFlow preprocessing in front of a model on any backend:
        # the model's endpoint first (jax2tf's on JAX), then a tf.function calling it.
        prepared = archive.add_endpoint(name="serve_prepared", fn=serve, input_signature=[input_spec])
        image_spec = tf.TensorSpec(input_spec.shape[1:], tf.float32)

        @tf.function(input_signature=[photo_spec], autograph=False)
        def serve_photos(images):
            # One image at a time: the transform is written for one (a batch has one size, but
            # the transforms check and crop single images, as the evaluation pipeline maps them).
            return prepared(tf.map_fn(lambda image: tf.cast(transform(image), tf.float32), images,
                                      fn_output_signature=image_spec))

        serve_photos.get_concrete_function()
        archive.add_endpoint(name="serve", fn=serve_photos)
        # TensorFlow Serving's default is otherwise the first endpoint, the prepared images'.
        archive.add_endpoint(name="serving_default", fn=serve_photos)
    archive.write_out(folder, verbose=False)

"""The `.keras` file of a model, written atomically."""

from keras_vit import files


def keras_file(model, path):
    """Saves `model` as a `.keras` file (`model.save`) under a temporary name beside `path`, then renames it.

    `path` holds the old file or the complete new one, never a partial write;
    a failed save leaves it as it was.

    Args:
        model: A Keras model.
        path: str. The `.keras` file to write (replaced if it exists); a path
            with a scheme (`gs://`) goes through `tf.io.gfile`.

    Returns:
        str. `path`.
    """
    with files.staged_file(path) as staged:
        model.save(staged)
    return path

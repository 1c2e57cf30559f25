"""Loading a frozen DeiT teacher for the trainer's `--teacher` and `--teacher_weights`.

A teacher is a `.keras` file, a SavedModel directory (wrapped as a
`SavedModelTeacher`) or a keras_vit variant name with an optional checkpoint;
`check_teacher_spec` checks the flags without loading a model (for the config
checks) and `load_teacher` loads one that fits the student's classes and images.
The distillation itself (losses, `Distiller`) is in `train.distillation`.
"""

import difflib
import os
import zipfile

import keras
from keras import ops

import keras_vit
from train import files


def _fail_teacher(message, spec):
    raise ValueError(f"--teacher {message} Received: teacher={spec!r}")


def _is_saved_model(path):
    return files.isdir(path) and files.exists(os.path.join(path, "saved_model.pb"))


def _keras_archive_problem(path):
    """Why the file at `path` is not a `.keras` archive (a zip holding `config.json`), or None if it is one."""
    try:
        with files.open_file(path, "rb") as f, zipfile.ZipFile(f) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile:
        return "not a zip archive, as model.save writes a .keras file"
    except OSError as error:
        return error.strerror or str(error)
    return None if "config.json" in names else "a zip archive without the model's config.json"


def check_teacher_spec(spec, weights=None):
    """Checks `--teacher`/`--teacher_weights` without loading a model (for the config checks).

    A `.keras` file must exist and be a zip archive holding a model's
    `config.json`; only its directory is read.

    Args:
        spec: str. A `.keras` file, a SavedModel directory or a keras_vit
            variant name.
        weights: str or None. A checkpoint for a variant-name teacher.

    Returns:
        `"keras"`, `"saved_model"` or `"variant"`.
    """
    if not isinstance(spec, str) or not spec:
        _fail_teacher("must be a .keras file, a SavedModel directory or a keras_vit variant name.", spec)
    if spec in keras_vit.VARIANTS:
        kind = "variant"
    elif spec.endswith(".keras"):
        if not files.isfile(spec):
            _fail_teacher("names a .keras file that does not exist.", spec)
        # Keras reports a damaged file as "File not found".
        problem = _keras_archive_problem(spec)
        if problem:
            _fail_teacher(f"names a file that exists but is not a readable .keras file ({problem}).", spec)
        kind = "keras"
    elif files.isdir(spec):
        if not _is_saved_model(spec):
            _fail_teacher("names a directory without saved_model.pb (not a SavedModel).", spec)
        kind = "saved_model"
    elif os.sep in spec or "://" in spec or files.exists(spec):
        _fail_teacher("names a path that does not exist or is neither a .keras file nor a SavedModel.", spec)
    else:
        hint = difflib.get_close_matches(spec, sorted(keras_vit.VARIANTS), n=1)
        _fail_teacher(
            "is neither an existing .keras file or SavedModel nor a keras_vit variant name."
            f"{f' Did you mean {hint[0]!r}?' if hint else ''}",
            spec,
        )
    if weights is not None and kind != "variant":
        raise ValueError(
            "--teacher_weights applies only to a teacher named by its variant (e.g. 'ViT_S16'); a .keras file "
            f"or SavedModel carries its own weights. Received: teacher={spec!r}, teacher_weights={weights!r}"
        )
    if weights is not None and not (isinstance(weights, str) and weights):
        raise ValueError(f"--teacher_weights must be a checkpoint file or name. Received: teacher_weights={weights!r}")
    return kind


class SavedModelTeacher(keras.layers.Layer):
    """A SavedModel's serving function as a frozen Keras layer returning logits.

    The endpoint is `serve` (`model.export`, `keras.export.ExportArchive`, the
    trainer's `saved_model/`) or else the `serving_default` signature. An
    endpoint taking uint8 images gets the float batch rounded and clipped to
    [0, 255]. An endpoint returning probabilities (the trainer's export does)
    gets their logarithm, a logit vector with the same softmax and argmax.
    On TensorFlow the function is called directly; on JAX through
    `jax2tf.call_tf`, which compiles it with XLA inside the jitted step.

    Args:
        path: str. The SavedModel directory.
        name: str. Defaults to `"saved_model_teacher"`.
    """

    def __init__(self, path, name="saved_model_teacher", **kwargs):
        super().__init__(name=name, trainable=False, **kwargs)
        import tensorflow as tf

        self.filepath = path
        self._loaded = tf.saved_model.load(path)
        function, spec = _serving_endpoint(self._loaded, path)
        self.image_shape = tuple(spec.shape)
        self.image_dtype = spec.dtype

        def logits(images):
            images = tf.convert_to_tensor(images)
            if self.image_dtype.is_integer:
                images = tf.cast(tf.clip_by_value(tf.round(images), 0, self.image_dtype.max), self.image_dtype)
            else:
                images = tf.cast(images, self.image_dtype)
            return tf.cast(function(images), tf.float32)

        self._tf_logits = logits
        probe = logits(tf.stack([tf.zeros(self.image_shape[1:]), tf.fill(self.image_shape[1:], 127.0)]))
        self.num_classes = int(probe.shape[-1])
        # A logit vector with entries in [0, 1] summing to 1 on two inputs is no accident.
        self.returns_probabilities = bool(
            tf.reduce_all((probe >= 0) & (probe <= 1))
            and tf.reduce_all(tf.abs(tf.reduce_sum(probe, axis=-1) - 1) < 1e-3)
        )
        if keras.backend.backend() == "jax":
            from jax.experimental import jax2tf

            self._call_fn = jax2tf.call_tf(logits)
        else:
            self._call_fn = logits
        # No Keras weights to create: the SavedModel holds its own variables.
        self.built = True

    def call(self, inputs, training=False):
        outputs = self._call_fn(inputs)
        if self.returns_probabilities:
            outputs = ops.log(ops.maximum(outputs, 1e-30))
        return outputs

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_classes)


def _serving_endpoint(loaded, path):
    """`(function of one image batch returning one tensor, its input TensorSpec)`.

    A SavedModel serving photos of any size (the trainer's, with its evaluation transform
    inside) also has `serve_prepared`, the model on images of its own input: the teacher
    takes that one, since the student's batches are already prepared (augmented, resized).
    """
    for name in ("serve_prepared", "serve"):
        if not hasattr(loaded, name):
            continue
        function = getattr(loaded, name)
        concrete = function.concrete_functions[0] if hasattr(function, "concrete_functions") else function
        args, kwargs = concrete.structured_input_signature
        specs = list(args) + list(kwargs.values())
        if len(specs) == 1:
            return function, specs[0]
    signature = getattr(loaded, "signatures", {}).get("serving_default")
    if signature is not None:
        _, kwargs = signature.structured_input_signature
        if len(kwargs) == 1:
            (key, spec), = kwargs.items()

            def call(images):
                outputs = signature(**{key: images})
                return next(iter(outputs.values())) if isinstance(outputs, dict) else outputs

            return call, spec
    _fail_teacher("names a SavedModel without a one-input 'serve' endpoint or 'serving_default' signature.", path)


def load_teacher(spec, weights=None, *, num_classes, image_size, channels):
    """Loads a frozen teacher that fits the student's classes and images.

    Args:
        spec: str. A `.keras` file, a SavedModel directory (wrapped as a
            `SavedModelTeacher`), or a keras_vit variant name such as
            `"ViT_S16"` (built for `num_classes`, `image_size`, `channels`).
        weights: str or None. A checkpoint file or known name for a variant
            teacher; every weight must load, head included (a teacher with a
            freshly initialized head would teach noise). Defaults to None
            (random weights: only for tests).
        num_classes: int. The student's classes.
        image_size: int or `(height, width)`. The student's input size.
        channels: int. The student's image channels.

    Returns:
        A `keras.Model` or layer, `trainable=False`, mapping the student's
        images (float, [0, 255]) to logits.

    Raises:
        ValueError: one line naming `--teacher` for a missing path, an unknown
            name, or a teacher whose classes or input size differ (saying what
            differs).
    """
    kind = check_teacher_spec(spec, weights)
    size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    if kind == "variant":
        teacher = keras_vit.build_variant(spec, image_size=size, num_classes=num_classes, num_channels=channels)
        if weights is not None:
            report = keras_vit.load_weights(teacher, weights)
            if report.missing:
                left = ", ".join(name for name, _ in report.missing)
                raise ValueError(
                    f"--teacher_weights does not hold every weight of the {spec} teacher for {num_classes} classes "
                    f"(left initialized: {left}); a teacher needs a trained head for the student's classes. "
                    f"Received: teacher={spec!r}, teacher_weights={weights!r}"
                )
    elif kind == "keras":
        teacher = keras.saving.load_model(spec, compile=False)
        _check_fits(spec, teacher.input_shape, teacher.output_shape[-1], size, channels, num_classes)
    else:
        teacher = SavedModelTeacher(spec)
        _check_fits(spec, teacher.image_shape, teacher.num_classes, size, channels, num_classes)
    teacher.trainable = False
    return teacher


def _check_fits(spec, input_shape, teacher_classes, size, channels, num_classes):
    if isinstance(input_shape, list):
        _fail_teacher(f"must take one image input. It takes {len(input_shape)} inputs.", spec)
    differences = []
    if teacher_classes != num_classes:
        differences.append(f"it outputs {teacher_classes} classes, the student {num_classes}")
    teacher_size = tuple(input_shape[1:3])
    if any(d is not None and d != s for d, s in zip(teacher_size, size)):
        differences.append(f"it takes {teacher_size[0]}x{teacher_size[1]} images, the student {size[0]}x{size[1]}")
    if input_shape[3] is not None and input_shape[3] != channels:
        differences.append(f"it takes {input_shape[3]} channels, the student {channels}")
    if differences:
        _fail_teacher(f"does not fit the student: {'; '.join(differences)}.", spec)

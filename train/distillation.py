"""DeiT knowledge distillation: the losses, a `Distiller` model, and loading a teacher.

Touvron et al. 2021, "Training data-efficient image transformers & distillation
through attention", Sec. 4: a frozen teacher supervises the student next to the
true labels, either softly (Eq. 2, a tempered KL divergence) or through its hard
decision (Eq. 3). A two-head student (DeiT's class and distillation tokens) puts
the true-label loss on its class head and the teacher's term on its distillation
head; a one-head student takes both on its single head (Hinton et al. 2015).

`Distiller` overrides only `call`, `compute_loss` and `compute_metrics`, so Keras' own
`train_step` (TensorFlow and JAX) still does the optimizer, clipping, EMA,
`steps_per_execution` and the distribution; the teacher sees exactly the batch
the student sees, augmentations and MixUp/CutMix included.
"""

import difflib
import os

import keras
from keras import ops

import keras_vit
from train import files

DISTILLATION_TYPES = ("none", "hard", "soft")
# DeiT's released trainer defaults (`--distillation-alpha 0.5 --distillation-tau 1.0`);
# alpha = 0.5 makes the hard loss exactly the paper's Eq. 3.
DEFAULT_TAU = 1.0
DEFAULT_ALPHA = 0.5
# Layer names of the two-head (distilled) student's heads.
CLASS_HEAD = "head"
DISTILLATION_HEAD = "head_dist"


def check_distillation_arguments(distillation, tau, alpha):
    """Raises a one-line `ValueError` for a bad distillation type, temperature or weight.

    Args:
        distillation: str. One of `DISTILLATION_TYPES`.
        tau: float. The temperature, > 0.
        alpha: float. The weight of the teacher's term, in [0, 1].
    """
    if distillation not in DISTILLATION_TYPES:
        raise ValueError(
            f"`distillation` must be one of {DISTILLATION_TYPES}. Received: distillation={distillation!r}"
        )
    if not _is_number(tau) or tau <= 0:
        raise ValueError(f"`tau` (the distillation temperature) must be a number > 0. Received: tau={tau!r}")
    if not _is_number(alpha) or not 0 <= alpha <= 1:
        raise ValueError(f"`alpha` (the teacher's weight) must be a number in [0, 1]. Received: alpha={alpha!r}")


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---- losses -------------------------------------------------------------------


class TemperedKLDivergence(keras.losses.Loss):
    """`tau^2 KL(softmax(z_t / tau) || softmax(z_s / tau))` per example (DeiT Eq. 2).

    Computed from log-softmaxes, so that no probability is clipped. The `tau^2`
    keeps the gradient's scale independent of the temperature (Hinton et al.
    2015, Sec. 2). Being a `keras.losses.Loss`, it is reduced over the batch
    and scaled for `tf.distribute` as the true-label loss is.

    Args:
        tau: float. The temperature. Defaults to 1.0.
        mean_over_classes: bool. Divide by the number of classes too, as DeiT's
            released code does (`reduction="sum"` over `numel()`; the authors
            report similar accuracy either way, facebookresearch/deit#61).
            Defaults to `False`: the batch mean of the per-example KL, Eq. 2.
        name: str. Defaults to `"tempered_kl_divergence"`.
    """

    def __init__(self, tau=DEFAULT_TAU, mean_over_classes=False, name="tempered_kl_divergence", **kwargs):
        super().__init__(name=name, **kwargs)
        self.tau = tau
        self.mean_over_classes = mean_over_classes

    def call(self, teacher_logits, student_logits):
        log_teacher = ops.log_softmax(teacher_logits / self.tau, axis=-1)
        log_student = ops.log_softmax(student_logits / self.tau, axis=-1)
        divergence = ops.sum(ops.exp(log_teacher) * (log_teacher - log_student), axis=-1) * (self.tau**2)
        if self.mean_over_classes:
            divergence = divergence / ops.cast(ops.shape(student_logits)[-1], divergence.dtype)
        return divergence

    def get_config(self):
        return {**super().get_config(), "tau": self.tau, "mean_over_classes": self.mean_over_classes}


def _split_heads(student_logits):
    """`(class logits, distillation logits)`; a one-head student's logits serve as both."""
    if isinstance(student_logits, (tuple, list)):
        if len(student_logits) != 2:
            raise ValueError(
                "`student_logits` must be one tensor (a one-head student) or a pair "
                f"(class head, distillation head). Received: {len(student_logits)} tensors"
            )
        return tuple(student_logits)
    return student_logits, student_logits


def _label_loss(label_loss):
    # The trainer's true-label loss; DeiT's is soft-target cross-entropy (MixUp/CutMix) or smoothed CE.
    return label_loss if label_loss is not None else keras.losses.CategoricalCrossentropy(from_logits=True)


def soft_distillation_loss(labels, student_logits, teacher_logits, *, tau=DEFAULT_TAU, alpha=DEFAULT_ALPHA,
                           label_loss=None, sample_weight=None, mean_over_classes=False):
    """DeiT's soft distillation objective (Eq. 2).

    `(1 - alpha) CE(class head, labels) + alpha tau^2 KL(softmax(z_t / tau) || softmax(z_s / tau))`,
    with `z_s` the distillation head's logits (or the single head's).

    Args:
        labels: tensor `(batch, classes)`. True labels, one-hot or soft
            (MixUp/CutMix mixtures).
        student_logits: tensor `(batch, classes)` of a one-head student, or a
            pair `(class head logits, distillation head logits)`.
        teacher_logits: tensor `(batch, classes)`. Not differentiated.
        tau: float. The temperature. Defaults to 1.0.
        alpha: float. The teacher's weight, in [0, 1]. Defaults to 0.5.
        label_loss: callable `(y_true, y_pred, sample_weight)` returning a scalar:
            the true-label loss. Defaults to
            `keras.losses.CategoricalCrossentropy(from_logits=True)`; pass the
            trainer's, label smoothing included.
        sample_weight: optional tensor `(batch,)`.
        mean_over_classes: bool. See `TemperedKLDivergence`. Defaults to `False`.

    Returns:
        A scalar tensor.
    """
    check_distillation_arguments("soft", tau, alpha)
    class_logits, distillation_logits = _split_heads(student_logits)
    teacher_logits = ops.stop_gradient(teacher_logits)
    divergence = TemperedKLDivergence(tau, mean_over_classes=mean_over_classes)
    return ((1.0 - alpha) * _label_loss(label_loss)(labels, class_logits, sample_weight)
            + alpha * divergence(teacher_logits, distillation_logits, sample_weight))


def hard_distillation_loss(labels, student_logits, teacher_logits, *, alpha=DEFAULT_ALPHA, label_loss=None,
                           sample_weight=None):
    """DeiT's hard-label distillation objective (Eq. 3; `alpha = 0.5` is the paper's).

    `(1 - alpha) CE(class head, labels) + alpha CE(distillation head, argmax z_t)`.
    The teacher's decision is a plain one-hot target, never smoothed (DeiT's
    code uses an unsmoothed cross-entropy on it), while the true-label loss is
    whatever `label_loss` is.

    Args:
        labels: tensor `(batch, classes)`. True labels, one-hot or soft.
        student_logits: tensor `(batch, classes)` of a one-head student, or a
            pair `(class head logits, distillation head logits)`.
        teacher_logits: tensor `(batch, classes)`. Only its argmax is used.
        alpha: float. The teacher's weight, in [0, 1]. Defaults to 0.5.
        label_loss: callable `(y_true, y_pred, sample_weight)`: the true-label
            loss. Defaults to `keras.losses.CategoricalCrossentropy(from_logits=True)`.
        sample_weight: optional tensor `(batch,)`.

    Returns:
        A scalar tensor.
    """
    check_distillation_arguments("hard", DEFAULT_TAU, alpha)
    class_logits, distillation_logits = _split_heads(student_logits)
    teacher_labels = ops.stop_gradient(ops.argmax(teacher_logits, axis=-1))
    teacher_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return ((1.0 - alpha) * _label_loss(label_loss)(labels, class_logits, sample_weight)
            + alpha * teacher_loss(teacher_labels, distillation_logits, sample_weight))


# ---- the model ------------------------------------------------------------------


def distillation_heads(student):
    """A model from the student's inputs to `[class logits, distillation logits]`, or None.

    The two-head student is a functional model with Dense heads named `"head"`
    and `"head_dist"`, whose output is their average; a student without
    `"head_dist"` has one head (None). The returned model shares the student's
    layers and weights.

    Args:
        student: `keras.Model`.
    """
    # To be replaced by `keras_vit.distillation_heads` once keras_vit provides it.
    provided = getattr(keras_vit, "distillation_heads", None)
    if provided is not None:
        return provided(student) if _has_layer(student, DISTILLATION_HEAD) else None
    if not _has_layer(student, DISTILLATION_HEAD):
        return None
    if not _has_layer(student, CLASS_HEAD):
        raise ValueError(
            f"A student with a {DISTILLATION_HEAD!r} layer needs a class head named {CLASS_HEAD!r} too. "
            f"Received: student={student.name!r}"
        )
    heads = [student.get_layer(CLASS_HEAD).output, student.get_layer(DISTILLATION_HEAD).output]
    return keras.Model(student.inputs, heads, name=f"{student.name}_heads")


def _has_layer(model, name):
    return any(layer.name == name for layer in model.layers)


class Distiller(keras.Model):
    """A student trained against a frozen teacher (DeiT Sec. 4); Keras' `fit` does the rest.

    In training, `call` returns the student's `(class, distillation)` head
    logits (one head counted twice for a one-head student) and `compute_loss`
    runs the teacher, in inference mode, on the same batch. Metrics see the
    average of the heads, the student's output. Outside training, `call` is the
    student's own output and the loss is the compiled (true-label) loss alone,
    so `evaluate` reports what a plain run reports and never runs the teacher.

    Compile it as the student would be compiled: the compiled `loss` (a
    callable such as `CategoricalCrossentropy(from_logits=True,
    label_smoothing=...)`; anything else falls back to that loss without
    smoothing) is the true-label term, the metrics are on the
    student's output. Export `distiller.student`. `save_weights` writes the
    student's weights, then the teacher's (Keras' layout for sub-models,
    `layers/functional/...` and `layers/functional_1/...`), so that
    `load_weights` into a Distiller of the same student and teacher restores
    both; the optimizer's variables are only the student's.

    Args:
        student: `keras.Model` returning logits; two heads as described in
            `distillation_heads`, or one.
        teacher: `keras.Model` or layer returning logits for the same images
            and classes. It is set `trainable=False`.
        distillation: str. `"hard"` (Eq. 3) or `"soft"` (Eq. 2). Defaults to
            `"hard"`, DeiT's best.
        tau: float. Temperature of the soft loss. Defaults to 1.0.
        alpha: float. The teacher's weight in [0, 1]. Defaults to 0.5.
        mean_over_classes: bool. The soft loss as DeiT's code reduces it (see
            `TemperedKLDivergence`). Defaults to `False`.
        name: str. Defaults to `"distiller"`.
    """

    def __init__(self, student, teacher, distillation="hard", tau=DEFAULT_TAU, alpha=DEFAULT_ALPHA,
                 mean_over_classes=False, name="distiller", **kwargs):
        check_distillation_arguments(distillation, tau, alpha)
        if distillation == "none":
            raise ValueError(
                "A Distiller needs `distillation='hard'` or `'soft'`; train the student alone for 'none'. "
                f"Received: distillation={distillation!r}"
            )
        super().__init__(name=name, **kwargs)
        self.student = student
        self.teacher = teacher
        self.teacher.trainable = False
        heads = distillation_heads(student)
        # Held as a plain callable, not a tracked sublayer: its weights are the
        # student's, and `save_weights` should write them once, as the student's.
        self._heads = None if heads is None else heads.__call__
        self.distillation = distillation
        self.tau = tau
        self.alpha = alpha
        self.mean_over_classes = mean_over_classes
        # It owns no weights of its own: built as soon as its parts are, so that a
        # resumed run can `load_weights` before its first step.
        self.built = student.built and teacher.built

    def call(self, inputs, training=False):
        if not training:
            return self.student(inputs, training=False)
        if self._heads is None:
            logits = self.student(inputs, training=True)
            # A student that itself returns both heads in training (DeiT's own layout).
            if isinstance(logits, (tuple, list)) and len(logits) == 2:
                return tuple(logits)
            return logits, logits
        class_logits, distillation_logits = self._heads(inputs, training=True)
        return class_logits, distillation_logits

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not training:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        teacher_logits = ops.stop_gradient(self.teacher(x, training=False))
        label_loss = self.loss if callable(self.loss) else None
        if self.distillation == "hard":
            loss = hard_distillation_loss(y, y_pred, teacher_logits, alpha=self.alpha, label_loss=label_loss,
                                          sample_weight=sample_weight)
        else:
            loss = soft_distillation_loss(y, y_pred, teacher_logits, tau=self.tau, alpha=self.alpha,
                                          label_loss=label_loss, sample_weight=sample_weight,
                                          mean_over_classes=self.mean_over_classes)
        # The student's own regularization losses (`add_loss`), as the default compute_loss adds them.
        for extra in self.losses:
            loss = loss + self._aggregate_additional_loss(extra)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if isinstance(y_pred, (tuple, list)):
            # The student's output is the heads' average (DeiT's inference rule).
            y_pred = (y_pred[0] + y_pred[1]) / 2
        return super().compute_metrics(x, y, y_pred, sample_weight)


# ---- loading the teacher ------------------------------------------------------------


def _fail_teacher(message, spec):
    raise ValueError(f"--teacher {message} Received: teacher={spec!r}")


def _is_saved_model(path):
    return files.isdir(path) and files.exists(os.path.join(path, "saved_model.pb"))


def check_teacher_spec(spec, weights=None):
    """Checks `--teacher`/`--teacher_weights` without loading anything (for the config checks).

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
    """`(function of one image batch returning one tensor, its input TensorSpec)`."""
    if hasattr(loaded, "serve"):
        function = loaded.serve
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

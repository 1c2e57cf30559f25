"""DeiT knowledge distillation: the losses and a `Distiller` model.

Touvron et al. 2021, "Training data-efficient image transformers & distillation
through attention", Sec. 4: a frozen teacher supervises the student next to the
true labels, either softly (Eq. 2, a tempered KL divergence) or through its hard
decision (Eq. 3). A two-head student (DeiT's class and distillation tokens) puts
the true-label loss on its class head and the teacher's term on its distillation
head; a one-head student takes both on its single head (Hinton et al. 2015).

`Distiller` overrides only `call`, `compute_loss` and `compute_metrics`, so Keras' own
`train_step` (TensorFlow and JAX) still does the optimizer, clipping, EMA,
`steps_per_execution` and the distribution; the teacher sees exactly the batch
the student sees, augmentations and MixUp/CutMix included. Loading the teacher
is `train.teachers`.
"""

import keras
from keras import ops

import keras_vit
from keras_vit.models.distillation import DISTILLATION_HEAD

DISTILLATION_TYPES = ("none", "hard", "soft")
# DeiT's released trainer defaults (`--distillation-alpha 0.5 --distillation-tau 1.0`);
# alpha = 0.5 makes the hard loss exactly the paper's Eq. 3.
DEFAULT_TAU = 1.0
DEFAULT_ALPHA = 0.5


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
        student: `keras.Model` returning logits: a two-head student (Dense
            layers `"head"` and `"head_dist"`, averaged, as the distilled DeiT
            builders make; see `keras_vit.distillation_heads`), or one head.
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
        # A student without a distillation head has one head, which takes both terms.
        heads = keras_vit.distillation_heads(student) if _has_layer(student, DISTILLATION_HEAD) else None
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

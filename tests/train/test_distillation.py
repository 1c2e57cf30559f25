"""DeiT distillation: the losses against numpy, the Distiller in `fit`, teacher loading (train.teachers)."""

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import distillation_heads
from tests.testing import np_softmax, to_numpy
from train.distillation import Distiller, hard_distillation_loss, soft_distillation_loss
from train.teachers import SavedModelTeacher, check_teacher_spec, load_teacher

CLASSES = 5
SIZE = 8
CHANNELS = 3
# The losses reduce a few logsumexps of O(1) float32 values: agreement to ~1e-6
# relative; 1e-5 leaves room for the backends' different reduction orders.
RTOL = 1e-5


# ---- numpy references -----------------------------------------------------------


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_cross_entropy(labels, logits, smoothing=0.0, weights=None):
    """Keras' categorical CE from logits, smoothing the labels towards uniform, mean over the batch."""
    labels = labels * (1 - smoothing) + smoothing / labels.shape[-1]
    per_example = -(labels * np_log_softmax(logits)).sum(-1)
    return _batch_mean(per_example, weights)


def np_kl(teacher_logits, student_logits, tau, weights=None):
    p = np_softmax(teacher_logits / tau)
    per_example = (p * (np.log(p) - np_log_softmax(student_logits / tau))).sum(-1) * tau**2
    return _batch_mean(per_example, weights)


def _batch_mean(per_example, weights):
    # Keras' "sum_over_batch_size": weighted sum over the batch size.
    return (per_example * (1 if weights is None else weights)).sum() / per_example.shape[0]


def _logits(seed, batch=6):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 2.0, (batch, CLASSES)).astype("float32")


def _soft_labels(batch=6):
    """MixUp-style mixtures of two one-hot labels."""
    rng = np.random.default_rng(7)
    eye = np.eye(CLASSES, dtype="float32")
    lam = rng.uniform(0, 1, (batch, 1)).astype("float32")
    return lam * eye[rng.integers(0, CLASSES, batch)] + (1 - lam) * eye[rng.integers(0, CLASSES, batch)]


# ---- the losses -------------------------------------------------------------------


@pytest.mark.parametrize("two_heads", [True, False])
@pytest.mark.parametrize("tau, alpha", [(1.0, 0.5), (3.0, 0.1), (0.5, 0.9), (2.0, 0.0), (1.0, 1.0)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_soft_loss_matches_numpy(two_heads, tau, alpha, smoothing):
    labels, class_logits, dist_logits, teacher = _soft_labels(), _logits(1), _logits(2), _logits(3)
    student = (class_logits, dist_logits) if two_heads else class_logits
    kl_logits = dist_logits if two_heads else class_logits
    label_loss = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    got = soft_distillation_loss(labels, student, teacher, tau=tau, alpha=alpha, label_loss=label_loss)
    expected = (1 - alpha) * np_cross_entropy(labels, class_logits, smoothing) + alpha * np_kl(
        teacher, kl_logits, tau
    )
    np.testing.assert_allclose(to_numpy(got), expected, rtol=RTOL)


@pytest.mark.parametrize("two_heads", [True, False])
@pytest.mark.parametrize("alpha", [0.5, 0.25])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_hard_loss_matches_numpy(two_heads, alpha, smoothing):
    labels, class_logits, dist_logits, teacher = _soft_labels(), _logits(1), _logits(2), _logits(3)
    student = (class_logits, dist_logits) if two_heads else class_logits
    teacher_head = dist_logits if two_heads else class_logits
    label_loss = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    got = hard_distillation_loss(labels, student, teacher, alpha=alpha, label_loss=label_loss)
    # The teacher's decision is one-hot and never smoothed.
    teacher_labels = np.eye(CLASSES, dtype="float32")[teacher.argmax(-1)]
    expected = (1 - alpha) * np_cross_entropy(labels, class_logits, smoothing) + alpha * np_cross_entropy(
        teacher_labels, teacher_head
    )
    np.testing.assert_allclose(to_numpy(got), expected, rtol=RTOL)


def test_default_hard_loss_is_deit_equation_3():
    labels, class_logits, dist_logits, teacher = _soft_labels(), _logits(1), _logits(2), _logits(3)
    got = hard_distillation_loss(labels, (class_logits, dist_logits), teacher)
    expected = 0.5 * np_cross_entropy(labels, class_logits) + 0.5 * np_cross_entropy(
        np.eye(CLASSES)[teacher.argmax(-1)], dist_logits
    )
    np.testing.assert_allclose(to_numpy(got), expected, rtol=RTOL)


def test_losses_weight_examples_and_deit_reduction():
    labels, class_logits, dist_logits, teacher = _soft_labels(), _logits(1), _logits(2), _logits(3)
    weights = np.linspace(0.0, 1.0, 6).astype("float32")
    got = soft_distillation_loss(labels, (class_logits, dist_logits), teacher, tau=2.0, alpha=0.3,
                                 sample_weight=weights)
    expected = 0.7 * np_cross_entropy(labels, class_logits, weights=weights) + 0.3 * np_kl(
        teacher, dist_logits, 2.0, weights
    )
    np.testing.assert_allclose(to_numpy(got), expected, rtol=RTOL)
    # DeiT's released code also divides the KL by the number of classes.
    got = soft_distillation_loss(labels, (class_logits, dist_logits), teacher, tau=2.0, alpha=1.0,
                                 mean_over_classes=True)
    np.testing.assert_allclose(to_numpy(got), np_kl(teacher, dist_logits, 2.0) / CLASSES, rtol=RTOL)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"tau": 0.0}, "tau=0.0"), ({"alpha": 1.5}, "alpha=1.5"), ({"tau": True}, "tau=True")],
)
def test_bad_loss_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        soft_distillation_loss(_soft_labels(), _logits(1), _logits(2), **kwargs)


# ---- tiny models ----------------------------------------------------------------------


def tiny_teacher(classes=CLASSES, size=SIZE, channels=CHANNELS, name="teacher"):
    """A small CNN classifier of [0, 255] images."""
    inputs = keras.Input((size, size, channels))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(4, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(classes)(x), name=name)


def tiny_student(two_heads=True, name="student"):
    """The two-head layout of a distilled DeiT (Dense `head`, `head_dist`, averaged), or one head."""
    inputs = keras.Input((SIZE, SIZE, CHANNELS))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(8, activation="gelu")(x)
    head = keras.layers.Dense(CLASSES, name="head")(x)
    if not two_heads:
        return keras.Model(inputs, head, name=name)
    head_dist = keras.layers.Dense(CLASSES, name="head_dist")(x)
    return keras.Model(inputs, keras.layers.Average()([head, head_dist]), name=name)


def _data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 255, (n, SIZE, SIZE, CHANNELS)).astype("float32")
    return images, _soft_labels(n)


def _compiled(distiller, steps_per_execution=1):
    distiller.compile(
        optimizer=keras.optimizers.AdamW(1e-2, global_clipnorm=1.0, use_ema=True, ema_momentum=0.9),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
        metrics=[keras.metrics.CategoricalAccuracy(name="accuracy")],
        steps_per_execution=steps_per_execution,
    )
    return distiller


def _weights(model):
    return [to_numpy(w).copy() for w in model.weights]


@pytest.mark.parametrize("distillation, two_heads", [("hard", True), ("soft", True), ("soft", False)])
def test_fit_trains_the_student_and_never_the_teacher(distillation, two_heads):
    student, teacher = tiny_student(two_heads), tiny_teacher()
    distiller = _compiled(Distiller(student, teacher, distillation, tau=2.0, alpha=0.5), steps_per_execution=2)
    teacher_before, student_before = _weights(teacher), _weights(student)
    images, labels = _data()
    history = distiller.fit(images, labels, batch_size=8, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0]) and "accuracy" in history
    assert not teacher.trainable and len(distiller.trainable_variables) == len(student.trainable_variables)
    for before, after in zip(teacher_before, _weights(teacher)):
        np.testing.assert_array_equal(before, after)
    assert all(not np.array_equal(b, a) for b, a in zip(student_before, _weights(student)))
    # The exported model is the student alone; it predicts the average of its heads.
    predicted = distiller.student.predict(images[:4], verbose=0)
    if two_heads:
        class_logits, dist_logits = distillation_heads(distiller.student)(images[:4])
        np.testing.assert_allclose(predicted, (to_numpy(class_logits) + to_numpy(dist_logits)) / 2, atol=1e-6)
    np.testing.assert_allclose(distiller.predict(images[:4], verbose=0), predicted, atol=1e-6)
    # Evaluation is the true-label loss of the student's output: no teacher.
    results = distiller.evaluate(images, labels, batch_size=8, verbose=0, return_dict=True)
    expected = np_cross_entropy(labels, distiller.student.predict(images, verbose=0), smoothing=0.1)
    np.testing.assert_allclose(results["loss"], expected, rtol=1e-4)


def test_training_loss_is_the_distillation_loss():
    student, teacher = tiny_student(), tiny_teacher()
    distiller = _compiled(Distiller(student, teacher, "soft", tau=3.0, alpha=0.1))
    images, labels = _data(8)
    heads = distiller(images, training=True)
    got = distiller.compute_loss(images, labels, heads, training=True)
    class_logits, dist_logits = (to_numpy(h) for h in heads)
    teacher_logits = to_numpy(teacher(images))
    expected = 0.9 * np_cross_entropy(labels, class_logits, 0.1) + 0.1 * np_kl(teacher_logits, dist_logits, 3.0)
    np.testing.assert_allclose(to_numpy(got), expected, rtol=RTOL)


def test_distiller_uses_the_heads_of_a_keras_vit_distilled_student():
    # The two heads come from keras_vit.distillation_heads: the trainer keeps no copy of it.
    student = keras_vit.VisionTransformer(image_size=SIZE, patch_size=4, hidden_size=8, num_layers=1, num_heads=2,
                                          mlp_dim=16, num_classes=CLASSES, distillation=True)
    distiller = Distiller(student, tiny_teacher(), "hard")
    images, _ = _data(4)
    got = distiller(images, training=True)
    expected = distillation_heads(student)(images, training=True)
    for head, reference in zip(got, expected):
        np.testing.assert_allclose(to_numpy(head), to_numpy(reference), atol=1e-6)


def test_distiller_refuses_a_distillation_head_without_a_class_head():
    inputs = keras.Input((SIZE, SIZE, CHANNELS))
    x = keras.layers.Flatten()(inputs)
    student = keras.Model(inputs, keras.layers.Dense(CLASSES, name="head_dist")(x), name="student")
    with pytest.raises(ValueError, match=r"`model` has no distillation head.*missing \['head'\]"):
        Distiller(student, tiny_teacher(), "hard")


def test_each_part_has_one_home():
    import train.distillation

    assert not hasattr(train.distillation, "distillation_heads")  # keras_vit.distillation_heads
    assert not hasattr(train.distillation, "load_teacher")  # train.teachers


def test_distiller_refuses_none_and_bad_arguments():
    with pytest.raises(ValueError, match="distillation='none'"):
        Distiller(tiny_student(), tiny_teacher(), "none")
    with pytest.raises(ValueError, match="distillation='medium'"):
        Distiller(tiny_student(), tiny_teacher(), "medium")


def test_resumed_run_equals_an_uninterrupted_one(tmp_path):
    """What the trainer checkpoints (`save_weights` + every optimizer variable) resumes exactly."""
    images, labels = _data(32)
    path = str(tmp_path / "model.weights.h5")
    saved = {}

    class SaveAtStep2(keras.callbacks.Callback):
        # As the trainer's checkpoint callback does: mid-fit, before `fit` swaps in the EMA weights.
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                self.model.save_weights(path)
                saved["optimizer"] = [to_numpy(v).copy() for v in self.model.optimizer.variables]
                saved["weights"] = _weights(self.model)

    def fresh(seed):
        keras.utils.set_random_seed(seed)
        return _compiled(Distiller(tiny_student(), tiny_teacher(), "hard"))

    whole = fresh(0)
    whole.fit(images, labels, batch_size=8, epochs=1, shuffle=False, verbose=0, callbacks=[SaveAtStep2()])

    resumed = fresh(1)  # other initial weights: everything must come from the checkpoint
    resumed.optimizer.build(resumed.trainable_variables)
    resumed.load_weights(path)
    for expected, got in zip(saved["weights"], _weights(resumed)):
        np.testing.assert_array_equal(expected, got)
    for variable, value in zip(resumed.optimizer.variables, saved["optimizer"]):
        variable.assign(value)
    resumed.fit(images[16:], labels[16:], batch_size=8, epochs=1, shuffle=False, verbose=0)
    for expected, got in zip(_weights(whole), _weights(resumed)):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    for expected, got in zip(whole.optimizer.variables, resumed.optimizer.variables):
        np.testing.assert_allclose(to_numpy(got), to_numpy(expected), rtol=1e-6, atol=1e-7)


# ---- loading the teacher ---------------------------------------------------------------


def _load(spec, weights=None, classes=CLASSES, size=SIZE, channels=CHANNELS):
    return load_teacher(spec, weights, num_classes=classes, image_size=size, channels=channels)


def test_teacher_from_a_keras_file(tmp_path):
    teacher = tiny_teacher()
    path = str(tmp_path / "teacher.keras")
    teacher.save(path)
    loaded = _load(path)
    assert not loaded.trainable
    images, _ = _data(4)
    np.testing.assert_allclose(to_numpy(loaded(images)), to_numpy(teacher(images)), atol=1e-6)


def _linear_saved_model(path, uint8_probabilities=False):
    """A SavedModel written with TensorFlow alone: a linear classifier of [0, 255] images.

    `uint8_probabilities` writes what the trainer's `export_saved_model` writes
    (uint8 images in, softmax out) under the `serving_default` signature.
    """
    import tensorflow as tf

    weights = np.random.default_rng(0).normal(0, 1, (SIZE * SIZE * CHANNELS, CLASSES)).astype("float32")

    class Linear(tf.Module):
        def __init__(self):
            super().__init__()
            self.kernel = tf.Variable(weights)

        def logits(self, images):
            return tf.reshape(tf.cast(images, tf.float32) / 255, (-1, SIZE * SIZE * CHANNELS)) @ self.kernel

    module = Linear()
    if uint8_probabilities:
        predict = tf.function(lambda images: tf.nn.softmax(module.logits(images)),
                              input_signature=[tf.TensorSpec((None, SIZE, SIZE, CHANNELS), tf.uint8)])
        tf.saved_model.save(module, path, signatures={"serving_default": predict})
    else:
        module.serve = tf.function(module.logits,
                                   input_signature=[tf.TensorSpec((None, SIZE, SIZE, CHANNELS), tf.float32)])
        tf.saved_model.save(module, path)
    return lambda images: images.reshape(len(images), -1) / 255 @ weights


@pytest.mark.parametrize("uint8_probabilities", [False, True])
def test_teacher_from_a_saved_model(tmp_path, uint8_probabilities):
    path = str(tmp_path / "saved_model")
    reference = _linear_saved_model(path, uint8_probabilities)
    teacher = _load(path)
    assert isinstance(teacher, SavedModelTeacher) and not teacher.trainable
    assert teacher.returns_probabilities == uint8_probabilities
    images, labels = _data(8)
    if uint8_probabilities:
        images = np.round(images)  # the endpoint sees uint8 pixels
    got = to_numpy(teacher(images))
    # Probabilities come back as log-probabilities: logits up to a per-example shift.
    np.testing.assert_allclose(np_softmax(got), np_softmax(reference(images)), atol=1e-5)
    # It teaches inside the jitted training step (through jax2tf.call_tf on JAX).
    distiller = _compiled(Distiller(tiny_student(), teacher, "soft"))
    history = distiller.fit(images, labels, batch_size=4, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0])


def test_a_saved_model_serving_photos_teaches_on_the_prepared_images(tmp_path):
    # The trainer's SavedModel takes photos of any size through its evaluation transform (here a
    # centre crop); a teacher must see the student's batches as they are: its `serve_prepared`.
    from keras_vit.preprocessing import EvalConfig, eval_transform

    model = tiny_teacher()
    path = str(tmp_path / "saved_model")
    crop = eval_transform(EvalConfig(image_size=SIZE, interpolation="bicubic", crop_fraction=0.5))
    keras_vit.export.saved_model(model, path, image_transform=crop)
    teacher = _load(path)
    assert teacher.image_shape == (None, SIZE, SIZE, CHANNELS) and teacher.returns_probabilities
    images, _ = _data(4)
    np.testing.assert_allclose(np_softmax(to_numpy(teacher(images))), np_softmax(to_numpy(model(images))),
                               atol=1e-5)


def test_teacher_from_a_variant_name_with_weights(tmp_path):
    trained = _load("ViT_Ti16", size=16)
    assert trained.input_shape == (None, 16, 16, CHANNELS) and trained.output_shape == (None, CLASSES)
    rng = np.random.default_rng(3)
    trained.set_weights([rng.normal(0, 0.02, w.shape).astype(w.dtype) for w in trained.get_weights()])
    path = str(tmp_path / "teacher.keras")
    trained.save(path)
    teacher = _load("ViT_Ti16", path, size=16)
    assert not teacher.trainable
    images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, CHANNELS)).astype("float32")
    np.testing.assert_allclose(to_numpy(teacher(images)), to_numpy(trained(images)), atol=1e-5)
    # Weights of another class count would leave the head untrained: refused.
    with pytest.raises(ValueError, match=r"^--teacher_weights does not hold every weight.*head"):
        _load("ViT_Ti16", path, classes=CLASSES + 1, size=16)


def test_bad_teacher_specs(tmp_path):
    keras_file = str(tmp_path / "teacher.keras")
    tiny_teacher().save(keras_file)
    empty_dir = tmp_path / "not_a_saved_model"
    empty_dir.mkdir()
    cases = [
        (dict(spec=str(tmp_path / "missing.keras")), "names a .keras file that does not exist"),
        (dict(spec=str(tmp_path / "missing_dir/")), "names a path that does not exist"),
        (dict(spec="ViT_S17"), r"nor a keras_vit variant name\. Did you mean 'ViT_S16'\?"),
        (dict(spec=str(empty_dir)), "without saved_model.pb"),
        (dict(spec=keras_file, classes=4), "does not fit the student: it outputs 5 classes, the student 4"),
        (dict(spec=keras_file, size=16), "it takes 8x8 images, the student 16x16"),
        (dict(spec=keras_file, channels=1), "it takes 3 channels, the student 1"),
    ]
    for kwargs, message in cases:
        spec = kwargs.pop("spec")
        with pytest.raises(ValueError, match=message) as error:
            _load(spec, **kwargs)
        text = str(error.value)
        assert text.startswith("--teacher ") and "\n" not in text and f"Received: teacher={spec!r}" in text
    with pytest.raises(ValueError, match=r"^--teacher_weights applies only to a teacher named by its variant"):
        check_teacher_spec(keras_file, "some.npz")

"""Masked patch prediction (ViT App. B.1.2) around the keras_vit encoders: what is corrupted, what is predicted, the loss."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_vit
from keras_vit import pretraining
from keras_vit.models.masked_patch_prediction import MaskedPatchPrediction
from tests.xla import xla_flags

TINY = dict(image_size=16, patch_size=4, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=16, num_classes=3)


def _images(n, seed=0):
    """Nearly uniform colour images: the mean-colour target is learnable from any patch."""
    rng = np.random.default_rng(seed)
    colors = rng.integers(0, 256, (n, 1, 1, 3))
    return np.clip(colors + rng.normal(0, 2, (n, 16, 16, 3)), 0, 255).astype("float32")


@pytest.mark.parametrize("encoder", [
    lambda: keras_vit.VisionTransformer(**TINY),
    lambda: keras_vit.VisionTransformer(**TINY, distillation=True),  # two leading tokens
    lambda: keras_vit.ConViT(**dict(TINY, num_layers=2, num_heads=4), num_gpsa_layers=1),  # class token after GPSA
    lambda: keras_vit.VisionTransformer(**dict(TINY, image_size=32, patch_size=1), resnet_stages=(1,)),  # hybrid
])
@pytest.mark.parametrize("target, shape", [("mean_color", (512,)), ("downsized", (16, 512)), ("pixels", None)])
def test_one_prediction_per_patch_for_every_encoder_and_target(encoder, target, shape):
    model = MaskedPatchPrediction(encoder(), target=target, seed=0)
    size = model.encoder.inputs[0].shape[1]
    patches = (size // model.target_patch_size) ** 2
    predictions, chosen = model(np.zeros((2, size, size, 3), "float32"))
    pixels = (model.target_patch_size**2 * 3,)
    assert tuple(predictions.shape) == (2, patches, *(shape or pixels))
    assert tuple(chosen.shape) == (2, patches)
    np.testing.assert_array_equal(ops.convert_to_numpy(chosen).sum(axis=1), patches // 2)


def test_corruption_comes_before_the_position_embeddings():
    # Every patch masked: the content is gone but each token keeps its position, so two different
    # images give the same predictions, which still differ from patch to patch.
    encoder = keras_vit.VisionTransformer(**TINY)
    model = MaskedPatchPrediction(encoder, corruption_rate=1.0, mask_rate=1.0, random_rate=0.0, seed=0)
    model.head.kernel.assign(np.random.default_rng(0).normal(size=model.head.kernel.shape))
    first, _ = model(_images(1, seed=1))
    second, _ = model(_images(1, seed=2))
    first, second = ops.convert_to_numpy(first), ops.convert_to_numpy(second)
    np.testing.assert_allclose(first, second, atol=1e-5)
    assert np.abs(first[0, 0] - first[0, 5]).max() > 1e-3


def test_loss_is_the_mean_over_corrupted_patches_only():
    model = MaskedPatchPrediction(keras_vit.VisionTransformer(**TINY), corruption_rate=0.25, seed=3)
    model.head.kernel.assign(np.random.default_rng(1).normal(size=model.head.kernel.shape) * 0.1)
    images = _images(3)
    predictions, chosen = model(images)
    loss = float(model.compute_loss(x=images, y_pred=(predictions, chosen)))
    logits = ops.convert_to_numpy(predictions).astype(np.float64)
    log_probs = logits - logits.max(-1, keepdims=True)
    log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
    targets = ops.convert_to_numpy(pretraining.mean_color_targets(images, 4))
    per_patch = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    mask = ops.convert_to_numpy(chosen)
    assert mask.sum() == 12  # 4 of 16 patches in each of 3 images
    np.testing.assert_allclose(loss, (per_patch * mask).sum() / mask.sum(), rtol=1e-5)


def test_pretraining_learns_and_the_encoder_fine_tunes_from_a_keras_file(tmp_path):
    encoder = keras_vit.VisionTransformer(**TINY)
    model = MaskedPatchPrediction(encoder, seed=0)
    initial = {w.path: ops.convert_to_numpy(w) for w in encoder.weights}
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(_images(64), epochs=12, batch_size=16, verbose=0).history["loss"]
    assert history[0] > 6.0 and history[-1] < history[0] - 0.5  # from ln 512 = 6.24
    path = str(tmp_path / "encoder.keras")
    model.encoder.save(path)
    loaded = keras.saving.load_model(path)
    kernel = "encoderblock_0/attention/qkv/kernel"
    trained = {w.path: ops.convert_to_numpy(w) for w in encoder.weights}
    assert np.abs(trained[kernel] - initial[kernel]).max() > 1e-4  # the encoder itself was trained
    for weight in loaded.weights:
        np.testing.assert_array_equal(ops.convert_to_numpy(weight), trained[weight.path])


def test_config_round_trip():
    model = MaskedPatchPrediction(keras_vit.VisionTransformer(**TINY), target="downsized", corruption_rate=0.15,
                                  bits=2, seed=4)
    clone = MaskedPatchPrediction.from_config(model.get_config())
    assert (clone.target, clone.corruption_rate, clone.bits, clone.seed) == ("downsized", 0.15, 2, 4)
    assert tuple(clone(np.zeros((1, 16, 16, 3), "float32"))[0].shape) == (1, 16, 16, 64)


def test_bad_encoders_and_targets_are_named():
    with pytest.raises(ValueError, match=r"`target` must be one of \('mean_color', 'downsized', 'pixels'\). "
                                         r"Received: target='l2'"):
        MaskedPatchPrediction(keras_vit.VisionTransformer(**TINY), target="l2")
    with pytest.raises(ValueError, match=r"multiple of 4 pixels on a side. Received: an encoder whose tokens "
                                         r"cover 6x6 pixels"):
        MaskedPatchPrediction(keras_vit.VisionTransformer(**dict(TINY, image_size=12, patch_size=6)),
                              target="downsized")
    with pytest.raises(ValueError, match=r"no PatchEncoder"):
        MaskedPatchPrediction(keras_vit.SwinTransformer(image_size=32, patch_size=4, embed_dim=8, depths=(1,),
                                                        num_heads=(1,), window_size=4, num_classes=3))
    with pytest.raises(ValueError, match=r"`encoder`|`model` must be a `keras.Model`"):
        MaskedPatchPrediction("ViT_B16")


DISTRIBUTED = r"""
import os, sys, json
import numpy as np
backend = os.environ["KERAS_BACKEND"]
if backend == "tensorflow":
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import keras_vit

def train(distributed):
    keras.utils.set_random_seed(0)
    def build():
        encoder = keras_vit.VisionTransformer(image_size=16, patch_size=4, hidden_size=16, num_layers=1,
                                              num_heads=2, mlp_dim=16, num_classes=3)
        # Every patch masked: no random choice left, so one device and two must agree.
        model = keras_vit.MaskedPatchPrediction(encoder, corruption_rate=1.0, mask_rate=1.0, random_rate=0.0)
        # Compiled on JAX: op by op, the two-device run took 30 s of the test's 40. TensorFlow's
        # graph (no XLA) starts sooner than an XLA compile on the CPU.
        model.compile(optimizer=keras.optimizers.SGD(0.5), jit_compile=backend == "jax")
        return model
    if distributed and backend == "tensorflow":
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            model = build()
    else:
        if distributed:
            keras.distribution.set_distribution(keras.distribution.DataParallel(devices=keras.distribution.list_devices()))
        model = build()
    images = np.random.default_rng(0).uniform(0, 255, (8, 16, 16, 3)).astype("float32")
    model.fit(images, batch_size=8, epochs=3, verbose=0, shuffle=False)
    keras.distribution.set_distribution(None)
    return [keras.ops.convert_to_numpy(w) for w in model.encoder.weights]

single, distributed = train(False), train(True)
print(json.dumps(max(float(np.abs(a - b).max()) for a, b in zip(single, distributed))))
"""


# One phase only: each case pins its backend in its own process, so the JAX phase would
# run the same two processes again.
@pytest.mark.one_backend
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_distributed_training_steps_as_one_device(backend):
    """MirroredStrategy on 2 CPUs (TensorFlow) and DataParallel on 2 virtual devices (JAX) train as one device.

    The loss is computed here, not by Keras' compiled losses, so it must be scaled per replica
    as those are; unscaled, the mirrored run would step twice as far.
    """
    import os
    import subprocess
    import sys

    env = {**os.environ, "KERAS_BACKEND": backend, "XLA_FLAGS": xla_flags(2)}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", DISTRIBUTED], capture_output=True, text=True, timeout=300,
                            env=env, cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert float(result.stdout.strip().splitlines()[-1]) < 1e-4  # float32 summation order over 3 steps

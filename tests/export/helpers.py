"""What the export tests share: tiny models with random weights, smooth test images, running a file."""

import keras
import numpy as np

import keras_vit
import keras_vit.export
from keras_vit.models.variants import TESTING_VARIANTS
from tests.testing import set_random_weights

BACKEND = keras.backend.backend()
SWIN = (keras_vit.SwinTransformer, dict(image_size=32, patch_size=4, embed_dim=16, depths=(2, 2),
                                        num_heads=(2, 2), window_size=4, num_classes=10, drop_path_rate=0.0))
# Float32 export: the same ops in another order (XNNPACK's kernels), on logits of size ~1.
FLOAT_ATOL = 1e-4
# The testing hybrid at 32 px, one ResNet stage, one block: the same export path, in a third of the time.
HYBRID = (TESTING_VARIANTS["hybrid"][0],
          dict(TESTING_VARIANTS["hybrid"][1], image_size=32, num_layers=1, resnet_stages=(1,)))


def build(family):
    builder, config = {"swin": SWIN, "hybrid": HYBRID}.get(family) or TESTING_VARIANTS[family]
    model = builder(**config)
    # The head is zero-initialized: random weights make the comparisons real.
    set_random_weights(model, scale=0.1)
    return model


def smooth_images(model, count, seed=0):
    """Images that are colour gradients, one per image: features that vary across the batch.

    On uniform noise a random model's logits differ by less than an int8 step of
    its activations, which says nothing about the quantization.
    """
    height, width, channels = model.input_shape[1:]
    rng = np.random.default_rng(seed)
    rows, cols = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    coef = rng.uniform(0, 1, (count, 3, channels))
    coef = coef[:, None, None]  # (count, 1, 1, 3, channels)
    images = coef[..., 0, :] * rows[..., None] + coef[..., 1, :] * cols[..., None] + coef[..., 2, :]
    return (255 / 3 * images).astype("float32")


def forward(model, images):
    # The compiled predict step: on JAX an eager call of these models takes seconds.
    return np.asarray(model.predict_on_batch(images))


def run_file(path, images):
    return keras_vit.export.litert_predict(keras_vit.export.litert_interpreter(path), images)


def relative_error(got, expected):
    """Largest error over the spread of the reference logits."""
    return float(np.abs(got - expected).max() / (expected.max() - expected.min()))

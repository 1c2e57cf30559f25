"""`EvalTransform` in front of a keras_vit model, across processes: the layer needs no TensorFlow to import."""

import os
import subprocess
import sys

import keras
import numpy as np

import keras_vit
from keras_vit.preprocessing import EvalTransform, eval_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOAD = """
import sys
import numpy as np
import keras
import keras_vit
assert keras.backend.backend() != "jax" or "tensorflow" not in sys.modules, "import keras_vit imported TensorFlow"
model = keras.models.load_model(sys.argv[1])
images = np.load(sys.argv[2])
np.save(sys.argv[3], keras.ops.convert_to_numpy(model(images)))
"""


def test_a_model_with_its_evaluation_transform_in_front_loads_in_a_fresh_process(tmp_path):
    vit = keras_vit.VisionTransformer(image_size=32, patch_size=8, hidden_size=16, num_layers=1, num_heads=2,
                                      mlp_dim=32, num_classes=5)
    inputs = keras.Input((None, None, 3), dtype="uint8")
    config = eval_config("DeiT_S16/imagenet").replace(image_size=32)
    model = keras.Model(inputs, vit(EvalTransform.from_eval_config(config)(inputs)))
    path = str(tmp_path / "with_transform.keras")
    model.save(path)
    images = np.random.default_rng(0).integers(0, 256, (2, 45, 60, 3), dtype=np.uint8)
    np.save(tmp_path / "images.npy", images)
    result = subprocess.run(
        [sys.executable, "-c", LOAD, path, str(tmp_path / "images.npy"), str(tmp_path / "out.npy")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), keras.ops.convert_to_numpy(model(images)),
                               atol=1e-5)

"""A tiny Swin Transformer trains from `train/main.py` with the `swin` preset, and exports."""

import json

import keras
import numpy as np

import keras_vit  # also registers the layers for loading
from tests.train.helpers import main_here, make_idx_dataset

# 16 x 16 images in 2 x 2 patches: an 8 x 8 map, then 4 x 4 after the merging. A
# window of 3 divides neither, so both stages pad (to 9 x 9 and 6 x 6) and every
# second block shifts by 1 with the mask, as Swin-T's 7 x 7 windows do at 200 px.
TINY_SWIN = '{"patch_size": 2, "embed_dim": 16, "depths": [2, 2], "num_heads": [1, 2], "window_size": 3}'


def test_swin_preset_trains_a_tiny_swin_and_exports_it(tmp_path, capsys):
    import tensorflow as tf

    data_dir = make_idx_dataset(tmp_path / "data", train=128, test=32)
    workdir = tmp_path / "run"
    # The preset's recipe (RandAugment on gray images, MixUp/CutMix, drop path 0.2,
    # clipping at 5) with the data, size and length of a CPU test; float32 so that
    # the exported model can be compared tightly.
    result = main_here(capsys, 
        "--config=swin", "--model=SwinTransformer", f"--model_kwargs={TINY_SWIN}",
        f"--workdir={workdir}", "--dataset=fashion_mnist", f"--data_dir={data_dir}", "--eval_split=test",
        "--image_size=16", "--batch_size=32", "--steps=4", "--warmup_steps=2", "--precision=float32",
        "--jit_compile=false",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "model=SwinTransformer" in result.stdout and "test accuracy" in result.stdout
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["step"] == 4 and np.isfinite(summary["loss"])
    model = keras.models.load_model(str(workdir / "model.keras"))
    blocks = [layer for layer in model.layers if isinstance(layer, keras_vit.models.swin.SwinTransformerBlock)]
    assert [(block.padded_size, block.shift) for block in blocks] == [
        ((9, 9), (0, 0)), ((9, 9), (1, 1)), ((6, 6), (0, 0)), ((6, 6), (1, 1))]
    # The SavedModel serves uint8 images as the probabilities of the reloaded model on them prepared
    # by the preset's evaluation transform (Swin's: the shorter side to 16 / 0.875, the centre cropped).
    from train.pipeline import evaluation_transform

    assert summary["eval_transform"]["crop_fraction"] == 0.875
    transform = evaluation_transform((16, 16), eval_crop=0.875, channels=1)
    images = np.random.default_rng(0).integers(0, 255, (3, 16, 16, 1)).astype(np.uint8)
    loaded = tf.saved_model.load(str(workdir / "saved_model"))  # kept: its functions need its variables
    probabilities = loaded.serve(tf.constant(images)).numpy()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    prepared = np.stack([transform(image).numpy() for image in images])
    expected = keras.ops.convert_to_numpy(keras.ops.softmax(model(prepared)))
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)

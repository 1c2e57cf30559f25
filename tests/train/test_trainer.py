"""`build_model` turns the configuration's speed and memory options into the model's."""

import keras
import pytest

import keras_vit
from train.configs import TrainConfig
from train.checks import check_config
from train.modeling import build_model

TINY = {"patch_size": 4, "hidden_size": 16, "num_layers": 2, "num_heads": 2, "mlp_dim": 32}


def _blocks(model):
    return [layer for layer in model.layers if isinstance(layer, keras_vit.layers.TransformerBlock)]


@pytest.mark.parametrize("remat", [False, True])
def test_remat_option_reaches_every_block(remat):
    config = TrainConfig(model_kwargs=TINY, remat=remat)
    model, _ = build_model(config, num_classes=3, image_size=8, channels=1)
    assert len(_blocks(model)) == 2
    assert all(block.remat is remat for block in _blocks(model))


def test_bfloat16_precision_builds_a_mixed_model():
    model, _ = build_model(TrainConfig(model_kwargs=TINY, precision="bfloat16"), 3, 8, 1)
    assert all(block.dtype_policy.name == "mixed_bfloat16" for block in _blocks(model))
    assert keras.backend.standardize_dtype(_blocks(model)[0].compute_dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(_blocks(model)[0].variable_dtype) == "float32"


def test_steps_per_execution_must_be_positive():
    with pytest.raises(ValueError, match=r"--steps_per_execution must be a positive integer.*Received: "
                                         r"steps_per_execution=0"):
        check_config(TrainConfig(steps_per_execution=0))


@pytest.mark.parametrize("field", ["jit_compile", "remat", "eval_flip"])
def test_switches_must_be_true_or_false(field):
    # From Python, not the command line (absl's boolean flags parse only true or false).
    with pytest.raises(ValueError, match=rf"--{field} must be true or false. Received: {field}='yes'"):
        check_config(TrainConfig(**{field: "yes"}))


TINY_SWIN = {"patch_size": 2, "embed_dim": 16, "depths": [2], "num_heads": [2], "window_size": 4}


@pytest.mark.parametrize("rate", [0.0, 0.3])
def test_the_drop_path_flag_replaces_the_builders_default_zero_included(rate):
    # Swin's builder defaults to drop path 0.1; --drop_path_rate=0 must turn it off.
    config = TrainConfig(model="SwinTransformer", model_kwargs=TINY_SWIN, drop_path_rate=rate)
    model, _ = build_model(config, num_classes=3, image_size=8, channels=1)
    blocks = [layer for layer in model.layers if isinstance(layer, keras_vit.models.swin.SwinTransformerBlock)]
    assert blocks and max(block.drop_path_rate for block in blocks) == pytest.approx(rate)


def test_the_general_axial_builder_trains_from_its_arguments():
    config = TrainConfig(model="AxialViT", model_kwargs=dict(patch_size=4, hidden_size=16, num_layers=1,
                                                             num_heads=2, mlp_dim=32))
    model, _ = build_model(config, num_classes=3, image_size=8, channels=1)
    blocks = [layer for layer in model.layers if isinstance(layer, keras_vit.models.axial.AxialTransformerBlock)]
    assert sorted(block.axis for block in blocks) == ["column", "row"] and model.output_shape == (None, 3)


def test_another_model_than_the_presets_starts_from_its_own_arguments():
    from absl import flags

    from train import main as cli

    flags.FLAGS.unparse_flags()
    try:
        cli.parse_flags(["main.py", "--model=Swin_T"])
        assert cli.config_from_flags().model_kwargs == {}  # not the default preset's ViT arguments
        flags.FLAGS.unparse_flags()
        cli.parse_flags(["main.py", "--model=SwinTransformer", '--model_kwargs={"embed_dim": 32}'])
        assert cli.config_from_flags().model_kwargs == {"embed_dim": 32}
        flags.FLAGS.unparse_flags()
        cli.parse_flags(["main.py", '--model_kwargs={"patch_size": 4}'])
        config = cli.config_from_flags()
        assert config.model_kwargs["patch_size"] == 4 and "hidden_size" in config.model_kwargs  # merged
    finally:
        flags.FLAGS.unparse_flags()

"""The skeleton the ViT-like families are built on (keras_vit.models.skeleton)."""

import numpy as np
import pytest

import keras_vit
from keras_vit.layers import TransformerBlock
from keras_vit.models.skeleton import EncoderConfig, Family, build_encoder_model
from tests.testing import to_numpy

TINY = dict(image_size=16, patch_size=8, num_channels=3, hidden_size=16, num_layers=2, num_heads=2,
            mlp_dim=32, num_classes=5, include_top=True, pooling="token", representation_size=None,
            classifier_activation=None, dropout_rate=0.0, attention_dropout_rate=0.0, drop_path_rate=0.1,
            preprocessing="inception", initialization="vit", distillation=False, dynamic_image_size=False,
            dynamic_padding=False, position_interpolation="bicubic", position_antialias=True, dtype=None,
            remat=False, weights=None, name="sixth_family")


def test_a_new_family_is_a_block_factory_and_the_skeleton():
    # As docs/design.md's "Adding a family": here, blocks whose MLP is twice as wide.
    config = EncoderConfig.from_arguments(TINY)

    def make_block(index):
        return TransformerBlock(2, 64, drop_path_rate=config.drop_path_rate_at(index),
                                name=f"encoderblock_{index}")

    model = build_encoder_model(config, Family(make_block))
    assert [block.mlp_dim for block in keras_vit.inspection.blocks(model)] == [64, 64]
    assert [block.drop_path_rate for block in keras_vit.inspection.blocks(model)] == [0.0, 0.1]
    images = np.random.default_rng(0).uniform(0, 255, (2, 16, 16, 3)).astype("float32")
    np.testing.assert_allclose(
        to_numpy(keras_vit.head(model)(keras_vit.backbone(model)(images))), to_numpy(model(images)), atol=1e-6
    )


def test_the_shared_checks_run_once_for_every_family():
    with pytest.raises(ValueError, match=r"`pooling` must be one of \('token', 'gap'\). Received: pooling='cls'"):
        EncoderConfig.from_arguments({**TINY, "pooling": "cls"})


def test_grid_blocks_must_come_before_the_tokens():
    with pytest.raises(ValueError, match=r"Received: grid_blocks=2, tokens_at=1"):
        Family(lambda index: None, tokens_at=1, grid_blocks=2)

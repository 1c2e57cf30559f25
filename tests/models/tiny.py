"""A tiny model of every family and variant the model tests split, save and load, with random weights."""

import numpy as np

import keras_vit
from tests.testing import set_random_weights
from tests.weights.checkpoints import TINY as _VIT

# name -> (builder, arguments): each family once, and the ViT variants whose graphs differ
# (pooling and pre-logits with a dynamic size; DeiT's second token and head; ConViT's frozen gates).
TINY_MODELS = {
    "vit": (keras_vit.VisionTransformer, _VIT),
    "vit_gap_dynamic": (keras_vit.VisionTransformer,
                        dict(_VIT, pooling="gap", representation_size=16, dynamic_image_size=True)),
    "hybrid": (keras_vit.VisionTransformer, dict(_VIT, image_size=64, patch_size=1, resnet_stages=(1, 1))),
    "deit_distilled": (keras_vit.VisionTransformer, dict(_VIT, preprocessing="imagenet", distillation=True)),
    "convit": (keras_vit.ConViT, dict(_VIT, num_layers=3, num_heads=4, num_gpsa_layers=2)),
    "convit_frozen": (keras_vit.ConViT, dict(_VIT, num_layers=3, num_heads=4, num_gpsa_layers=2,
                                             train_gating=False, train_gpsa_attention=False)),
    "swin": (keras_vit.SwinTransformer, dict(image_size=32, patch_size=4, embed_dim=16, depths=(2, 2),
                                             num_heads=(2, 2), window_size=4, num_classes=10)),
    "axial": (keras_vit.AxialViT, dict(_VIT, image_size=(16, 24), patch_size=4, position_embedding="learned_2d")),
    "dinov2": (keras_vit.DINOv2, dict(_VIT, image_size=28, patch_size=14, num_register_tokens=2,
                                      include_top=True)),
}


def tiny_model(name, seed=0):
    """`TINY_MODELS[name]` built with weights uniform in [-0.3, 0.3] (not its zero heads), frozen gates at 0."""
    builder, arguments = TINY_MODELS[name]
    model = builder(**arguments)
    set_random_weights(model, seed=seed, scale=0.3)
    if arguments.get("train_gating") is False:
        # Frozen gates are 0 (ConViT Table 3), what the model means: keras_vit's loader refuses others.
        for weight in model.non_trainable_weights:
            if weight.path.endswith("/gating"):
                weight.assign(np.zeros(weight.shape, weight.dtype))
    return model


def tiny_images(model, batch=2, seed=0):
    """`batch` [0, 255] images of the model's input size."""
    shape = model.input_shape[1:]
    if None in shape:
        shape = (32, 32, shape[-1])
    return np.random.default_rng(seed).uniform(0, 255, (batch, *shape)).astype("float32")

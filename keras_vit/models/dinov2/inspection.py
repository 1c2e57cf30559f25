"""What a built DINOv2 is, read from its layers (for `keras_vit.inspection.model_architecture`)."""

from keras_vit.inspection import first_layer, layers_of, vit_arguments
from keras_vit.models.dinov2.layers import DINOv2Block, RegisterTokens


def architecture_of(model):
    """`("DINOv2", arguments)`: ViT's arguments of `model`, its MLP and its register tokens."""
    registers = layers_of(model, RegisterTokens)
    return "DINOv2", {
        **vit_arguments(model),
        "mlp_activation": first_layer(model, DINOv2Block).mlp_activation,
        "num_register_tokens": registers[0].num_tokens if registers else 0,
    }

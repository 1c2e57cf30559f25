"""What a built ConViT is, read from its layers: its GPSA blocks and builder arguments."""

from keras_vit.inspection import layers_of, vit_arguments
from keras_vit.models.convit.layers import GPSABlock


def gpsa_blocks(model):
    """The blocks of `model` whose attention is ConViT's GPSA, in order (`[]` for other models)."""
    return layers_of(model, GPSABlock)


def architecture_of(model):
    """`("ConViT", arguments)`: the `ConViT` arguments that fix a ConViT's weights.

    `VisionTransformer`'s (`keras_vit.inspection.vit_arguments`), the number of
    GPSA blocks, and ConViT Table 3's switches, which ConViT sets alike in
    every GPSA block: `train_gating` and `train_gpsa_attention`.
    """
    arguments = vit_arguments(model)
    gpsa = gpsa_blocks(model)
    arguments["num_gpsa_layers"] = len(gpsa)
    if gpsa:
        arguments.update(train_gating=gpsa[0].train_gating, train_gpsa_attention=gpsa[0].train_gpsa_attention)
    return "ConViT", arguments

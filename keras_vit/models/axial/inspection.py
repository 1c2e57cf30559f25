"""What a built Axial-ViT is, read from its layers (for `keras_vit.inspection.model_architecture`)."""

from keras_vit.inspection import first_layer, layers_of
from keras_vit.layers.patching import PatchEncoder, Patches
from keras_vit.models.axial.layers import AxialTransformerBlock


def architecture_of(model):
    """`("AxialViT", arguments)`: the `AxialViT` arguments that fix an Axial-ViT's weights (ViT App. D.5).

    `num_layers` is the number of ViT blocks replaced, as `AxialViT` takes it:
    half the axial blocks, one row and one column block each.
    `position_embedding` is the stem's (`"learned_1d"`, `"learned_2d"` or
    `"none"`).
    """
    encoder = first_layer(model, PatchEncoder)
    axial_blocks = layers_of(model, AxialTransformerBlock)
    arguments = {
        "hidden_size": encoder.hidden_size,
        "num_layers": len(axial_blocks) // 2,
        "position_embedding": encoder.position_layout if encoder.use_position_embedding else "none",
    }
    if axial_blocks:
        arguments.update(num_heads=axial_blocks[0].num_heads, mlp_dim=axial_blocks[0].mlp_dim)
    patches = first_layer(model, Patches)
    if patches is not None:
        arguments["patch_size"] = patches.patch_size
    return "AxialViT", arguments

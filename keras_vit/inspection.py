"""What a built keras_vit model is made of, read from its layers.

The weight loader (to check a checkpoint against a model), feature extraction
(to tap blocks) and the attention analysis (to run blocks one by one) all ask
the same questions of a model: which family, which blocks in which order,
which patch grid; a registered family's own questions (Swin's bias tables and
stages) are its folder's, through its spec. They ask them here, by layer class
and graph order, never by layer name, so that renamed models and models loaded
from `.keras` files answer the same.

This module sits just above `keras_vit.layers` in the import order (see
`docs/design.md`): the weights, the models and the analysis tools import it,
and it imports only layers, the variant table and the registered families
(`keras_vit.families`), whose specs say what their own blocks are.
"""

import keras

from keras_vit import families
from keras_vit.architectures import architecture
from keras_vit.layers.bit import ResNetStage, StandardizedConv2D
from keras_vit.layers.patching import PatchEncoder, Patches
from keras_vit.layers.tokens import ClassToken, DistillationToken
from keras_vit.layers.pooling import SeparableMaxPooling2D
from keras_vit.layers.position import TokenPositionEmbedding
from keras_vit.layers.relative_attention import RelativeSelfAttention
from keras_vit.layers.transformer import TransformerBlock

# The family of ViT, DeiT and the hybrid (`keras_vit/models/vit/`), whose checkpoints share
# weight names; a registered family names its own (`FamilySpec.name`).
VIT_FAMILY = "ViT"
# The hybrid root's max pooling: ours with a static size, Keras' with a dynamic one.
_MAX_POOLINGS = (SeparableMaxPooling2D, keras.layers.MaxPooling2D)


def check_model(model):
    """Raises a ValueError naming `model` unless it is a `keras.Model`."""
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a `keras.Model`. Received: model={model!r}")


def layers_of(model, classes):
    """The layers of `model` that are instances of `classes`, in graph order."""
    return [layer for layer in model.layers if isinstance(layer, classes)]


def first_layer(model, classes):
    """The first layer of `model` that is an instance of `classes`, or None."""
    return next((layer for layer in model.layers if isinstance(layer, classes)), None)


def _without_subclasses(classes):
    # A family's `TransformerBlock` (ConViT's, DINOv2's) is found as one: the messages
    # that list the classes name each kind of block once.
    return tuple(cls for cls in classes if not any(cls is not other and issubclass(cls, other) for other in classes))


def block_classes():
    """Every block class of the families: `TransformerBlock` and the registered families' own."""
    return _without_subclasses((TransformerBlock, *families.block_classes()))


def vit_block_classes():
    """The block classes that take the patch tokens (and any prefix tokens) of one grid, as ViT's do."""
    return _without_subclasses((TransformerBlock, *families.block_classes(feature_blocks_only=True)))


def family(model):
    """`"ViT"` (ViT, DeiT, hybrid), a registered family (`"ConViT"`, `"Swin"`, ...) or None (not a keras_vit graph).

    A registered family whose weights are named as ViT's (Axial-ViT: its stem,
    norm and head are ViT's, and only its blocks differ) is of the ViT family
    for the weight loader; `registered_family` names it.
    """
    block = first_layer(model, block_classes())
    # A registered family's blocks name it (`keras_vit.families`).
    registered = getattr(block, "checkpoint_family", None)
    if registered is not None:
        return registered
    if first_layer(model, PatchEncoder) is not None:
        return VIT_FAMILY
    return None


def patch_encoder(model):
    """The `PatchEncoder` of a ViT-like model.

    Raises:
        ValueError: for a model without one (a Swin model embeds its patches
            in stages and has no single patch grid), naming it.
    """
    encoder = first_layer(model, PatchEncoder)
    if encoder is None:
        # A registered family whose blocks attend within parts of the tokens says which (Swin's windows).
        spec = registered_family(model)
        which = f" It is {spec.attends_within}." if spec is not None and spec.attends_within else ""
        raise ValueError(
            "`model` has no PatchEncoder, so no single patch grid: expected a keras_vit ViT, "
            f"DeiT or hybrid, or a registered family's model of one grid.{which} Received: model={model.name!r}"
        )
    return encoder


def registered_family(model):
    """The `FamilySpec` of the registered family whose own blocks `model` has, or None."""
    return families.family_of_blocks(model.layers)


def check_whole_sequence_attention(model, what):
    """Raises a ValueError naming `model` if its blocks do not attend over the whole token sequence.

    Args:
        model: A `keras.Model`.
        what: str. What needs one attention over the whole token sequence,
            e.g. `"Attention rollout"`; it begins the message.
    """
    spec = registered_family(model)
    if spec is not None and spec.attends_within:
        raise ValueError(
            f"{what} needs blocks that attend over the whole token sequence, and `model` is "
            f"{spec.attends_within}. Received: model={model.name!r}"
        )


def blocks(model):
    """Every transformer block (ViT-like, Swin's or a registered family's) of `model`, in order.

    An Axial-ViT has two per ViT block: the row block, then the column block.

    Raises:
        ValueError: for a model without any, naming it.
    """
    classes = block_classes()
    found = layers_of(model, classes)
    if not found:
        raise ValueError(
            f"`model` has no transformer blocks ({', '.join(cls.__name__ for cls in classes)} layers at "
            "its top level): expected a model built by keras_vit or loaded from a .keras file of one. "
            f"Received: model={model.name!r}"
        )
    return found


def final_norm(model):
    """The LayerNorm after the last block: where every keras_vit backbone ends.

    ViT-like models (Axial-ViT too) call it `encoder_norm`, Swin `norm`; it is found as the
    first top-level `LayerNormalization` after the last block, so that renamed
    models are found too.

    Raises:
        ValueError: for a model without blocks, or without such a norm.
    """
    layers = model.layers
    last = layers.index(blocks(model)[-1])
    norm = next((layer for layer in layers[last + 1:] if isinstance(layer, keras.layers.LayerNormalization)), None)
    if norm is None:
        raise ValueError(
            "`model` has no LayerNormalization after its last block, where a keras_vit "
            f"backbone ends. Received: model={model.name!r}"
        )
    return norm


def prefix_token_counts(model):
    """How many non-patch tokens (class, distillation, registers) lead each ViT-like block's input.

    Counted from the token layers met before each block in graph order, each
    saying how many it adds (`adds_prefix_tokens`): ConViT inserts its class
    token only after the last GPSA block. Axial-ViT has no such tokens (they
    have no row or column), so its blocks count 0.
    """
    counts, inserted, classes = [], 0, vit_block_classes()
    for layer in model.layers:
        if isinstance(layer, classes):
            counts.append(inserted)
        else:
            inserted += getattr(layer, "adds_prefix_tokens", 0)
    return counts


def token_stride(model):
    """Pixels per token along each axis of a ViT-like model: the patch, times a hybrid ResNet's downsampling."""
    stride = list(first_layer(model, Patches).patch_size)
    for layer in layers_of(model, (StandardizedConv2D, *_MAX_POOLINGS, ResNetStage)):
        step = layer.strides if isinstance(layer.strides, (tuple, list)) else (layer.strides,) * 2
        stride = [s * t for s, t in zip(stride, step)]
    return tuple(stride)


def resnet_levels(model):
    """A hybrid's ResNet outputs (the root before its max-pool, then every stage); `[]` for a plain ViT."""
    if first_layer(model, StandardizedConv2D) is None:
        return []
    pools = layers_of(model, _MAX_POOLINGS)
    stages = [layer.output for layer in layers_of(model, ResNetStage)]
    # timm's ResNetV2 takes its stride-2 root feature after GroupNorm+ReLU,
    # before the root's max-pool; levels 1.. are the stage outputs.
    return [pools[0].input, *stages] if pools else stages


def has_class_token(model):
    """True when `model` has a class token (pooling `"token"`)."""
    return first_layer(model, ClassToken) is not None


def vit_arguments(model):
    """The `VisionTransformer` arguments that fix a ViT-like model's weights.

    Also the ablation switches of ViT App. D.3 (Table 8): `position_embedding`
    and `position_embedding_at`. A registered family's `architecture_of` adds
    its own (ConViT's GPSA blocks).
    """
    encoder = first_layer(model, PatchEncoder)
    vit_blocks = layers_of(model, TransformerBlock)
    patches = first_layer(model, Patches)
    arguments = {
        "hidden_size": encoder.hidden_size,
        "num_layers": len(vit_blocks),
        "distillation": first_layer(model, DistillationToken) is not None,
        **_position_arguments(encoder, vit_blocks, layers_of(model, TokenPositionEmbedding)),
    }
    if vit_blocks:
        arguments.update(num_heads=vit_blocks[0].num_heads, mlp_dim=vit_blocks[0].mlp_dim)
    if patches is not None:
        arguments["patch_size"] = patches.patch_size
    if first_layer(model, StandardizedConv2D) is not None:
        arguments["resnet_stages"] = tuple(stage.num_units for stage in layers_of(model, ResNetStage))
    return arguments


def _position_arguments(encoder, vit_blocks, block_embeddings):
    """`position_embedding` and `position_embedding_at` (ViT App. D.3, Table 8) of a ViT-like model."""
    if any(isinstance(getattr(block, "attention", None), RelativeSelfAttention) for block in vit_blocks):
        return {"position_embedding": "relative", "position_embedding_at": "stem"}
    if encoder.use_position_embedding:
        return {"position_embedding": encoder.position_layout, "position_embedding_at": "stem"}
    if not block_embeddings:
        return {"position_embedding": "none", "position_embedding_at": "stem"}
    # One layer called before every block, or one layer per block. A single block
    # cannot tell them apart by count: the builder names the shared one
    # `position_embedding` and the others `position_embedding_{index}`.
    shared = len(block_embeddings) == 1 and (len(vit_blocks) > 1 or block_embeddings[0].name == "position_embedding")
    return {
        "position_embedding": block_embeddings[0].layout,
        "position_embedding_at": "every_layer_shared" if shared else "every_layer",
    }


def model_architecture(model):
    """The architecture of a keras_vit model (see `keras_vit.architectures.architecture`).

    Returns None for a model of no keras_vit family: then only the weight
    shapes can be checked, after reading a file.
    """
    kind = family(model)
    if kind is None:
        return None
    spec = registered_family(model)
    if spec is not None and spec.architecture_of is not None:
        builder, arguments = spec.architecture_of(model)
    else:
        builder, arguments = "VisionTransformer", vit_arguments(model)
    inputs = getattr(model, "inputs", None)
    if inputs:
        arguments["num_channels"] = inputs[0].shape[-1]
    return architecture(builder, arguments)

"""The backbone/head split of every keras_vit model (keras-hub's `Backbone`, timm's `forward_features`/`forward_head`).

Every builder's graph has one boundary: the LayerNorm after the last block
(`encoder_norm` in the ViT-like families, `norm` in Swin; see
`keras_vit.models.skeleton`). `backbone(model)` is the model up to it: the
normalized features before pooling, `(batch, tokens, D)` for ViT, DeiT,
hybrid and ConViT (class and distillation tokens first), `(batch, H, W, C)`
for Swin. `head(model)` is the rest: pooling, pre-logits and classifier(s),
taking those features. Both share the layers, and so the weights, of `model`:
training one trains the other, and `head(model)(backbone(model)(x))` is
`model(x)`. The graph itself stays one flat model, so weight names,
checkpoints and `.keras` files are those of the builders.
"""

import keras

from keras_vit import inspection


def backbone(model, name=None):
    """The part of `model` up to its final norm: features before pooling.

    Args:
        model: A `keras.Model` built by keras_vit (any family, with or without
            its top), or loaded from a `.keras` file of one.
        name: str or None. Name of the returned model. Defaults to
            `"{model.name}_backbone"`.

    Returns:
        A `keras.Model` taking the inputs of `model` and returning its
        normalized features before pooling.

    Raises:
        ValueError: for a model that is not a keras_vit model, naming it.
    """
    inspection.check_model(model)
    norm = inspection.final_norm(model)
    return keras.Model(model.inputs[0], norm.output, name=name or f"{model.name}_backbone")


def head(model, name=None):
    """The part of `model` after its final norm: pooling, pre-logits and classifier(s).

    Args:
        model: A `keras.Model` built by keras_vit, as for `backbone`. A Swin
            model built with `return_stages=True` has no head and is refused.
        name: str or None. Name of the returned model. Defaults to
            `"{model.name}_head"`.

    Returns:
        A `keras.Model` taking what `backbone(model)` returns and giving what
        `model` gives (logits, probabilities, or pooled features without the
        top).

    Raises:
        ValueError: for a model that is not a keras_vit model or whose output
            does not follow its final norm alone.
    """
    inspection.check_model(model)
    norm = inspection.final_norm(model)
    if isinstance(model.output, dict) or len(model.outputs) != 1:
        raise ValueError(
            "`model` returns several outputs (a backbone built with return_stages=True?), "
            f"so it has no head after its final norm. Received: model={model.name!r}"
        )
    return keras.Model(norm.output, model.outputs[0], name=name or f"{model.name}_head")

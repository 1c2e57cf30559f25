"""The distillation token's top: two heads on the class and distillation tokens (DeiT, Touvron et al. 2021).

Shared by every ViT-like builder (`distillation=True`: the DeiT variants,
ConViT SM B), so the skeleton builds it whatever the family.

DeiT Sec. 5 ("Distillation token"; "Classification with our approach"): the
class token's head is trained against the true label, the distillation
token's head against the teacher, and at test time the two heads' logits are
averaged. The models built here output that average (so `.keras` files and
SavedModels are DeiT's inference model); `distillation_heads` gives the model
with both heads' logits that a trainer needs, sharing the layers.
"""

import keras

from keras_vit.layers.tokens import DistillationTokenPooling
from keras_vit.layers.pooling import ClassTokenPooling
from keras_vit.layers.validation import check_bool, check_dtype_policy
from keras_vit.models.common import classification_head

HEAD, DISTILLATION_HEAD = "head", "head_dist"


def check_distillation_args(distillation, pooling, representation_size):
    """Raises a ValueError for a distillation setting the builders cannot honour."""
    check_bool(distillation, "distillation")
    if not distillation:
        return
    if pooling != "token":
        raise ValueError(
            "`distillation=True` reads the class and distillation tokens, so it needs "
            f"pooling='token'. Received: pooling={pooling!r}"
        )
    if representation_size is not None:
        # DeiT has no pre-logits layer, and sharing one between the two heads
        # would tie what distillation trains apart.
        raise ValueError(
            "`distillation=True` takes no pre-logits layer: use representation_size=None. "
            f"Received: representation_size={representation_size!r}"
        )


def _float32_under_mixed(dtype):
    # As `classification_head`: logits stay float32 under mixed precision.
    policy = check_dtype_policy(dtype)
    return "float32" if policy.compute_dtype != policy.variable_dtype else policy


def distilled_top(tokens, include_top, num_classes, classifier_activation, dtype, kernel_initializer):
    """Reads both tokens and returns the averaged logits (or features).

    Args:
        tokens: KerasTensor `(batch, length, D)`, the normalized encoder
            output laid out as `[x_class; x_dist; ...]`.
        include_top: bool. Without the top, the average of the two tokens'
            features (what DeiT's reference returns as pre-logits).
        num_classes: int. Classes of both heads.
        classifier_activation: Activation applied to the averaged logits, or
            None; each head itself always gives logits.
        dtype: The model's dtype policy.
        kernel_initializer: Initializer of both classifiers' kernels.

    Returns:
        KerasTensor `(batch, num_classes)` (or `(batch, D)` without the top).
    """
    class_features = ClassTokenPooling(dtype=dtype, name="token_pool")(tokens)
    distillation_features = DistillationTokenPooling(dtype=dtype, name="distillation_token_pool")(tokens)
    if not include_top:
        return keras.layers.Average(dtype=dtype, name="token_average")([class_features, distillation_features])
    logits = classification_head(class_features, num_classes, None, None, dtype, kernel_initializer, HEAD)
    distillation_logits = classification_head(
        distillation_features, num_classes, None, None, dtype, kernel_initializer, DISTILLATION_HEAD
    )
    outputs = keras.layers.Average(dtype=_float32_under_mixed(dtype), name="head_average")(
        [logits, distillation_logits]
    )
    if classifier_activation is not None:
        outputs = keras.layers.Activation(
            classifier_activation, dtype=_float32_under_mixed(dtype), name="head_activation"
        )(outputs)
    return outputs


def distillation_heads(model):
    """The model with both heads' logits: what distillation trains (DeiT Sec. 5).

    Args:
        model: A `keras.Model` built with `distillation=True` and
            `include_top=True` (or loaded from a `.keras` file of one).

    Returns:
        `keras.Model(model.inputs, [class head logits, distillation head logits])`
        sharing the layers (and so the weights) of `model`; the logits are
        float32 under mixed precision.

    Raises:
        ValueError: for a model without the `"head"` and `"head_dist"` layers.
    """
    if not isinstance(model, keras.Model):
        raise ValueError(f"`model` must be a `keras.Model`. Received: model={model!r}")
    names = {layer.name for layer in model.layers}
    if not {HEAD, DISTILLATION_HEAD} <= names:
        raise ValueError(
            f"`model` has no distillation head: expected layers {HEAD!r} and {DISTILLATION_HEAD!r} "
            "(a model built with distillation=True and include_top=True, e.g. "
            f"keras_vit.DeiT_S16_distilled()). Received: model={model.name!r}, missing "
            f"{sorted({HEAD, DISTILLATION_HEAD} - names)}"
        )
    outputs = [model.get_layer(HEAD).output, model.get_layer(DISTILLATION_HEAD).output]
    # The builders' models take one tensor; passing it bare keeps the call
    # structure `heads(images)` that the model itself has.
    inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
    return keras.Model(inputs, outputs, name=f"{model.name}_heads")

"""What a built Swin model is, read from its layers: its stages, builder arguments and bias tables."""

from keras_vit.inspection import first_layer, layers_of
from keras_vit.models.swin.checkpoints import SWIN_POSITION, fit_bias_table
from keras_vit.models.swin.layers import PatchMerging, SwinPatchEmbedding, SwinTransformerBlock


def swin_stages(model):
    """The Swin blocks of `model` grouped by stage (a patch merging opens every stage but the first)."""
    stages = [[]]
    for layer in model.layers:
        if isinstance(layer, PatchMerging):
            stages.append([])
        elif isinstance(layer, SwinTransformerBlock):
            stages[-1].append(layer)
    return [stage for stage in stages if stage]


def swin_arguments(model):
    """The `SwinTransformer` arguments that fix a Swin model's weights, and `shifted_windows`.

    `window_size` is the requested window (a block on a smaller map uses a
    smaller one). `position_embedding` is in the form of
    `keras_vit.architectures.architecture` (`"absolute+relative"` for the
    default with `absolute_position_embedding=True`). `shifted_windows` is
    whether a block asks for a shift; `True` (the default) when no stage has
    a second block, where a model without shifts is the same model.
    """
    embedding = first_layer(model, SwinPatchEmbedding)
    stages = swin_stages(model)
    absolute = any(w.path == SWIN_POSITION for w in model.weights)
    arguments = {
        "embed_dim": embedding.embed_dim,
        "patch_size": embedding.patch_size,
        "depths": tuple(len(stage) for stage in stages),
        "num_heads": tuple(stage[0].num_heads for stage in stages),
        "absolute_position_embedding": absolute,
        "shifted_windows": (
            any(any(block.shift_size) for stage in stages for block in stage)
            or not any(len(stage) > 1 for stage in stages)
        ),
    }
    if stages:
        first = stages[0][0]
        arguments.update(
            window_size=first.window_size,
            mlp_ratio=first.mlp_ratio,
            position_embedding=_position_embedding(absolute, first.use_relative_position_bias, first.use_content_term),
        )
    return arguments


def _position_embedding(absolute, relative_bias, content):
    """The `SwinTransformer(position_embedding=...)` (Swin Table 4) of a model's position terms."""
    if not relative_bias:
        return "absolute" if absolute else "none"
    if not content:
        # With the absolute embedding too: `absolute_position_embedding=True` says so.
        return "relative_without_content"
    return "absolute+relative" if absolute else "relative"


def architecture_of(model):
    """`("SwinTransformer", swin_arguments(model))`, for `keras_vit.inspection.model_architecture`."""
    return "SwinTransformer", swin_arguments(model)


def bias_table_windows(model):
    """Each relative position bias table of a Swin model and the window it serves.

    Returns:
        Dict `weight path -> (Mh, Mw)`; the window a block uses on its map,
        which is smaller than the requested one on a map smaller than it.
    """
    return {
        f"{layer.name}/attention/relative_position_bias_table": tuple(layer.window)
        for layer in layers_of(model, SwinTransformerBlock)
    }


def weight_fitters(model):
    """The bias tables a checkpoint of another window gives, each resampled to its block's window.

    Returns:
        Dict `weight path -> fit(table, model shape, file key)` (`fit_bias_table`).
    """
    def fitter(name, window):
        return lambda table, shape, origin: fit_bias_table(name, table, shape, window, origin)

    return {name: fitter(name, window) for name, window in bias_table_windows(model).items()}

"""The configured model: builder lookup, precision and memory options, pretrained weights."""

import inspect

import keras

import keras_vit

PRECISIONS = ("float32", "bfloat16")
# Arguments the trainer sets from the dataset and `--image_size`, never from `--model_kwargs`.
TRAINER_ARGUMENTS = ("image_size", "num_classes", "num_channels")


def general_builders():
    """`{name: builder}` of every family's general builder (`VisionTransformer`, `DINOv2`, ...), from the registry."""
    return dict(keras_vit.models.BUILDERS)


def builder_for(name):
    """The general builder behind a model name (`general_builders`), or the named variant's builder."""
    builders = general_builders()
    if name in builders:
        return builders[name]
    return keras_vit.VARIANTS[name][0]


def headless_by_default(name):
    """Whether the builder behind `name` returns features unless asked for its head (DINOv2's do)."""
    parameter = inspect.signature(builder_for(name)).parameters.get("include_top")
    return parameter is not None and parameter.default is False


def builder_arguments(name):
    """The keyword arguments the builder behind `name` accepts."""
    return [p for p in inspect.signature(builder_for(name)).parameters if p not in ("weights", "name")]


def build_model(config, num_classes, image_size, channels):
    """The configured model, with pretrained weights loaded (and resampled) if asked."""
    kwargs = dict(config.model_kwargs)
    kwargs.update(image_size=image_size, num_classes=num_classes, num_channels=channels)
    # The flags' values, 0 included, replace the builder's defaults (Swin's drop path is
    # 0.1): `--drop_path_rate=0` turns it off. `--model_kwargs` may still set them.
    for field in ("dropout_rate", "drop_path_rate"):
        if getattr(config, field) or field not in kwargs:
            kwargs[field] = getattr(config, field)
    if config.precision == "bfloat16":
        kwargs["dtype"] = "mixed_bfloat16"
    if config.remat:
        kwargs["remat"] = True
    if config.objective == "classification" and headless_by_default(config.model):
        # Trained on labels, a family that is headless by default (DINOv2, a feature extractor)
        # gets its classification head; `--model_kwargs='{"include_top": false}'` is refused then.
        kwargs["include_top"] = True
    if config.model in general_builders():
        model = builder_for(config.model)(**kwargs)
    else:
        model = keras_vit.build_variant(config.model, **kwargs)
    report = None
    if config.pretrained:
        report = keras_vit.load_weights(model, config.pretrained)
    return model, report


def mirror_averaged(model):
    """`model` on each image and on its mirror image, the two logits averaged (`--eval_flip`).

    Test-time reflections as in Krizhevsky et al. 2012 (Sec. 4.1), who average
    the softmax outputs of ten crops and their reflections; here the logits of
    the whole image and its reflection. A functional model over `model` itself
    (its weights, not a copy): what the run evaluates and the SavedModel serves
    when `--eval_flip` is on.

    Args:
        model: keras.Model. A classifier returning logits, taking images
            `(batch, height, width, channels)`.

    Returns:
        A `keras.Model` with `model`'s input and float32 logits out.
    """
    images = keras.Input(model.input_shape[1:], name="images")
    # Width is axis 2 of channels-last images: left and right swap, as the training flips do.
    views = [model(images), model(keras.ops.flip(images, axis=2))]
    logits = keras.ops.mean(keras.ops.stack([keras.ops.cast(v, "float32") for v in views]), axis=0)
    return keras.Model(images, logits, name=f"{model.name}_mirror_averaged")

"""FSDP-style sharding of keras_vit models through `keras.distribution` (JAX backend).

`layout_map` returns the `keras.distribution.LayoutMap` that
`keras.distribution.ModelParallel` needs: every large weight is split over the
mesh's model axis, the batch is split over its batch axis, and XLA's SPMD
partitioner inserts the gathers and reductions. Fully sharded data parallel
(FSDP, ZeRO-3: Rajbhandari et al. 2020, Sec. 5) in the form big_vision's
`shardings.fsdp` rule gives it; keras-hub's `get_layout_map` does the same for
its language models through the same Keras API.
"""

import collections
import math
import re

import keras

# Sharding a weight costs an all-gather of it at every use; below about 1 MiB of
# float32 the memory saved is not worth that latency (big_vision's rule stops at
# 4 MiB). ViT-B/16 then shards every kernel of its blocks and its head.
DEFAULT_MIN_SIZE = 2**18


def _feature_axes(shape):
    """The axes that may be split: features, never a spatial axis.

    A BiT convolution kernel `(kh, kw, in, out)` splits over `in` or `out`, a
    position-embedding grid `(rows, cols, D)` over `D`: a window or grid axis is
    short, and splitting it would only move neighbours apart.
    """
    if len(shape) == 4:
        return (2, 3)
    if len(shape) == 3:
        return (2,)
    return tuple(range(len(shape)))


def variable_axes(shape, axis_size, model_axis="model", min_size=DEFAULT_MIN_SIZE):
    """The layout of one weight: its largest feature axis divisible by the axis size.

    Follows big_vision's `shardings.fsdp` rule: the largest divisible axis (on a
    tie the later one, a kernel's output), another divisible axis if the largest
    is not, else replication; so is every 1-D weight (biases, norm scales, the
    class token, gates) and every weight under `min_size` elements.

    Args:
        shape: tuple of ints. The weight's shape.
        axis_size: int. Number of devices along the model axis.
        model_axis: str. Name of the mesh axis to split over. Defaults to `"model"`.
        min_size: int. Smallest number of elements worth splitting.
            Defaults to `DEFAULT_MIN_SIZE` (2**18).

    Returns:
        Tuple with one entry per axis of `shape`: `model_axis` for the split axis,
        `None` for the others (all `None`: replicated).
    """
    axes = [None] * len(shape)
    if len(shape) >= 2 and math.prod(shape) >= min_size:
        candidates = sorted(_feature_axes(shape), key=lambda i: (shape[i], i), reverse=True)
        divisible = [i for i in candidates if shape[i] % axis_size == 0]
        if divisible:
            axes[divisible[0]] = model_axis
    return tuple(axes)


def _check_arguments(model, mesh, model_axis, batch_axis, min_size):
    if not isinstance(mesh, keras.distribution.DeviceMesh):
        raise ValueError(f"`mesh` must be a `keras.distribution.DeviceMesh`. Received: mesh={mesh!r}")
    for name, axis in (("model_axis", model_axis), ("batch_axis", batch_axis)):
        if axis not in mesh.axis_names:
            raise ValueError(
                f"`mesh` has no axis named {axis!r} (`{name}`); it needs a batch and a model axis, "
                f"e.g. axis_names=('batch', 'model'). Received: mesh={mesh!r}"
            )
    if model_axis == batch_axis:
        raise ValueError(
            f"`model_axis` and `batch_axis` must name two different mesh axes. "
            f"Received: model_axis={model_axis!r}, batch_axis={batch_axis!r}"
        )
    if not isinstance(min_size, int) or isinstance(min_size, bool) or min_size < 1:
        raise ValueError(f"`min_size` must be a positive integer. Received: min_size={min_size!r}")
    if not isinstance(model, keras.Model) or not model.weights:
        raise ValueError(
            "`model` must be a built `keras.Model` with weights (the template whose weight "
            f"paths and shapes are read). Received: model={model!r}"
        )


def layout_map(model, mesh, model_axis="model", batch_axis="batch", min_size=DEFAULT_MIN_SIZE):
    """FSDP layouts for every weight of `model`, as a `keras.distribution.LayoutMap`.

    Each weight gets one key, its path anchored (`^encoderblock_0/attention/qkv/kernel$`),
    so that no key can match another weight; the layout of each follows
    `variable_axes` (big_vision's FSDP rule). It covers the fused qkv and output
    projections, the MLP, GPSA's projections, the patch projection and large
    position-embedding grids, the pre-logits and the head, and the BiT
    convolutions; biases, norm scales, tokens and gates stay replicated. Keras
    gives the optimizer's slots (AdamW moments, EMA copies) the layout of their
    weight, so they are split alike.

    Keras gives a variable its layout when the variable is created, so the map
    must exist before the distributed model is built. `model` is a template:
    only its weights' paths and shapes are read. Build it once without a
    distribution (its unsharded weights go with it), then the model to train
    under the distribution:

    ```python
    mesh = keras.distribution.DeviceMesh((2, 4), ("batch", "model"), keras.distribution.list_devices())
    template = keras_vit.ViT_H14(num_classes=10)
    keras.distribution.set_distribution(keras.distribution.ModelParallel(
        layout_map=keras_vit.layout_map(template, mesh), batch_dim_name="batch"))
    del template
    model = keras_vit.ViT_H14(num_classes=10)  # each large kernel split 4 ways
    ```

    Args:
        model: `keras.Model`. A built template of the model to distribute (same
            builder, same arguments).
        mesh: `keras.distribution.DeviceMesh` with axes `batch_axis` and `model_axis`.
        model_axis: str. Mesh axis that weights are split over. Defaults to `"model"`.
        batch_axis: str. Mesh axis that the batch is split over (pass the same
            name as `ModelParallel(batch_dim_name=...)`). Defaults to `"batch"`.
        min_size: int. Weights with fewer elements are replicated.
            Defaults to `DEFAULT_MIN_SIZE` (2**18, 1 MiB in float32).

    Returns:
        `keras.distribution.LayoutMap` over `mesh` with one key per weight of `model`.

    Raises:
        ValueError: if `mesh` is not a `DeviceMesh` with both axes, the axes are the
            same, `min_size` is not a positive integer, `model` has no weights, or two
            weights of `model` share a path.
    """
    _check_arguments(model, mesh, model_axis, batch_axis, min_size)
    axis_size = mesh.shape[list(mesh.axis_names).index(model_axis)]
    shared = [path for path, count in collections.Counter(v.path for v in model.weights).items() if count > 1]
    if shared:
        raise ValueError(
            f"Weights of `model` share the path {shared[0]!r}, so no key can tell them apart. "
            f"Received: model={model.name!r}"
        )
    layouts = keras.distribution.LayoutMap(mesh)
    for variable in model.weights:
        # Keras matches keys with `re.fullmatch`; escaped and anchored, a path
        # stays literal and can never widen its key to another weight.
        key = "^" + re.escape(variable.path) + "$"
        layouts[key] = variable_axes(tuple(variable.shape), axis_size, model_axis, min_size)
    return layouts

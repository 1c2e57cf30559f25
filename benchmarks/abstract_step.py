"""One training step of a Keras model as JAX traces it for abstract inputs: nothing allocated or run.

`benchmarks/saved_residuals.py` lists what the step keeps for its backward pass,
`benchmarks/attention_check.py` reads its compiled program; both trace the same
step. (`benchmarks/memory.py` traces a sharded one of its own, with the layouts
of a distribution.)
"""


def abstract_arguments(model, batch_size):
    """`(trainable, frozen, images, labels)` as `jax.ShapeDtypeStruct`s for a batch of `batch_size`."""
    import jax

    def shapes(variables):
        return [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in variables]

    images = jax.ShapeDtypeStruct((batch_size, *model.input_shape[1:]), "float32")
    labels = jax.ShapeDtypeStruct((batch_size,), "int32")
    return shapes(model.trainable_variables), shapes(model.non_trainable_variables), images, labels


def training_loss(model):
    """`loss(trainable, frozen, images, labels)`: the mean cross-entropy of a training-mode call.

    The logits are cast to float32 first, as a mixed-precision model's loss is taken.
    """
    import keras

    def loss(trainable, frozen, images, labels):
        logits, _ = model.stateless_call(trainable, frozen, images, training=True)
        losses = keras.losses.sparse_categorical_crossentropy(
            labels, keras.ops.cast(logits, "float32"), from_logits=True
        )
        return keras.ops.mean(losses)

    return loss

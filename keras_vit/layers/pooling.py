"""Reading the class token out of the encoder output."""

import keras


@keras.saving.register_keras_serializable(package="keras_vit")
class ClassTokenPooling(keras.layers.Layer):
    """Returns the first token of a sequence, the [class] token (ViT Eq. 4).

    Args:
        **kwargs: Base layer arguments.

    Call arguments:
        tokens: Tensor `(batch, length, width)`.

    Returns:
        Tensor `(batch, width)`.
    """

    def call(self, tokens):
        return tokens[:, 0]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[2])

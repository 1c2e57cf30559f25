"""ViT's MLP: two dense layers with an exact GELU between them (ViT Sec. 3.1, App. B.1)."""

import keras
from keras import ops

from keras_vit.layers.code_paths import code_path
from keras_vit.layers.dtype_policies import resolve_dtype_policies, with_quantized_dtypes
from keras_vit.layers.lean import erf_gelu, lean_gelu_dense
from keras_vit.layers.token_dense import dense_on_tokens
from keras_vit.layers.validation import check_positive_int, check_rate


def gelu(x):
    """Exact GELU, `x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2)))`.

    The exact form is the one of the reference implementations and of the PyTorch
    ports the published weights are evaluated with (the tanh approximation
    differs by up to ~1e-3). On TensorFlow it is written out with `erf` because
    `keras.activations.gelu` there computes `erfc`, which XLA lowers to an
    exponential and two polynomial branches: on XLA:CPU that alone took ~13% of a
    ViT-Ti/16 training step (BENCHMARKS.md), against ~2% for `erf`'s single
    polynomial. Other backends keep their own exact GELU: JAX lowers `erf` to a
    StableHLO composite that TensorFlow cannot load, which would break the
    SavedModel export of a JAX-backend model.
    """
    if keras.backend.backend() == "tensorflow":
        return erf_gelu(x)
    return keras.activations.gelu(x, approximate=False)


@keras.saving.register_keras_serializable(package="keras_vit")
class MLPBlock(keras.layers.Layer):
    """Two dense layers with a GELU between them, each followed by dropout.

    ViT Sec. 3.1 and App. B.1: the MLP has two layers with a GELU
    non-linearity, and dropout follows every dense layer. In training on the
    accelerator path (`keras_vit.layers.code_path`) without dropout, GELU and
    the second layer are one function whose backward pass keeps only the
    hidden layer (`keras_vit.layers.lean.lean_gelu_dense`).

    Args:
        mlp_dim: int. Width of the hidden layer.
        dropout_rate: float. Dropout after each dense layer. Defaults to 0.
        kernel_initializer: Initializer of the kernels. Defaults to
            `"glorot_uniform"` (reference ViT).
        bias_initializer: Initializer of the biases. Defaults to a normal with
            standard deviation 1e-6 (reference ViT).
        **kwargs: Base layer arguments.
    """

    def __init__(
        self,
        mlp_dim,
        dropout_rate=0.0,
        kernel_initializer="glorot_uniform",
        bias_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int(mlp_dim, "mlp_dim")
        check_rate(dropout_rate, "dropout_rate")
        self.mlp_dim = mlp_dim
        self.dropout_rate = dropout_rate
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(
            bias_initializer or keras.initializers.RandomNormal(stddev=1e-6)
        )

    def build(self, input_shape):
        def dense(units, name):
            return keras.layers.Dense(
                units,
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer,
                dtype=self.dtype_policy,
                name=name,
            )

        self.fc1 = dense(self._hidden_units(), "fc1")
        self.fc1.build(input_shape)
        self.fc2 = dense(input_shape[-1], "fc2")
        self.fc2.build((*input_shape[:-1], self.mlp_dim))
        self.dropout = keras.layers.Dropout(self.dropout_rate, dtype=self.dtype_policy)
        resolve_dtype_policies(self)

    def _hidden_units(self):
        """Outputs of `fc1` (a gated MLP's `fc1` packs its two halves)."""
        return self.mlp_dim

    def _lean(self, training):
        """Whether this call takes `lean_gelu_dense` (training on the accelerator path).

        It multiplies by `fc2`'s kernel itself, so only a plain `Dense`
        qualifies (no quantization, no LoRA), and only without the dropout
        between GELU and `fc2`, whose mask it would have to keep.
        """
        return (
            bool(training)
            and (self.dropout_rate == 0.0)
            and keras.backend.backend() in ("jax", "tensorflow")
            and self.fc2.quantization_mode is None
            and not self.fc2.lora_enabled
            and code_path() == "accelerator"
        )

    def call(self, x, training=None):
        hidden = dense_on_tokens(self.fc1, x)
        if self._lean(training):
            # The hidden layer is kept once for the backward pass, in the compute dtype.
            shape = ops.shape(hidden)
            rows = ops.reshape(hidden, (-1, self.mlp_dim))
            kernel = ops.cast(self.fc2.kernel, self.compute_dtype)
            bias = None if self.fc2.bias is None else ops.cast(self.fc2.bias, self.compute_dtype)
            outputs = lean_gelu_dense(rows, kernel, bias)
            return ops.reshape(outputs, (*shape[:-1], outputs.shape[-1]))
        x = self.dropout(gelu(hidden), training=training)
        return self.dropout(dense_on_tokens(self.fc2, x), training=training)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "mlp_dim": self.mlp_dim,
                "dropout_rate": self.dropout_rate,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return with_quantized_dtypes(self, config)

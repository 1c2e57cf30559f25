"""Masked patch prediction: ViT's self-supervised pretraining (Dosovitskiy et al. 2021, App. B.1.2).

"We corrupt 50% of patch embeddings by either replacing their embeddings with a
learnable [mask] embedding (80%), a random other patch embedding (10%) or just
keeping them the same (10%) ... Finally we predict the 3bit, mean color (i.e.,
512 colors in total) of every corrupted patch using their respective patch
representations." The appendix also tried a 4x4 downsized patch and the full
patch by L2 regression; `keras_vit.pretraining` computes the three targets.

`MaskedPatchPrediction` wraps any ViT-like keras_vit model (ViT, DeiT, hybrid,
ConViT, Axial-ViT): it calls the model's own layers, corrupting the patch
embeddings between their projection and the position embeddings, and predicts
each patch's target from its token after the final norm. The wrapped model's
weights are the ones trained; its classification head is not used. After
pretraining, `encoder` is an ordinary keras_vit model to fine-tune (save it,
then load it with `--pretrained=` or `model.load_weights`).
"""

import keras
from keras import ops

from keras_vit import inspection, pretraining
from keras_vit.layers.masking import PatchCorruption, check_corruption_rates


def _per_replica(loss):
    """`loss` divided by the replicas of a `tf.distribute` strategy, whose gradients are summed.

    Keras' compiled losses do this themselves; a loss computed here must too,
    or a MirroredStrategy / TPUStrategy run would step `replicas` times too far.
    JAX's distribution averages by itself.
    """
    if keras.backend.backend() != "tensorflow":
        return loss
    import tensorflow as tf

    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return loss if replicas == 1 else loss / replicas


def _check_target(target, bits):
    if target not in pretraining.TARGETS:
        raise ValueError(f"`target` must be one of {pretraining.TARGETS}. Received: target={target!r}")
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"`bits` must be an int in [1, 8]. Received: bits={bits!r}")


@keras.saving.register_keras_serializable(package="keras_vit")
class MaskedPatchPrediction(keras.Model):
    """A ViT-like model trained to predict its corrupted patches (ViT App. B.1.2).

    Called on images `(batch, height, width, channels)` in [0, 255], it returns
    `(predictions, chosen)`: each patch's prediction (`(batch, N, 2 ** (bits * C))`
    logits for `"mean_color"`, `(batch, N, 16, 2 ** (bits * C))` for
    `"downsized"`, `(batch, N, pixels)` for `"pixels"`) and the float mask of
    the corrupted patches. `fit` needs no labels: the loss (cross-entropy, or
    the squared error for `"pixels"`) is computed from the images themselves,
    over the corrupted patches only.

    Args:
        encoder: a ViT-like keras_vit model (any head; it is not used) with a
            static image size whose token stride (the patch, times a hybrid
            ResNet's downsampling) is square.
        target: str. `"mean_color"` (the paper's default), `"downsized"` or
            `"pixels"`. Defaults to `"mean_color"`.
        corruption_rate: float in (0, 1]. Fraction of the patches corrupted.
            Defaults to 0.5 (ViT's; BERT's 0.15 is the option the paper names).
        mask_rate: float. Fraction of the corrupted patches replaced by the
            learned `[mask]` embedding. Defaults to 0.8.
        random_rate: float. Fraction of the corrupted patches replaced by
            another patch of the same image (the rest are kept). Defaults to
            0.1.
        bits: int in [1, 8]. Bits per colour channel of the classification
            targets. Defaults to 3.
        seed: int or None. Seed of the corruption.
        **kwargs: `keras.Model` arguments (`name`).

    Raises:
        ValueError: for a Swin model (no single patch grid), a non-square token
            stride or a bad argument, naming it.
    """

    def __init__(self, encoder, target="mean_color", corruption_rate=0.5, mask_rate=0.8, random_rate=0.1,
                 bits=3, seed=None, **kwargs):
        super().__init__(**kwargs)
        inspection.check_model(encoder)
        _check_target(target, bits)
        check_corruption_rates(corruption_rate, mask_rate, random_rate, rate_name="corruption_rate")
        self.encoder = encoder
        self.target = target
        self.corruption_rate = corruption_rate
        self.mask_rate = mask_rate
        self.random_rate = random_rate
        self.bits = bits
        self.seed = seed

        self.patch_encoder = inspection.patch_encoder(encoder)  # raises for Swin
        stride = inspection.token_stride(encoder)
        if stride[0] != stride[1]:
            raise ValueError(
                "Masked patch prediction needs square patches (its targets are square blocks of pixels). "
                f"Received: an encoder whose tokens cover {stride[0]}x{stride[1]} pixels"
            )
        self.target_patch_size = stride[0]
        if target == "downsized" and self.target_patch_size % 4:
            raise ValueError(
                "`target='downsized'` averages each patch down to 4x4 cells, so the patches must be a multiple of 4 "
                f"pixels on a side. Received: an encoder whose tokens cover {stride[0]}x{stride[1]} pixels"
            )
        self.channels = encoder.inputs[0].shape[-1]
        # The encoder's graph cut at the PatchEncoder: what comes before it, and what after.
        self.stem = keras.Model(encoder.inputs, self.patch_encoder.input, name="stem")
        self.trunk = keras.Model(self.patch_encoder.output, inspection.final_norm(encoder).output, name="trunk")
        # The class (and distillation) tokens that lead the final tokens: the patches follow them.
        counts = inspection.prefix_token_counts(encoder)
        self.prefix_tokens = counts[-1] if counts else 0
        policy = self.patch_encoder.dtype_policy
        self.corruption = PatchCorruption(corruption_rate, mask_rate, random_rate, seed=seed, dtype=policy,
                                          name="corruption")
        classes = pretraining.num_target_classes(target, self.channels, bits)
        units = {"mean_color": classes, "downsized": 16 * (classes or 0),
                 "pixels": self.target_patch_size**2 * self.channels}[target]
        self.head = keras.layers.Dense(units, kernel_initializer="zeros", dtype=policy,
                                       name="prediction_head")
        # Built now, so that the weights exist before the first call (summary, loading).
        grid = self.patch_encoder.output.shape
        width = grid[-1]
        num_patches = self.patch_encoder.grid_size[0] * self.patch_encoder.grid_size[1]
        self.corruption.build((None, num_patches, width))
        self.head.build((None, None, width))

    def call(self, images, training=None):
        x = self.patch_encoder.project(self.stem(images, training=training))
        grid = ops.shape(x)
        tokens = ops.reshape(x, (grid[0], grid[1] * grid[2], x.shape[-1]))
        tokens, chosen = self.corruption(tokens)
        x = self.patch_encoder.add_position(ops.reshape(tokens, grid))
        x = self.trunk(x, training=training)[:, self.prefix_tokens:]
        predictions = self.head(x)
        if self.target == "downsized":
            predictions = ops.reshape(predictions, (grid[0], -1, 16, predictions.shape[-1] // 16))
        return predictions, chosen

    def targets(self, images):
        """The targets of `images` (`keras_vit.pretraining`), in `call`'s patch order."""
        if self.target == "mean_color":
            return pretraining.mean_color_targets(images, self.target_patch_size, self.bits)
        if self.target == "downsized":
            return pretraining.downsized_patch_targets(images, self.target_patch_size, 4, self.bits)
        return pretraining.patch_pixel_targets(images, self.target_patch_size)

    def patch_losses(self, images, predictions):
        """The loss of every patch `(batch, N)`, corrupted or not."""
        targets = self.targets(images)
        predictions = ops.cast(predictions, "float32")
        if self.target == "pixels":
            return ops.mean(ops.square(predictions - targets), axis=-1)
        losses = keras.losses.sparse_categorical_crossentropy(targets, predictions, from_logits=True)
        return ops.mean(losses, axis=-1) if self.target == "downsized" else losses

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The mean loss over the corrupted patches; labels (`y`) are ignored."""
        predictions, chosen = y_pred
        chosen = ops.cast(chosen, "float32")
        loss = ops.sum(self.patch_losses(x, predictions) * chosen) / ops.maximum(ops.sum(chosen), 1.0)
        loss = _per_replica(loss)
        # The encoder's own regularization losses (`add_loss`), as the default compute_loss adds them.
        for extra in self.losses:
            loss = loss + ops.cast(self._aggregate_additional_loss(extra), "float32")
        return loss

    def get_config(self):
        return {
            **super().get_config(),
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "target": self.target,
            "corruption_rate": self.corruption_rate,
            "mask_rate": self.mask_rate,
            "random_rate": self.random_rate,
            "bits": self.bits,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)

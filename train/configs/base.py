"""The training configuration: every setting of a run, as plain data."""

import dataclasses


@dataclasses.dataclass
class TrainConfig:
    """Settings of a training run; every field is also a command-line flag.

    Batch sizes are global (all replicas together). `steps`, when set, replaces
    `epochs`. `warmup_steps` counts optimizer steps.
    """

    model: str = "VisionTransformer"
    model_kwargs: dict = dataclasses.field(default_factory=dict)
    dataset: str = "fashion_mnist"
    data_dir: str = None
    train_split: str = "train"
    eval_split: str = "test"
    image_size: int = None  # None: the dataset's own size
    # An image folder's channels: None or 3 reads RGB, 1 grayscale (Pillow's luma: gray photos, or
    # fine-tuning a model of gray images such as the main job's). Other datasets have their own.
    image_channels: int = None
    batch_size: int = 128
    eval_batch_size: int = None
    epochs: int = 10
    steps: int = None
    optimizer: str = "adamw"
    learning_rate: float = 1e-3
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-7  # Keras' default; the DeiT, ConViT and Swin code use 1e-8
    momentum: float = 0.9
    warmup_steps: int = 0
    decay: str = "cosine"
    end_learning_rate: float = 0.0
    weight_decay: float = 0.0
    clip_norm: float = None
    ema_decay: float = None
    label_smoothing: float = 0.0
    # inception_crop (ViT) | random_resized_crop (DeiT) | padded_crop (ResNet's CIFAR) | flip | none
    augmentation: str = "inception_crop"
    # timm's RandAugment policy (keras_vit.preprocessing.randaugment), e.g. DeiT's
    # "rand-m9-mstd0.5-inc1"; an integer N is that policy at magnitude N.
    randaugment: str = None
    random_erasing: float = 0.0  # probability, per image (DeiT: 0.25, per-pixel normal noise)
    repeated_augmentation: int = 1  # copies of each image per epoch (DeiT's sampler: 3)
    # Evaluation: a known --pretrained checkpoint's own transform; else, with eval_crop,
    # the shorter side resized to image_size / eval_crop (bicubic) and the centre cropped
    # (DeiT, ConViT, Swin: 0.875); else a plain resize to image_size.
    eval_crop: float = None
    # Evaluate and serve the average of each image's logits and its mirror image's (test-time
    # flips: a model trained with flips has learned the symmetry). The exported SavedModel
    # averages the same two views; model.keras is the network itself. The summary gives the
    # one-view accuracy too.
    eval_flip: bool = False
    mixup: float = 0.0
    cutmix: float = 0.0
    # MixUp/CutMix draw one lambda (and box) per group of this many consecutive images, as
    # timm's `Mixup` does per GPU batch in the reference runs; None: per (per-replica) batch.
    mixing_group: int = None
    dropout_rate: float = 0.0
    drop_path_rate: float = 0.0
    precision: str = "float32"
    steps_per_execution: int = 1
    jit_compile: bool = True
    remat: bool = False  # recompute each block in the backward pass: less memory, a larger batch fits
    pretrained: str = None
    # DeiT distillation (train/distillation.py, train/teachers.py): a teacher (.keras file, SavedModel
    # directory or variant name) and how its logits teach the student.
    teacher: str = None
    teacher_weights: str = None
    distillation: str = "none"  # none | hard | soft
    distillation_tau: float = 1.0  # DeiT's code's defaults: tau 1.0, alpha 0.5
    distillation_alpha: float = 0.5
    # What the run learns: "classification" from the labels, or ViT App. B.1.2's
    # "masked_patch_prediction" from the images alone (keras_vit.MaskedPatchPrediction); then
    # the exported model.keras is the pretrained encoder, to fine-tune with --pretrained.
    objective: str = "classification"
    mpp_target: str = "mean_color"  # mean_color (3-bit mean colour) | downsized (4x4, 3 bits) | pixels (L2)
    mpp_corruption_rate: float = 0.5  # ViT's; BERT's is 0.15
    checkpoint_every_steps: int = 0
    # The papers' analysis logged as the model trains (train/analysis_logging.py):
    # comma-separated gates, nonlocality, distance, position_similarity, or all;
    # computed on the first `analysis_images` evaluation images.
    log_analysis: str = None
    analysis_images: int = 256
    seed: int = 0

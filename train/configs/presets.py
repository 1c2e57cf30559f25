"""Named presets: the papers' settings and two small ones that train on a laptop CPU."""

import copy
import dataclasses

from train.configs.base import TrainConfig

# Fashion-MNIST (embedded) on a 2-core CPU: the recipe of both small presets (`default` changes
# three settings, below).
_FASHION_MNIST = TrainConfig(
    model="VisionTransformer",
    dataset="fashion_mnist",
    batch_size=128,
    epochs=10,
    optimizer="adamw",
    learning_rate=1e-3,
    warmup_steps=470,
    decay="cosine",
    weight_decay=0.05,
    clip_norm=1.0,
    label_smoothing=0.1,
    augmentation="flip",
    ema_decay=0.999,
)
# The transformer of both: width 96, 6 blocks, 4 heads, MLP 192, on 16 tokens + class.
_SMALL_TRANSFORMER = dict(hidden_size=96, num_layers=6, num_heads=4, mlp_dim=192)

PRESETS = {
    # The main job: a hybrid (ViT Sec. 3.1). BiT's ResNet root alone (7x7/2 standardized
    # convolution, GroupNorm, 3x3/2 max-pool, 64 channels) turns 32x32 images into an 8x8
    # map, cut into 2x2 patches. Same tokens and transformer as fashion_mnist_vit, but
    # the convolution gives the locality a plain ViT must learn from data (ViT Sec. 4.4:
    # hybrids lead at small budgets): 91% test accuracy in 10 epochs where the plain
    # ViT stops near 89% (BENCHMARKS.md, "Main job"). Two more epochs, an EMA of about
    # the last 100 steps (0.999's 1,000 trail a cosine schedule that ends at 0) and each
    # test image averaged with its mirror image (the model trained with flips): 92.2%.
    "default": dataclasses.replace(
        _FASHION_MNIST, image_size=32, model_kwargs=dict(resnet_stages=(), patch_size=2, **_SMALL_TRANSFORMER),
        epochs=12, ema_decay=0.99, eval_flip=True,
    ),
    # The plain ViT: 7x7 patches of the 28x28 images (the experiments/ scripts' model).
    "fashion_mnist_vit": dataclasses.replace(_FASHION_MNIST, model_kwargs=dict(patch_size=7, **_SMALL_TRANSFORMER)),
    # ViT Table 3 (JFT-300M rows; also ImageNet-21k with wd 0.03): Adam b1 0.9 b2 0.999,
    # batch 4096, 10k warmup steps, linear decay, weight decay 0.1. Keras' AdamW
    # multiplies the decay by the learning rate (decoupled weight decay).
    "vit_pretrain": TrainConfig(
        model="ViT_B16",
        model_kwargs=dict(representation_size=768),
        dataset="imagenet2012",
        eval_split="validation",
        image_size=224,
        batch_size=4096,
        epochs=90,
        optimizer="adamw",
        learning_rate=8e-4,
        warmup_steps=10_000,
        decay="linear",
        weight_decay=0.1,
        augmentation="inception_crop",
        precision="bfloat16",
    ),
    # ViT Table 3, ImageNet row: 300 epochs, base LR 3e-3, cosine, wd 0.3, dropout 0.1,
    # and gradient clipping at global norm 1.
    "vit_imagenet": TrainConfig(
        model="ViT_B16",
        dataset="imagenet2012",
        eval_split="validation",
        image_size=224,
        batch_size=4096,
        epochs=300,
        optimizer="adamw",
        learning_rate=3e-3,
        warmup_steps=10_000,
        decay="cosine",
        weight_decay=0.3,
        dropout_rate=0.1,
        clip_norm=1.0,
        augmentation="inception_crop",
        precision="bfloat16",
    ),
    # ViT App. B.1.2, masked patch prediction (self-supervised): "1M steps (ca. 14 epochs)
    # with batch size 4096 on JFT ... Adam, with a base learning rate of 2e-4, warmup of
    # 10k steps and cosine learning rate decay", 50% of the patches corrupted, the 3-bit
    # mean colour predicted. The paper saw diminishing returns after 100k steps and similar
    # gains pretraining on ImageNet, the dataset here (`--steps=100000` is that shorter run).
    # Adam: AdamW with no weight decay. Fine-tune the exported model.keras with `vit_finetune`
    # and `--pretrained=<workdir>/model.keras`.
    "vit_masked_patch_prediction": TrainConfig(
        model="ViT_B16",
        objective="masked_patch_prediction",
        mpp_target="mean_color",
        mpp_corruption_rate=0.5,
        dataset="imagenet2012",
        eval_split="validation",
        image_size=224,
        batch_size=4096,
        steps=1_000_000,
        optimizer="adamw",
        learning_rate=2e-4,
        warmup_steps=10_000,
        decay="cosine",
        weight_decay=0.0,
        augmentation="inception_crop",
        precision="bfloat16",
    ),
    # ViT Table 4 / App. B.1.1 fine-tuning: SGD momentum 0.9, batch 512, cosine decay,
    # no weight decay, clipping at norm 1, resolution 384, ImageNet 20k steps with LR
    # from {0.003, 0.01, 0.03, 0.06}; 500 warmup steps as in the reference code.
    # Polyak averaging 0.9999 as for the paper's Table 2 ImageNet results.
    "vit_finetune": TrainConfig(
        model="ViT_B16",
        pretrained="imagenet21k",
        dataset="imagenet2012",
        eval_split="validation",
        image_size=384,
        batch_size=512,
        steps=20_000,
        optimizer="sgd",
        learning_rate=0.03,
        momentum=0.9,
        warmup_steps=500,
        decay="cosine",
        weight_decay=0.0,
        clip_norm=1.0,
        ema_decay=0.9999,
        augmentation="inception_crop",
        precision="bfloat16",
    ),
    # DeiT recipe (Touvron et al. 2021, Table 9; facebookresearch/deit main.py's defaults),
    # which ConViT keeps unchanged: AdamW, LR 5e-4 x batch / 512, wd 0.05, 300 epochs with
    # 5 warmup epochs and cosine decay to 1e-5, label smoothing 0.1, stochastic depth 0.1,
    # and timm's training transform as DeiT calls it: random resized crop (8-100% of the
    # area, bicubic), flip, RandAugment "rand-m9-mstd0.5-inc1", random erasing 0.25
    # (per-pixel noise), MixUp 0.8 / CutMix 1.0, repeated augmentation x3; evaluation at
    # the shorter side 256/224 of the size, centre crop. docs/recipes.md compares every
    # setting with the paper and the code. DeiT-S: ImageNet mean/std inputs and DeiT's
    # initialisation. With a teacher: `--model=DeiT_S16_distilled --teacher=... --distillation=hard`.
    "deit": TrainConfig(
        model="DeiT_S16",
        dataset="imagenet2012",
        eval_split="validation",
        image_size=224,
        batch_size=1024,
        epochs=300,
        optimizer="adamw",
        adam_epsilon=1e-8,  # timm's create_optimizer, --opt-eps
        learning_rate=5e-4 * 1024 / 512,
        warmup_steps=5 * 1251,
        decay="cosine",
        end_learning_rate=1e-5,
        weight_decay=0.05,
        label_smoothing=0.1,
        augmentation="random_resized_crop",
        randaugment="rand-m9-mstd0.5-inc1",
        random_erasing=0.25,
        repeated_augmentation=3,
        mixup=0.8,
        cutmix=1.0,
        mixing_group=256,  # DeiT-S/Ti: 4 GPUs x 256 (DeiT's README); timm mixes per GPU batch
        drop_path_rate=0.1,
        eval_crop=0.875,
        precision="bfloat16",
    ),
}
# The DeiT recipe on ConViT-S (facebookresearch/convit main.py keeps DeiT's defaults,
# repeated augmentation included); a deep copy, so that the two presets share no dict.
PRESETS["convit"] = dataclasses.replace(copy.deepcopy(PRESETS["deit"]), model="ConViT_S")
# Swin App. A2.1 (Liu et al. 2021): DeiT's augmentations minus repeated augmentation
# and EMA (off here too): AdamW, batch 1024, LR 1e-3, wd 0.05, 300 epochs with 20
# warmup epochs (1251 steps each, as in `deit`) and cosine decay, label smoothing 0.1,
# RandAugment m9, MixUp 0.8, CutMix 1.0, random erasing 0.25. Stochastic depth 0.2 for
# Swin-T; for the larger models pass `--model=Swin_S --drop_path_rate=0.3` or
# `--model=Swin_B --drop_path_rate=0.5`. Clipping at global norm 5 and the final LR 1e-5
# are the reference code's (`CLIP_GRAD`, `MIN_LR` scaled to batch 1024).
PRESETS["swin"] = dataclasses.replace(
    copy.deepcopy(PRESETS["deit"]), model="Swin_T", learning_rate=1e-3, warmup_steps=20 * 1251, clip_norm=5.0,
    drop_path_rate=0.2, repeated_augmentation=1, mixing_group=128,  # 8 GPUs x 128 (Swin's README)
)

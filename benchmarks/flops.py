"""Analytic multiply-accumulate counts of keras_vit models: `keras_vit.analysis.flops`.

Kept as a module of the benchmarks, whose scripts and experiments import it by
this name; the counter itself lives in the library.
"""

from keras_vit.analysis.flops import (  # noqa: F401 - re-exported
    block_macs,
    forward_macs,
    inference_flops,
    patch_merging_macs,
    swin_block_macs,
    swin_forward_macs,
    train_flops,
)

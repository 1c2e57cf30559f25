"""TensorFlow's BFC CPU allocator for training, asked for before TensorFlow starts.

Imports nothing but `os`, so that an entry point can call it before it imports
TensorFlow or Keras.
"""

import os

ALLOCATOR_VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"


def use_bfc_cpu_allocator():
    """Sets `TF_CPU_ALLOCATOR_USE_BFC=true` unless the user set it.

    TensorFlow's default CPU allocator gives every large buffer back to the
    operating system, so each XLA step page-faults its whole working set in
    again: a fifth of a ViT training step on a CPU went to the kernel
    (BENCHMARKS.md, "What closed most of the training gap"). The BFC allocator
    keeps and reuses the memory. TensorFlow reads the variable once, at its
    first op, so the training and benchmark entry points call this before they
    import TensorFlow; a value set by the user is left alone (`false` keeps the
    default allocator). The library itself leaves the environment as it is.
    """
    os.environ.setdefault(ALLOCATOR_VARIABLE, "true")

"""What the scripts of `benchmarks/` and `experiments/` share, in one place neither reaches around.

- `runs.reporting`: a measuring child's result line and its parent's collection of it,
  medians, atomic writes, a Markdown section replaced in BENCHMARKS.md or EXPERIMENTS.md,
  the scripts' checks of counts, and one- or two-block smoke models.
- `runs.students`: Fashion-MNIST slices as IDX files, and trainer runs of the plain ViT
  preset (`train/main.py` in a process of its own) with the preset's schedule scaled to the
  run, and the machine a report names.
- `runs.reference`: timm and torch as the reference implementation, with the torchvision
  shim this CPU needs (the tests import it too).

Not part of the installed package: the scripts run from the repository's root.
"""

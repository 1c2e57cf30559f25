"""timm, imported as an independent reference implementation (tests only).

torchvision has no CPU build here: its wheel installs but its compiled ops do not
load, and `import torchvision` then fails while registering fake kernels for the
`nms` and `qnms` ops. timm imports torchvision (for its data transforms, which
these tests do not use), so the two op schemas are declared first; every other
torchvision op registration is skipped by torchvision itself when ops are absent.
"""

import torch


def _declare_torchvision_ops():
    try:
        import torchvision  # noqa: F401

        return
    except Exception:  # noqa: BLE001 - any failure means the ops must be declared
        pass
    import sys

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    library = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _declare_torchvision_ops.library = library  # keep the definitions alive


_declare_torchvision_ops()
import timm  # noqa: E402

__all__ = ["timm", "torch"]

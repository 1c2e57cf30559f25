"""ConViT's gates (ConViT Fig. 6): how much attention each GPSA head pays to position."""

import numpy as np

from keras_vit.models.convit.inspection import gpsa_blocks


def gpsa_gating(model):
    """`sigma(lambda_h)` of every GPSA layer: the weight of positional attention (ConViT Fig. 6).

    Returns:
        Array `(gpsa_layers, heads)`; 1 means purely positional, 0 purely content.
    """
    gates = [block.attention_gates() for block in gpsa_blocks(model)]
    if not gates:
        raise ValueError(f"Model {model.name!r} has no GPSA layers (only ConViT models do).")
    return np.stack(gates)


def plot_gpsa_gating(gates):
    """sigma(lambda_h) per GPSA layer, a line per head and their mean in black (ConViT Fig. 6)."""
    # Imported on use: matplotlib is only needed for figures (extra "analysis").
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    layers = np.arange(1, gates.shape[0] + 1)
    for h in range(gates.shape[1]):
        ax.plot(layers, gates[:, h], alpha=0.6)
    ax.plot(layers, gates.mean(axis=1), color="black", linewidth=2, label="mean")
    ax.set_ylim(0, 1)
    ax.set_xlabel("GPSA layer")
    ax.set_ylabel(r"Gating $\sigma(\lambda_h)$")
    ax.legend()
    fig.tight_layout()
    return fig

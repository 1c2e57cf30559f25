"""Matplotlib figures of the analysis tools, drawn as in the papers. Each returns a Figure."""

import numpy as np


__all__ = ["plot_attention_rollout", "plot_attention_distance", "plot_position_embedding_similarity", "plot_embedding_filters"]


def _pyplot():
    # Imported on use: matplotlib is only needed for figures (extra "analysis").
    import matplotlib.pyplot as plt

    return plt


def plot_attention_rollout(images, heatmaps, max_images=4):
    """Images beside their rollout maps (ViT Fig. 6): the map masks the image."""
    plt = _pyplot()
    count = min(len(images), max_images)
    fig, axes = plt.subplots(2, count, figsize=(3 * count, 6), squeeze=False)
    for i in range(count):
        image = np.asarray(images[i], dtype="float32")
        image = (image - image.min()) / max(np.ptp(image), 1e-6)
        if image.shape[-1] == 1:
            image = np.repeat(image, 3, axis=-1)
        axes[0, i].imshow(image)
        axes[1, i].imshow(image * heatmaps[i][..., None])
        for row, title in ((0, "Input"), (1, "Attention")):
            axes[row, i].set_title(title)
            axes[row, i].axis("off")
    fig.tight_layout()
    return fig


def plot_attention_distance(distances, title="Mean attention distance", ylabel="pixels"):
    """One dot per head at each layer (ViT Fig. 7 right; ConViT Fig. 5 with nonlocality)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4))
    layers, heads = distances.shape
    for h in range(heads):
        ax.scatter(np.arange(layers), distances[:, h], s=12, label=f"head {h}")
    ax.set_xlabel("Network depth (layer)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if heads <= 16:
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def plot_position_embedding_similarity(similarity):
    """A grid of maps: patch (i, j)'s cosine similarity to all patches (ViT Fig. 7 centre)."""
    plt = _pyplot()
    rows, cols = similarity.shape[:2]
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.8 + 1, rows * 0.8), squeeze=False)
    image = None
    for i in range(rows):
        for j in range(cols):
            image = axes[i, j].imshow(similarity[i, j], vmin=-1, vmax=1)
            axes[i, j].set_xticks([])
            axes[i, j].set_yticks([])
    fig.supxlabel("Input patch column")
    fig.supylabel("Input patch row")
    fig.colorbar(image, ax=axes, shrink=0.6, label="Cosine similarity")
    return fig


def plot_embedding_filters(components, columns=7):
    """Principal components of the patch-embedding filters (ViT Fig. 7 left)."""
    plt = _pyplot()
    count = len(components)
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(columns, rows), squeeze=False)
    for index, ax in enumerate(axes.ravel()):
        ax.axis("off")
        if index < count:
            filt = components[index]
            filt = (filt - filt.min()) / max(np.ptp(filt), 1e-12)
            ax.imshow(filt[..., 0] if filt.shape[-1] == 1 else filt, cmap="gray" if filt.shape[-1] == 1 else None)
    fig.suptitle("RGB embedding filters (principal components)")
    return fig

"""ViT Fig. 7 in miniature: mean attention distance per head against depth, and the position-embedding similarity.

    python experiments/vit_attention_distance.py --write

The claims (Dosovitskiy et al. 2021, Sec. 4.5, Fig. 7 and App. D.7): after
training, (right) some heads of the lowest blocks attend locally and others
already attend across the image, and the attention distance grows with depth;
(centre) the learned position embeddings encode the 2D layout: an embedding is
most similar to those of its own row and column and of nearby patches.

Setup: the `fashion_mnist_vit` preset's ViT (7x7 patches on 28x28 images: a 4x4 grid;
width 96, 6 blocks, 4 heads, MLP 192; the ViT authors' initialization unless
`--initialization=deit`), trained by `train/main.py` with the preset's recipe
on a class-balanced `--train_size` (default all 60,000) of Fashion-MNIST for
`--epochs` (default 10), with `--log_analysis=distance,position_similarity`
(the trainer's callback: both before training and after every epoch, on the
first 256 test images, for the weights being trained). After training the
exported model (EMA weights) is analysed with `keras_vit.analysis`: the mean
attention distance (App. D.6: query-key distance in pixels weighted by the
attention, averaged over queries and the first `--attention_images` test
images) of every head and block, and the cosine similarity of every pair of
position embeddings.

Reading the result: the table lists each block's distance (mean, lowest and
highest head) after training and at initialization, beside the distance that
uniform attention over the 16 patches would give; the claim holds when the
lowest blocks have heads well below it and others near it, and the spread
narrows with depth. The second table compares the similarity of
4-neighbouring patches' embeddings with that of all other pairs (2D
structure: neighbours clearly higher). Figures: distance per head against depth
(and per block over training), and the similarity maps (one per patch, as
Fig. 7 centre).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments import common  # noqa: E402
from train.analysis_logging import neighbour_similarity  # noqa: E402

NAME = "vit_attention_distance"
TITLE = "ViT Fig. 7: attention distance against depth, position-embedding similarity"


def parse_args(argv=None):
    parser = common.make_parser(__doc__, NAME, seeds="0")
    parser.add_argument("--train_size", type=common.positive("train_size"), default=common.FULL_TRAIN_SIZE)
    parser.add_argument("--test_size", type=common.positive("test_size"), default=common.FULL_TEST_SIZE)
    parser.add_argument("--epochs", type=common.positive("epochs"), default=10)
    parser.add_argument("--attention_images", type=common.positive("attention_images"), default=500,
                        help="test images the final attention distance is averaged over (default 500)")
    parser.add_argument("--initialization", choices=("vit", "deit"), default="vit",
                        help="the ViT's initialization (default vit, the preset's)")
    args = parser.parse_args(argv)
    common.check_arguments(parser, args)
    return args


def analyse(model_path, images):
    """`(distance (layers, heads) in pixels, similarity (rows, cols, rows, cols))` of a trained model."""
    import keras

    import keras_vit  # noqa: F401  (registers the layers for loading)
    from keras_vit import analysis

    model = keras.saving.load_model(model_path, compile=False)
    grid = analysis.grid_size(model)
    maps = analysis.attention_maps(model, images)
    pixels = model.input_shape[1] / grid[0]
    distance = analysis.mean_attention_distance(maps, grid, pixels)
    uniform = analysis.patch_distances(grid).mean() * pixels
    return distance, analysis.position_embedding_similarity(model), uniform


def tables(distances, initial, similarity, initial_similarity, uniform):
    """The per-block distance table and the position-similarity table."""
    distance = distances.mean(axis=0)  # over seeds: (layers, heads)
    start = initial.mean(axis=0)
    header = ["block", "mean attention distance, px (mean over heads)", "lowest head", "highest head",
              "per head", "at initialization (mean over heads)", "uniform attention"]
    rows = [[block + 1, f"{distance[block].mean():.2f}", f"{distance[block].min():.2f}",
             f"{distance[block].max():.2f}", ", ".join(f"{d:.1f}" for d in distance[block]),
             f"{start[block].mean():.2f}", f"{uniform:.2f}"] for block in range(distance.shape[0])]
    similarity_rows = [
        ["at initialization", f"{np.mean([s[0] for s in initial_similarity]):.3f}",
         f"{np.mean([s[1] for s in initial_similarity]):.3f}"],
        ["after training (EMA weights)", f"{np.mean([s[0] for s in similarity]):.3f}",
         f"{np.mean([s[1] for s in similarity]):.3f}"],
    ]
    similarity_table = common.markdown_table(
        ["position embeddings", "cosine similarity of 4-neighbours", "of all other pairs"], similarity_rows)
    return common.markdown_table(header, rows) + "\n\n" + similarity_table


def distance_figure(distances, epochs, history, uniform, path):
    plt = common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    distance = distances.mean(axis=0)
    layers, heads = distance.shape
    for head in range(heads):
        left.scatter(np.arange(1, layers + 1), distance[:, head], s=14, label=f"head {head + 1}")
    left.axhline(uniform, color="gray", linestyle="--", linewidth=0.8, label="uniform attention")
    left.set_xlabel("Network depth (block)")
    common.integer_ticks(left)
    left.set_ylabel("Mean attention distance (pixels)")
    left.set_title("After training (EMA weights)")
    left.legend(fontsize=7)
    colors = plt.cm.viridis(np.linspace(0, 0.9, layers))
    for layer in range(layers):
        right.plot(epochs, history[:, layer], color=colors[layer], label=f"block {layer + 1}")
    right.axhline(uniform, color="gray", linestyle="--", linewidth=0.8)
    right.set_xlabel("epoch")
    common.integer_ticks(right)
    right.set_ylabel("Mean attention distance (pixels, mean over heads)")
    right.set_title("During training (logged weights)")
    right.legend(fontsize=7)
    fig.tight_layout()
    return common.save_figure(fig, path)


def similarity_figure(similarity, path):
    from keras_vit.analysis.plots import plot_position_embedding_similarity

    fig = plot_position_embedding_similarity(similarity)
    fig.suptitle("Position embedding similarity (after training)")
    return common.save_figure(fig, path)


def notes(args, kwargs, steps, batch_size, train_size, test_size, attention_images, analysis_images):
    warmup, ema = common.scaled_schedule(steps)
    return (f"Data: a class-balanced {train_size} of the Fashion-MNIST training images, the first {test_size} test "
            f"images. Model: ViT, " + ", ".join(f"{k} {v}" for k, v in kwargs.items()) +
            f". Recipe: the `fashion_mnist_vit` preset's, batch {batch_size}, {steps} steps, warmup {warmup}, EMA decay {ema}; "
            f"seeds {', '.join(map(str, args.seeds))} (values averaged over them). After training: the exported "
            f"model (EMA weights), its attention distance over the first {attention_images} test images; at "
            "initialization and over training: the trainer's `--log_analysis` history "
            f"({analysis_images} test images). "
            "Uniform "
            "attention: the mean distance between patch centres, what a head attending equally everywhere gives.")


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    kwargs = dict(common.PRESET_MODEL, **(common.TINY_MODEL if args.tiny else {}), **(args.model_kwargs or {}),
                  initialization=args.initialization)
    batch_size = common.TINY_BATCH if args.tiny else common.PRESET.batch_size
    analysis_images = common.TINY_ANALYSIS_IMAGES if args.tiny else 256
    distances, initial, histories, similarities, similarity_values, initial_similarity = [], [], [], [], [], []
    with common.workdir(args.workdir, NAME) as work:
        data_dir = os.path.join(work, "data")
        train_size, test_size = common.write_slice(args.source_dir, data_dir, args.train_size, args.test_size)
        steps = (2 if args.tiny else args.epochs) * (train_size // batch_size)
        images = common.test_images(data_dir, min(args.attention_images, test_size))
        for seed in args.seeds:
            common.log(NAME, f"ViT, seed {seed}: {steps} steps")
            flags = [*common.model_flags("VisionTransformer", kwargs),
                     *common.recipe_flags(steps, batch_size, args.tiny),
                     "--log_analysis=distance,position_similarity", f"--analysis_images={analysis_images}"]
            summary = common.train(os.path.join(work, f"seed_{seed}"), data_dir, seed, flags)
            common.log(NAME, f"  test accuracy {summary['accuracy']:.4f}, {summary['wall_seconds']:.0f} s")
            distance, similarity, uniform = analyse(summary["model_path"], images)
            distances.append(distance)
            similarities.append(similarity)
            history = summary["analysis"]
            epochs = np.array([entry["epoch"] for entry in history])
            histories.append([np.array(entry["distance"]).mean(axis=1) for entry in history])
            initial.append(np.array(history[0]["distance"]))
            initial_similarity.append((history[0]["position_similarity"]["neighbours"],
                                       history[0]["position_similarity"]["others"]))
            similarity_values.append(neighbour_similarity(similarity))
    distances = np.array(distances)
    figures = [distance_figure(distances, epochs, np.mean(histories, axis=0), uniform, args.figure),
               similarity_figure(np.mean(similarities, axis=0),
                                 common.sibling_figure(args.figure, "position_similarity"))]
    table = tables(distances, np.array(initial), similarity_values, initial_similarity, uniform)
    described = notes(args, kwargs, steps, batch_size, train_size, test_size, len(images),
                      min(analysis_images, test_size))
    common.report(args, NAME, TITLE, argv, described, table, figures, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())

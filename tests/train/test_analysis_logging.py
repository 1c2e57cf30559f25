"""`--log_analysis`: the papers' analysis logged per epoch, in TensorBoard and analysis.json."""

import json
import os

import keras
import numpy as np
import pytest

import keras_vit
from keras_vit import analysis
from keras_vit.models import convit
from tests.train.helpers import main_here, make_idx_dataset, tiny_flags
from train import analysis_logging
from train.analysis_logging import AnalysisLogger, heatmap, neighbour_similarity, parse_analyses, similarity_mosaic


def tiny_convit():
    return keras_vit.ConViT(image_size=16, patch_size=4, num_channels=1, hidden_size=16, num_layers=3, num_heads=4,
                            mlp_dim=32, num_gpsa_layers=2, num_classes=4)


def tiny_vit():
    return keras_vit.VisionTransformer(image_size=16, patch_size=4, num_channels=1, hidden_size=16, num_layers=2,
                                       num_heads=2, mlp_dim=32, num_classes=4)


def read_events(logdir):
    """{tag: [(step, value or image shape)]} from the TensorBoard event files in `logdir`."""
    import tensorflow as tf

    events = {}
    for name in sorted(os.listdir(logdir)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(logdir, name)):
            for value in event.summary.value:
                tensor = tf.make_ndarray(value.tensor)
                if tensor.dtype == object:  # an image: width, height, PNG bytes
                    item = tf.io.decode_png(tensor[2]).shape
                else:
                    item = float(tensor)
                events.setdefault(value.tag, []).append((event.step, item))
    return events


def test_parse_analyses():
    assert parse_analyses(None) == () and parse_analyses("") == ()
    assert parse_analyses("distance, gates") == ("gates", "distance")  # the module's order
    assert parse_analyses("all") == analysis_logging.ANALYSES
    for bad in ("gate", "gates,bogus", ",", 3):
        with pytest.raises(ValueError, match=r"--log_analysis .*Received: log_analysis="):
            parse_analyses(bad)


def test_heatmap_scales_cells_and_blacks_out_nan():
    image = heatmap(np.array([[0.0, 0.5], [1.0, np.nan]]), 0.0, 1.0)
    cell = analysis_logging._CELL
    assert image.shape == (1, 2 * cell, 2 * cell, 1) and image.dtype == np.uint8
    np.testing.assert_array_equal(image[0, ::cell, ::cell, 0], [[0, 128], [255, 0]])
    # Without a range, the table's own: its minimum black, its maximum white.
    own = heatmap(np.array([[2.0, 4.0]]))
    np.testing.assert_array_equal(own[0, 0, ::cell, 0], [0, 255])


def test_similarity_mosaic_and_neighbours():
    grid = (2, 3)
    y, x = np.divmod(np.arange(6), 3)
    # A similarity that falls with the Manhattan distance: neighbours 0.5, farther pairs below.
    distance = np.abs(y[:, None] - y[None, :]) + np.abs(x[:, None] - x[None, :])
    similarity = 1.0 - 0.5 * distance
    mosaic = similarity_mosaic(similarity.reshape(*grid, *grid))
    assert mosaic.shape == (2 * 3, 3 * 4)
    # The tile of patch (1, 2) holds its row of the similarity, laid out on the grid.
    np.testing.assert_array_equal(mosaic[3:5, 8:11], similarity[5].reshape(2, 3))
    assert np.isnan(mosaic[2]).all() and np.isnan(mosaic[:, 3]).all()
    neighbours, others = neighbour_similarity(similarity.reshape(*grid, *grid))
    assert neighbours == pytest.approx(0.5)
    assert others == pytest.approx(similarity[distance > 1].mean())


def test_model_without_what_an_analysis_reads_is_refused():
    with pytest.raises(ValueError, match=r"--log_analysis=gates needs a model whose attention has gates"):
        AnalysisLogger(tiny_vit(), ("gates",), np.zeros((2, 16, 16, 1)))


def test_logger_records_each_epoch_and_resumes(tmp_path):
    model = tiny_convit()
    model.compile(optimizer=keras.optimizers.Adam(3e-2), loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 255, (32, 16, 16, 1)).astype("float32")
    labels = rng.integers(0, 4, 32)
    logdir, history = str(tmp_path / "logs"), str(tmp_path / "analysis.json")
    logger = AnalysisLogger(model, ("gates", "nonlocality", "distance", "position_similarity"), images[:8],
                            logdir=logdir, history_path=history)
    model.fit(images, labels, batch_size=8, epochs=2, callbacks=[logger], verbose=0)

    entries = json.loads(open(history).read())
    assert [(e["epoch"], e["step"]) for e in entries] == [(0, 0), (1, 4), (2, 8)]
    # Before training the gates are sigma(1) (lambda starts at 1, ConViT Sec. 3); training moves them.
    np.testing.assert_allclose(entries[0]["gates"], np.full((2, 4), 1 / (1 + np.exp(-1.0))), rtol=1e-6)
    assert not np.allclose(entries[2]["gates"], entries[0]["gates"])
    # The last entry is the analysis of the trained model, computed afresh here.
    np.testing.assert_allclose(entries[2]["gates"], convit.gpsa_gating(model), rtol=1e-6)
    maps = analysis.attention_maps(model, images[:8])
    table = analysis.nonlocality(maps, analysis.grid_size(model))
    np.testing.assert_allclose(entries[2]["nonlocality"], table, rtol=1e-4)
    np.testing.assert_allclose(entries[2]["distance"], table * 4, rtol=1e-4)  # 4-pixel patches
    similarity = analysis.position_embedding_similarity(model)
    assert entries[2]["position_similarity"]["neighbours"] == pytest.approx(
        neighbour_similarity(similarity)[0], rel=1e-6)

    events = read_events(logdir)
    assert [step for step, _ in events["gates/layer_1/head_0"]] == [0, 4, 8]
    assert events["gates/layer_1/head_0"][-1][1] == pytest.approx(entries[2]["gates"][1][0], rel=1e-6)
    assert events["nonlocality/layer_2"][-1][1] == pytest.approx(np.mean(entries[2]["nonlocality"][2]), rel=1e-5)
    cell = analysis_logging._CELL
    assert events["distance/layers_by_heads"][0][1] == (3 * cell, 4 * cell, 1)  # 3 layers x 4 heads
    assert events["position_similarity"][0][1] == (4 * 5 * cell, 4 * 5 * cell, 1)

    # A resumed run (its optimizer back at step 4) keeps the history up to there and goes on.
    model.optimizer.iterations.assign(4)
    resumed = AnalysisLogger(model, ("gates",), images[:8], history_path=history)
    model.fit(images, labels, batch_size=8, epochs=2, initial_epoch=1, callbacks=[resumed], verbose=0)
    entries = json.loads(open(history).read())
    assert [(e["epoch"], e["step"]) for e in entries] == [(0, 0), (1, 4), (2, 8)]
    assert "nonlocality" in entries[1] and "nonlocality" not in entries[2]


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=128, test=32)


def test_cli_logs_analysis(tmp_path, idx_dir, capsys):
    workdir = tmp_path / "run"
    convit = '{"patch_size": 4, "hidden_size": 16, "num_layers": 2, "num_heads": 4, "mlp_dim": 32, "num_gpsa_layers": 1}'
    result = main_here(capsys, *tiny_flags(workdir, idx_dir, "--epochs=2", "--model=ConViT", f"--model_kwargs={convit}",
                                  "--log_analysis=gates,distance", "--analysis_images=16"))
    assert result.returncode == 0, result.stderr[-3000:]
    entries = json.loads((workdir / "analysis.json").read_text())
    assert [e["epoch"] for e in entries] == [0, 1, 2]
    assert np.array(entries[-1]["gates"]).shape == (1, 4) and np.array(entries[-1]["distance"]).shape == (2, 4)
    assert os.listdir(workdir / "logs" / "analysis")


def test_cli_rejects_gates_on_a_vit(tmp_path, idx_dir, capsys):
    result = main_here(capsys, *tiny_flags(tmp_path / "run", idx_dir, "--epochs=1", "--log_analysis=gates"))
    assert result.returncode != 0
    assert "--log_analysis=gates needs a model whose attention has gates" in result.stderr

"""benchmarks/serving.py at a tiny size: every kind of path measured, the table and its section written."""

import pytest

from benchmarks import serving


def test_cpu_description_names_the_bf16_features():
    name, bf16, amx = serving.cpu_description()
    assert isinstance(name, str) and name and isinstance(bf16, bool) and isinstance(amx, bool)


# The script end to end: two paths, each measured in a process of its own as the script does, the
# table and its section. The other paths are measured in this process below (#38: one end-to-end
# run, the variants in-process), without a second import of TensorFlow for each.
def test_tiny_run_measures_each_path_and_writes_its_section(tmp_path, capsys):
    markdown = tmp_path / "BENCHMARKS.md"
    markdown.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    paths = "keras_xla,timm_fp32"
    results = serving.main(["--variants=ViT_Ti16", "--batch_sizes=2", "--image_size=32", "--steps=2", "--depth=1",
                            f"--paths={paths}", "--write", f"--benchmarks_md={markdown}"])
    rows = results[("ViT_Ti16", 2)]
    assert [r["path"] for r in rows] == paths.split(",")
    assert all("error" not in r and r["images_per_s"] > 0 for r in rows), rows
    printed = capsys.readouterr().out
    text = markdown.read_text()
    assert "## Other\n\nkept" in text and serving.SECTION in text
    for path in paths.split(","):
        assert f"| ViT_Ti16 | 2 | {path} |" in printed and f"| ViT_Ti16 | 2 | {path} |" in text
    assert "| ViT_Ti16 | 2 | keras_xla |" in text and "| 1.00 | 1.00 |" in text  # timm_fp32 against itself
    # Writing again replaces the section instead of adding a second one (what a rerun's `--write`
    # calls; it was a second run of the script until #38).
    serving.write_section(str(markdown), "python benchmarks/serving.py --write", "| a new table |")
    text = markdown.read_text()
    assert text.count(serving.SECTION) == 1 and "| a new table |" in text and "## Other\n\nkept" in text


@pytest.mark.parametrize("path", ["tf_bf16", "saved_model", "litert_fp32", "litert_dynamic", "openvino_bf16",
                                  "timm_bf16"])
def test_each_other_path_measures_a_one_block_model(path):
    _, avx512_bf16, amx_bf16 = serving.cpu_description()
    if path == "openvino_bf16" and not (avx512_bf16 or amx_bf16):
        # A CPU without bfloat16 units (AVX2 only): OpenVINO compiles the model in f32, and the
        # script refuses to report that as a bf16 row.
        with pytest.raises(RuntimeError, match=r"^OpenVINO runs f32 here, not bf16$"):
            serving.run_path(path, "ViT_Ti16", batch_size=2, steps=1, image_size=32, depth=1)
        return
    seconds = serving.run_path(path, "ViT_Ti16", batch_size=2, steps=1, image_size=32, depth=1)
    assert 0 < seconds < 60


def test_unknown_path_is_refused():
    with pytest.raises(SystemExit):
        serving.main(["--paths=onnx"])

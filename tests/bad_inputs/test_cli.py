"""Bad flags of `train/main.py`: one line naming the flag, exit status 2, nothing written.

Most cases call `main()` in this process (absl parses the flags as the script
does); a few run the script itself to show the exit status and the absence of
a traceback end to end.
"""

import os
import re

import keras
import pytest

from tests.train.helpers import make_idx_dataset, run_in_process, run_main, tiny_flags
from train import strategy as strategy_lib


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    return make_idx_dataset(tmp_path_factory.mktemp("fashion"), train=64, test=16)


# (flag, message): each a distinct bad input; the message names the flag, the value
# received and what is accepted.
BAD_FLAGS = [
    ("--learning_rate=0", r"--learning_rate must be a number in \(0, inf\)\. Received: learning_rate=0\.0"),
    ("--learning_rate=-0.1", r"--learning_rate must be a number in \(0, inf\)\. Received: learning_rate=-0\.1"),
    ("--weight_decay=-0.05", r"--weight_decay must be a number in \[0, inf\)\. Received: weight_decay=-0\.05"),
    ("--clip_norm=0", r"--clip_norm must be a number in \(0, inf\) \(or unset\)\. Received: clip_norm=0\.0"),
    ("--eval_batch_size=0", r"--eval_batch_size must be a positive integer \(or unset\)\. Received: eval_batch_size=0"),
    ("--eval_batch_size=-8", r"--eval_batch_size must be a positive integer .*Received: eval_batch_size=-8"),
    ("--steps=0", r"--steps must be a positive integer \(or unset\)\. Received: steps=0"),
    ("--steps=-5", r"--steps must be a positive integer .*Received: steps=-5"),
    ("--warmup_steps=-1", r"--warmup_steps must be an integer >= 0\. Received: warmup_steps=-1"),
    ("--checkpoint_every_steps=-3", r"--checkpoint_every_steps must be an integer >= 0\. Received: checkpoint_every_steps=-3"),
    ("--label_smoothing=1.0", r"--label_smoothing must be a number in \[0, 1\)\. Received: label_smoothing=1\.0"),
    ("--label_smoothing=-0.1", r"--label_smoothing must be a number in \[0, 1\)\. Received: label_smoothing=-0\.1"),
    ("--randaugment=11", r"--randaugment must be a timm RandAugment policy such as 'rand-m9-mstd0.5-inc1', or an "
                         r"integer magnitude from 0 \(off\) to 10 for that policy .*Received: randaugment='11'"),
    ("--randaugment=-2", r"--randaugment must be a timm RandAugment policy.*Received: randaugment='-2'"),
    ("--randaugment=rand-x9", r"--randaugment must be a timm RandAugment policy.*rand-x9.*Received: randaugment='rand-x9'"),
    ("--random_erasing=1.5", r"--random_erasing must be .*Received: random_erasing=1.5"),
    ("--repeated_augmentation=0", r"--repeated_augmentation must be .*Received: repeated_augmentation=0"),
    ("--eval_crop=0", r"--eval_crop must be .*Received: eval_crop=0"),
    ("--mixing_group=3", r"--mixing_group must divide --batch_size .*Received: mixing_group=3, batch_size=128"),
    ("--adam_epsilon=0", r"--adam_epsilon must be a number in \(0, inf\)\. Received: adam_epsilon=0\.0"),
    ("--augmentation=rrc", r"--augmentation must be one of .*random_resized_crop.*Received: augmentation='rrc'"),
    ("--image_size=0", r"--image_size must be a positive integer \(or unset\)\. Received: image_size=0"),
    ("--image_size=-32", r"--image_size must be a positive integer .*Received: image_size=-32"),
    ("--batch_size=0", r"--batch_size must be a positive integer\. Received: batch_size=0"),
    ("--batch_size=65", r"--batch_size must be at most the 64 training images of --dataset \(split 'train'\): a "
                        r"smaller batch, or more images\. Received: batch_size=65"),
    ("--image_channels=1", r"--image_channels applies to an image folder \(--dataset=folder:DIR\) only: other "
                           r"datasets have their own channels\. Received: image_channels=1 with "
                           r"--dataset='fashion_mnist'"),
    ("--epochs=0", r"--epochs must be a positive integer\. Received: epochs=0"),
    ("--ema_decay=1.0", r"--ema_decay must be a number in \[0, 1\) \(0 turns EMA off\), or unset\. Received: ema_decay=1\.0"),
    ("--momentum=1.5", r"--momentum must be a number in \[0, 1\)\. Received: momentum=1\.5"),
    ("--dropout_rate=1.0", r"--dropout_rate must be a number in \[0, 1\)\. Received: dropout_rate=1\.0"),
    ("--mixup=-0.8", r"--mixup must be a number in \[0, inf\)\. Received: mixup=-0\.8"),
    ("--seed=-1", r"--seed must be an integer >= 0\. Received: seed=-1"),
    ("--optimizer=rmsprop", r"--optimizer must be one of \('adamw', 'sgd'\)\. Received: optimizer='rmsprop'"),
    ("--decay=exponential", r"--decay must be one of \('linear', 'cosine', 'constant'\)\. Received: decay='exponential'"),
    ("--precision=float16", r"--precision must be one of \('float32', 'bfloat16'\)\. Received: precision='float16'"),
    ("--config=jft", r"`config` must be one of \[.*'default'.*\]\. Received: config='jft'"),
    ("--model=ViT_B17", r"--model must be a builder name \(.*\)\. Did you mean 'ViT_B16'\? Received: model='ViT_B17'"),
    ("--model_kwargs={patch_size: 4}", r"--model_kwargs must be a JSON object, e\.g\. .*Received: model_kwargs='\{patch_size: 4\}'"),
    ("--model_kwargs=[4]", r"--model_kwargs must be a JSON object.*Received: model_kwargs='\[4\]'"),
    ('--model_kwargs={"patch_sise": 4}', r"--model_kwargs names an argument that VisionTransformer does not take: 'patch_sise'\. Did you mean 'patch_size'\?"),
    ('--model_kwargs={"num_classes": 4}', r"--model_kwargs may not set 'num_classes': the trainer sets"),
    ("--dataset=fashion_mnits", r"--dataset is not .* a TFDS dataset\. Did you mean \[.*'fashion_mnist'.*\]\? .*Received: dataset='fashion_mnits'"),
    ("--dataset=folder:/no/such/folder", r"--dataset names an image folder that does not exist: '/no/such/folder'"),
    ("--data_dir=/no/such/data", r"--data_dir does not exist or is not a directory\. Received: data_dir='/no/such/data'"),
    ("--pretrained=/no/such/file.npz", r"--pretrained must be a checkpoint file or a known checkpoint name .*Received: pretrained='/no/such/file\.npz'"),
    # Was checked on JAX only: TensorFlow trained with it and exited 0.
    ("--distribution=bogus", r"--distribution must be one of \('auto', 'data', 'fsdp'\)\. Received: distribution='bogus'"),
    ("--learning_rate=fast", r"flag --learning_rate=fast: (could not convert string to float|.*float)"),
    ("--lerning_rate=0.1", r"Unknown command line flag 'lerning_rate'"),
]


@pytest.mark.parametrize("flag, message", BAD_FLAGS, ids=[flag for flag, _ in BAD_FLAGS])
def test_bad_flag_is_one_line_with_status_2_and_writes_nothing(flag, message, tmp_path, idx_dir, capsys):
    workdir = tmp_path / "run"
    argv = [f"--workdir={workdir}"]
    if not flag.startswith(("--dataset", "--data_dir")):
        argv += ["--dataset=fashion_mnist", f"--data_dir={idx_dir}"]
    status, stderr = run_in_process([*argv, flag], capsys)
    assert status == 2
    lines = [line for line in stderr.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr[-2000:]
    assert lines[0].startswith("error: ") and "Traceback" not in stderr
    assert re.search(message, lines[0]), lines[0]
    assert not workdir.exists()


@pytest.mark.parametrize("name, content", [
    ("model.keras", b"<html>404 Not Found</html>"),  # a failed download saved under the intended name
    ("weights.safetensors", b'{"a": 1}'),  # a JSON header without its 8-byte length
    ("weights.bin", b"\x00" * 64),
])
def test_pretrained_file_of_no_checkpoint_format_is_a_flag_error(name, content, tmp_path, idx_dir, capsys):
    checkpoint = tmp_path / name
    checkpoint.write_bytes(content)
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", f"--pretrained={checkpoint}"], capsys)
    assert status == 2 and "Traceback" not in stderr
    line = next(line for line in stderr.splitlines() if line.startswith("error: "))
    assert line.startswith("error: --pretrained is not a checkpoint file.")
    assert f"Received: pretrained='{checkpoint}'" in line
    assert "Accepted formats: .npz" in line
    if name == "model.keras":
        # The name promised a .keras file: the message says what one is, not "unknown format".
        assert "is named .keras but is not a .keras file" in line and "Unknown" not in line
    assert not (tmp_path / "run").exists()


def test_bad_flags_end_to_end_exit_2_without_a_traceback(tmp_path, idx_dir):
    for flag, expected in (
        ("--learning_rate=-1", "--learning_rate must be a number in (0, inf). Received: learning_rate=-1.0"),
        ("--config=nope", "`config` must be one of"),
        ("--weight_decay=abc", "flag --weight_decay=abc"),
    ):
        result = run_main(*tiny_flags(tmp_path / "run", idx_dir, flag), timeout=120)
        assert result.returncode == 2, result.stderr[-2000:]
        assert expected in result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "run").exists()


def test_remat_with_dropout_is_a_flag_error(tmp_path, idx_dir, capsys):
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", "--remat", "--dropout_rate=0.1"], capsys)
    assert status == 2 and "Traceback" not in stderr
    assert "error: --remat cannot be combined with --dropout_rate" in stderr
    assert not (tmp_path / "run").exists()


TF_CONFIG_CASES = [
    (None, r"--strategy=multi_worker reads the cluster from the TF_CONFIG environment variable, which is not set"),
    ('{"cluster": 3}', r"TF_CONFIG must be JSON like .*Received: TF_CONFIG='\{\"cluster\": 3\}'"),
    ("not json", r"TF_CONFIG must be JSON like .*Received: TF_CONFIG='not json'"),
    ('{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 1}}',
     r"TF_CONFIG's task worker:1 is not in its cluster \['worker'\]"),
]


@pytest.mark.parametrize("tf_config, message", TF_CONFIG_CASES, ids=["unset", "no-list", "not-json", "index"])
def test_multi_worker_without_a_usable_tf_config_is_one_line(tf_config, message, tmp_path, idx_dir, capsys,
                                                              monkeypatch):
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", tf_config)
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", "--strategy=multi_worker"], capsys)
    assert status == 2 and "Traceback" not in stderr
    if keras.backend.backend() == "jax":
        message = r"--strategy picks a tf.distribute strategy, for the TensorFlow backend\. On JAX use --distribution"
    assert re.search(message, stderr), stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_unknown_strategy_is_one_line(tmp_path, idx_dir, capsys):
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", "--strategy=ring"], capsys)
    assert status == 2
    assert "error: --strategy must be one of ('auto', 'mirrored', 'multi_worker'). Received: strategy='ring'" in stderr
    assert not (tmp_path / "run").exists()


def test_corrupt_teacher_file_is_not_reported_as_missing(tmp_path, idx_dir, capsys):
    teacher = tmp_path / "teacher.keras"
    teacher.write_bytes(os.urandom(512))
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", f"--teacher={teacher}", "--distillation=hard"], capsys)
    assert status == 2 and "Traceback" not in stderr
    assert (f"error: --teacher names a file that exists but is not a readable .keras file (not a zip archive, as "
            f"model.save writes a .keras file). Received: teacher='{teacher}'") in stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("hosts, message", [
    ({}, (r"--multihost joins the hosts of a JAX job, and finds none here: .* set on every host "
          r"KERAS_DISTRIBUTION_JOB_ADDRESSES .*KERAS_DISTRIBUTION_NUM_PROCESSES .*KERAS_DISTRIBUTION_PROCESS_ID .*"
          r"Received: multihost=True with KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES, "
          r"KERAS_DISTRIBUTION_PROCESS_ID unset")),
    ({"KERAS_DISTRIBUTION_JOB_ADDRESSES": "127.0.0.1:1234", "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
      "KERAS_DISTRIBUTION_PROCESS_ID": "2"},
     (r"--multihost reads KERAS_DISTRIBUTION_NUM_PROCESSES .*Received: KERAS_DISTRIBUTION_NUM_PROCESSES='2', "
      r"KERAS_DISTRIBUTION_PROCESS_ID='2'")),
], ids=["unset", "index-out-of-range"])
def test_multihost_without_its_hosts_is_one_line(hosts, message, tmp_path, idx_dir, capsys, monkeypatch):
    # Was JAX's "coordinator_address should be defined", naming neither the flag nor the variables.
    for name in (*strategy_lib.HOST_VARIABLES, "JAX_COORDINATOR_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in hosts.items():
        monkeypatch.setenv(name, value)
    # As on a machine outside a TPU pod slice or a SLURM, Open MPI or Kubernetes job.
    monkeypatch.setattr(strategy_lib, "_jax_detects_a_cluster", lambda: False)
    status, stderr = run_in_process([f"--workdir={tmp_path / 'run'}", "--dataset=fashion_mnist",
                                     f"--data_dir={idx_dir}", "--multihost"], capsys)
    assert status == 2 and "Traceback" not in stderr
    if keras.backend.backend() != "jax":
        message = r"--multihost joins the hosts of a JAX job \(KERAS_BACKEND=jax\); on TensorFlow"
    assert re.search(message, stderr), stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_an_in_process_workdir_is_refused_on_jax_and_warned_about_on_tensorflow(capsys):
    """`ram://` lives in this process only: Orbax cannot write there, and nothing written survives the run."""
    import keras

    from train.configs import get_config
    from train.workdir import check_workdir

    workdir = "ram://keras_vit_cli/run"
    if keras.backend.backend() == "jax":
        with pytest.raises(ValueError, match=r"--workdir must be a local directory or a persistent file system "
                                             r".*Received: workdir='ram://keras_vit_cli/run'"):
            check_workdir(workdir, get_config("default"))
    else:
        check_workdir(workdir, get_config("default"))
        assert "warning: --workdir=ram://keras_vit_cli/run is TensorFlow's in-process file system" in (
            capsys.readouterr().err)


@pytest.mark.parametrize("flags, message", [
    (["--batch_size=9"], r"--batch_size must be at most the 8 images of the image folder's 'train' split\. "
                         r"Received: batch_size=9"),
    (["--batch_size=4", "--image_channels=2"], r"--image_channels must be 1 \(grayscale\) or 3 \(RGB\), or unset "
                                               r"\(RGB\)\. Received: image_channels=2"),
])
def test_an_image_folder_refuses_before_anything_is_written(flags, message, tmp_path, capsys):
    # Checked with the flags (a --dry_run too): a batch no epoch can fill, a channel count it cannot read.
    from tests.train.helpers import make_image_folder

    root = make_image_folder(tmp_path / "photos", per_class=2, size=8)
    workdir = tmp_path / "run"
    for dry_run in ([], ["--dry_run"]):
        status, stderr = run_in_process([f"--workdir={workdir}", f"--dataset=folder:{root}", *flags, *dry_run],
                                        capsys)
        lines = [line for line in stderr.strip().splitlines() if line.startswith("error: ")]
        assert status == 2 and len(lines) == 1 and re.search(message, lines[0]), stderr[-2000:]
        assert not workdir.exists()

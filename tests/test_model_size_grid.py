"""The model_size experiment: the L/H/A grid, parameter counts, the table and the plot."""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.experiments import model_size as TOOL
from tests.helpers.saved_encoder import saved_random_encoder

COMMAND = [sys.executable, "-m", "kerasbert.experiments", "model_size"]


def test_plan_expands_the_paper_grid_and_takes_checkpoint_folders(tmp_path):
    base = RunConfig(task="rte", output_dir=str(tmp_path / "grid"))
    plan = TOOL.plan_grid(base, ["2/64/2", "paper", "mini", str(tmp_path)])
    labels = [label for label, _ in plan]
    assert labels == ["2/64/2", "3/768/12", "6/768/3", "6/768/12", "12/768/12", "12/1024/16",
                      "24/1024/16", "4/256/4", os.path.basename(str(tmp_path))]
    assert plan[0][1].init_checkpoint == "random" and plan[0][1].model_size == "2/64/2"
    assert plan[0][1].output_dir == str(tmp_path / "grid" / "2-64-2")
    assert plan[-1][1].init_checkpoint == str(tmp_path)
    # A checkpoint's own rate reaches only the checkpoint entries.
    rated = TOOL.plan_grid(dataclasses.replace(base, learning_rate=3e-4),
                           ["2/64/2", str(tmp_path)], checkpoint_learning_rate=5e-5)
    assert [c.learning_rate for _, c in rated] == [3e-4, 5e-5]
    with pytest.raises(InputError, match="'7/100/3' is neither an L/H/A shape nor a checkpoint"):
        TOOL.plan_grid(base, ["7/100/3"])  # 100 is not divisible by 3 heads
    with pytest.raises(InputError, match="--sizes: mini is given twice"):
        TOOL.plan_grid(base, ["4/256/4", "mini"])


def test_parameter_count_is_bert_s_formula(tmp_path):
    from kerasbert.model import encoders

    encoder = encoders.random_encoder("3/48/4", max_position=64)
    encoders.save_encoder(encoder.backbone, encoder.vocab_file, True, str(tmp_path))
    layers, hidden, heads, parameters = TOOL.encoder_shape_and_parameters(str(tmp_path))
    vocab, positions, h = 30522, 64, 48
    embeddings = (vocab + positions + 2) * h + 2 * h  # token, position, segment, LayerNorm
    per_layer = 4 * (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
    pooler = h * h + h
    assert (layers, hidden, heads) == (3, 48, 4)
    assert parameters == embeddings + 3 * per_layer + pooler


@pytest.mark.large
def test_grid_trains_each_size_and_writes_table_and_plot(tmp_path):
    given = saved_random_encoder(tmp_path / "pretrained", "2/48/2")
    out = tmp_path / "grid"
    args = [*COMMAND, "--task=rte",
            "--sizes=2/32/2,4/32/2," + str(given), "--max_seq_length=32",
            "--max_train_examples=8", "--max_eval_examples=8", "--train_batch_size=8",
            "--num_train_epochs=1", "--learning_rate=3e-4", "--checkpoint_learning_rate=1e-4",
            f"--output_dir={out}"]
    result = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(out / "grid.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["L/H/A"], r["init"], r["learning_rate"], r["seed"]) for r in rows] == [
        ("2/32/2", "random", "0.0003", "42"), ("4/32/2", "random", "0.0003", "42"),
        ("2/48/2", "pretrained", "0.0001", "42")]
    params = [int(r["encoder_parameters"]) for r in rows]
    assert params[0] < params[1] < params[2]
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows)
    assert (out / "grid.md").read_text() in result.stdout
    assert (out / "grid.png").stat().st_size > 5000
    experiment = json.loads((out / "grid.json").read_text())["experiment"]
    assert experiment["sizes"] == ["2/32/2 (random, lr 0.0003)", "4/32/2 (random, lr 0.0003)",
                                   "2/48/2 (pretrained, lr 0.0001)"]
    assert experiment["init_checkpoint"] == "per size" and "model_size" not in experiment
    assert experiment["learning_rate"] == "per size"
    assert "lr 0.0003 (checkpoints: 0.0001)" in result.stdout
    # Run again: every size is finished, nothing is trained; the table is the same.
    again = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("finished before, reused") == 3
    with open(out / "grid.csv") as f:
        assert list(csv.DictReader(f)) == rows


def test_a_checkpoint_rate_that_is_not_positive_is_one_line_naming_the_flag(tmp_path):
    out = tmp_path / "grid"
    result = subprocess.run(
        [*COMMAND, "--task=rte",
         "--sizes=2/32/2", "--checkpoint_learning_rate=0", f"--output_dir={out}"],
        check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--checkpoint_learning_rate: must be positive")
    assert not out.exists()

"""The paper-table tools run end to end on tiny models and write their tables."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--init_checkpoint=random", "--model_size=4/32/2", "--max_seq_length=32",
        "--max_train_examples=8", "--max_eval_examples=8", "--train_batch_size=8"]


def _tool(name, *args):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name), *TINY, *args],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.large
def test_compare_strategies_writes_table_and_plot(tmp_path):
    out = tmp_path / "cmp"
    stdout = _tool("compare_strategies.py", "--task=rte", "--frozen_epochs=1",
                   "--num_train_epochs=1", f"--output_dir={out}")
    table = (out / "comparison.md").read_text()
    assert table in stdout
    for strategy in ("fine-tune only", "frozen only", "stack-and-finetune"):
        assert f"| {strategy} |" in table
    assert (out / "curves.png").stat().st_size > 1000


@pytest.mark.large
def test_ner_table_has_fine_tuning_and_the_six_layer_choices(tmp_path):
    out = tmp_path / "ner"
    _tool("ner_table.py", "--num_train_epochs=1", "--feature_bilstm_lstm_units=8",
          f"--output_dir={out}")
    rows = (out / "table.md").read_text().strip().splitlines()[2:]
    assert [r.split("|")[1].strip() for r in rows] == [
        "Fine-tuning", "Feature-based: embeddings", "Feature-based: second_to_last",
        "Feature-based: last", "Feature-based: sum_last_four",
        "Feature-based: concat_last_four", "Feature-based: sum_all"]

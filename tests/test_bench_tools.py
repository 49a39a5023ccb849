"""tools/bench_padding.py runs both paddings end to end and finds the same results."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.large
def test_padding_benchmark_gives_identical_results_both_ways(tmp_path):
    out = tmp_path / "pad"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "bench_padding.py"), "--task=sst2",
         "--init_checkpoint=random", "--model_size=2/32/2", "--max_seq_length=64",
         "--max_train_examples=32", "--max_eval_examples=16", "--num_train_epochs=1",
         "--dropout=0", "--train_batch_size=16", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": ROOT})
    assert result.returncode == 0, result.stderr[-3000:]
    table = (out / "padding.md").read_text()
    assert table in result.stdout
    rows = [line.split("|") for line in table.splitlines()
            if line.startswith(("| per-batch", "| always"))]
    assert len(rows) == 2
    # Same dev metric and final training loss with or without the padding columns.
    assert rows[0][4] == rows[1][4] and rows[0][5] == rows[1][5]
    # Each variant is a full run in its own folder.
    assert (out / "max_length" / "metrics.json").exists()
    assert (out / "per_batch" / "metrics.json").exists()

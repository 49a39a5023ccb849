"""The paper-table experiments run end to end on tiny models and write their tables."""

import json
import os
import re
import subprocess
import sys

import pytest

COMMAND = [sys.executable, "-m", "kerasbert.experiments"]
TINY = ["--init_checkpoint=random", "--model_size=4/32/2", "--max_seq_length=32",
        "--max_train_examples=8", "--max_eval_examples=8", "--train_batch_size=8"]


def _tool(name, *args):
    result = subprocess.run([*COMMAND, name, *TINY, *args],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.large
def test_compare_strategies_writes_table_and_plot(tmp_path):
    out = tmp_path / "cmp"
    args = ["strategies", "--task=rte", "--frozen_epochs=1", "--num_train_epochs=1",
            "--seeds=1,2", f"--output_dir={out}"]
    stdout = _tool(*args)
    table = (out / "comparison.md").read_text()
    assert table in stdout
    for strategy in ("fine-tune only", "frozen only", "stack-and-finetune"):
        # | strategy | trained params | s/step | peak RSS MB | failed runs (every run
        # records its check) | [successful runs, when any failed] | n | ...
        assert re.search(rf"\| {strategy} \| [\d,]+ \| [\d.]+ \| \d+ \| \d/2 \([^|]*\) \| "
                         rf"(?:[^|]+ \| )?2 \|", table), table
    saved = json.loads((out / "comparison.json").read_text())
    rows = saved["tables"]["rte"]["rows"]
    assert [r["seeds"] for r in rows] == [[1, 2]] * 3
    assert rows[2]["difference"]["n"] == 2
    assert (out / "curves.png").stat().st_size > 1000
    # run again: every seed's run is reused, the table is the same
    assert _tool(*args).count("finished before, reused") == 6
    assert (out / "comparison.md").read_text() == table


@pytest.mark.large
def test_compare_strategies_runs_the_head_learning_rate_row(tmp_path):
    out = tmp_path / "cmp"
    _tool("strategies", "--task=rte", "--frozen_epochs=1", "--num_train_epochs=1",
          "--frozen_learning_rate=3e-3", "--seeds=1", f"--output_dir={out}",
          "--strategies=fine_tune_head_lr")
    table = (out / "comparison.md").read_text()
    assert "Head lr 0.003 in: fine-tune only, head lr." in table
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["experiment"]["head_learning_rate"] == {"fine-tune only, head lr": 0.003}
    run = out / "fine-tune_only_head_lr" / "seed-1"
    config = json.loads((run / "run_config.json").read_text())
    assert (config["frozen_epochs"], config["num_train_epochs"], config["head_learning_rate"]) \
        == (0.0, 2.0, 0.003)
    assert [r.split(",")[0] for r in (run / "history.csv").read_text().splitlines()[1:]] == [
        "finetune", "finetune"]


@pytest.mark.large
def test_compare_strategies_runs_the_parameter_efficient_rows(tmp_path):
    out = tmp_path / "cmp"
    stdout = _tool("strategies", "--task=rte", "--frozen_epochs=1",
                   "--num_train_epochs=1", "--seeds=1", f"--output_dir={out}",
                   "--strategies=lora,stack_and_lora,bitfit")
    table = (out / "comparison.md").read_text()
    assert table in stdout and "LoRA rank 8, alpha 8, targets query_value" in table
    # 4 layers of d = 32, rank 8: query and value each A (32, 8) + B (8, 32) = 512; BitFit:
    # per layer 3·32 + 32 + 128 + 32 + 2·64 = 416, embeddings' LayerNorm 64, pooler bias 32;
    # the head (cls_linear, 32 → 2) 66 in every row.
    assert "| LoRA | 4,162 |" in table and "| stack-and-LoRA | 4,162 |" in table
    assert "| BitFit | 1,826 |" in table
    rows = json.loads((out / "comparison.json").read_text())["tables"]["rte"]["rows"]
    assert [(r["label"], r["trained_parameters"]) for r in rows] == [
        ("LoRA", 4162), ("stack-and-LoRA", 4162), ("BitFit", 1826)]
    assert all(r["step_seconds"] > 0 for r in rows)
    assert all(r["peak_rss_mb"] > 100 for r in rows)  # MiB: TensorFlow alone holds more


@pytest.mark.large
def test_compare_strategies_runs_each_run_in_its_own_process_and_reports_its_error(tmp_path):
    # The run's check (a tagging-only flag on a classification task) fails in the spawned
    # run process: the tool still says it in one line and exits 2, training nothing.
    result = subprocess.run(
        [*COMMAND, "strategies", *TINY,
         "--task=rte", "--tagging_loss=token_mean", "--strategies=fine_tune", "--seeds=1",
         f"--output_dir={tmp_path / 'cmp'}"], capture_output=True, text=True, timeout=900)
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("kerasbert: error")]
    assert len(errors) == 1 and "--tagging_loss=token_mean" in errors[0], result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "cmp" / "fine-tune_only" / "seed-1" / "history.csv").exists()


@pytest.mark.large
def test_ner_table_crf_rows_train_each_variant(tmp_path):
    out = tmp_path / "ner-crf"
    _tool("ner_table", "--ner_rows=crf", "--document_context=max", "--num_train_epochs=1",
          "--bilstm_crf_lstm_units=8", f"--feature_cache_dir={tmp_path / 'cache'}",
          f"--output_dir={out}")
    rows = json.loads((out / "table.json").read_text())["tables"]["conll2003"]["rows"]
    assert [r["label"] for r in rows] == [
        "Softmax tagger", "tagger_crf", "Softmax tagger, context max", "tagger_crf, context max",
        "Feature-based: bilstm_crf (frozen)"]
    saved = json.loads((out / "bilstm_crf-frozen" / "seed-42" / "run_config.json").read_text())
    assert saved["head"] == "bilstm_crf" and saved["head_options"]["bilstm_crf_frozen"] is True
    context = json.loads((out / "tagger_crf-context-max" / "seed-42" / "run_config.json")
                         .read_text())
    assert context["document_context"] == "max"
    assert os.listdir(tmp_path / "cache")  # the frozen row's encoder layers were cached
    # context rows belong to --ner_rows=crf only: refused before any run
    result = subprocess.run([*COMMAND, "ner_table", *TINY,
                             "--document_context=8", f"--output_dir={tmp_path / 't7'}"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and not (tmp_path / "t7").exists()
    assert "--document_context: only --ner_rows=crf has context rows" in result.stderr


@pytest.mark.large
def test_ner_table_has_fine_tuning_and_the_six_layer_choices(tmp_path):
    out = tmp_path / "ner"
    _tool("ner_table", "--num_train_epochs=1", "--feature_bilstm_lstm_units=8",
          f"--output_dir={out}")
    saved = json.loads((out / "table.json").read_text())
    assert saved["tables"]["conll2003"]["interval_method"] == "bootstrap"
    assert [r["label"] for r in saved["tables"]["conll2003"]["rows"]] == [
        "Fine-tuning", "Feature-based: embeddings", "Feature-based: second_to_last",
        "Feature-based: last", "Feature-based: sum_last_four",
        "Feature-based: concat_last_four", "Feature-based: sum_all"]

"""The pretraining_ablation experiment end to end on a tiny corpus and model."""

import json
import random
import subprocess
import sys

import pytest


def _run_ablation(work, corpus, *flags):
    """The experiment on a 2/32/2 model, 2 pre-training steps, 8 SST-2 sample sentences, seeds 1,2."""
    cmd = [sys.executable, "-m", "kerasbert.experiments", "pretraining_ablation",
           f"--work_dir={work}", f"--corpus={corpus}", "--max_seq_length=32",
           "--max_predictions_per_seq=5", "--dupe_factor=1", "--model_size=2/32/2",
           "--num_train_steps=2", "--num_warmup_steps=1", "--train_batch_size=4",
           "--tasks=sst2", "--max_train_examples=8", "--max_eval_examples=8",
           "--finetune_epochs=1", "--finetune_batch_size=8", "--finetune_max_seq_length=32",
           "--seeds=1,2", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.large
def test_ablation_writes_table_5_layout(tmp_path):
    rng = random.Random(0)
    words = ["the", "cat", "dog", "sat", "ran", "on", "mat", "log", "a", "red", "film", "good"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(
        "".join(" ".join(rng.choice(words) for _ in range(6)) + " .\n" for _ in range(5)) + "\n"
        for _ in range(10)))
    work = tmp_path / "ablation"
    done = _run_ablation(work, corpus, "--vocab_size=60")
    table = (work / "table.md").read_text()
    assert table in done.stdout
    rows = [line.split("|")[1].strip() for line in table.strip().splitlines()[2:7]]
    assert rows == ["BERT (MLM + NSP)", "No NSP", "LTR & No NSP", "+ BiLSTM",
                    "No pre-training (random init)"]
    results = json.loads((work / "results.json").read_text())["rows"]
    assert [r["head"] for r in results] == [None, None, "last_token", "top_bilstm", None]
    for row in results:
        assert len(row["tasks"]["sst2"]["values"]) == 2
        assert all(0.0 <= v <= 1.0 for v in row["tasks"]["sst2"]["values"])
    sst2 = json.loads((work / "results.json").read_text())["tables"]["sst2"]
    assert [r["n"] for r in sst2["rows"]] == [2] * 5 and sst2["rows"][-1]["difference"]["n"] == 2
    assert "#### SST2" in table
    # The two LTR rows fine-tune the same causal encoder.
    config = json.loads((work / "pretrained_ltr" / "encoder" / "encoder_config.json").read_text())
    assert config["causal"] is True


@pytest.mark.large
def test_ablation_variants_pretrain_only_what_their_rows_need(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join("the cat sat on the mat .\nthe dog ran on the log .\n\n"
                              for _ in range(10)))
    work = tmp_path / "ablation"
    _run_ablation(work, corpus, "--vocab_size=40", "--variants=random,bert",
                  "--finetune_epochs=1,2")
    results = json.loads((work / "results.json").read_text())
    assert results["experiment"]["finetune_epochs"] == [1.0, 2.0]
    assert results["experiment"]["finetune_setting"] == "best mean dev metric per row and task"
    assert sorted(p.name for p in (work / "finetune" / "random-default-sst2").iterdir()) == [
        "lr-0.0001-epochs-1", "lr-0.0001-epochs-2"]
    chosen = results["rows"][0]["tasks"]["sst2"]
    assert chosen["epochs"] in (1.0, 2.0) and set(chosen["by_setting"]) == {
        "lr=0.0001 epochs=1", "lr=0.0001 epochs=2"}
    assert [r["variant"] for r in results["rows"]] == ["BERT (MLM + NSP)",
                                                       "No pre-training (random init)"]
    assert sorted(p.name for p in work.iterdir() if p.is_dir()) == [
        "data_nsp", "finetune", "pretrained_bert"]  # no contiguous data, no other objective
    assert results["tables"]["sst2"]["rows"][1]["difference"]["n"] == 2

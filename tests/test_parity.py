"""benchmarks/parity.py: its arithmetic on hand-made results, its flag errors, the reference's
inputs against kerasbert's, the kerasbert side end to end (and resumed), and under
`large` both sides end to end on a tiny HuggingFace checkpoint."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import parity, parity_hf

TORCH_PYTHON = os.environ.get("KERASBERT_TORCH_PYTHON")  # with torch and transformers


# --- arithmetic ----------------------------------------------------------------------------

def test_describe_gives_mean_sample_std_and_range():
    assert parity.describe([1.0, 2.0, 3.0]) == {"n": 3, "mean": 2.0, "std": 1.0, "min": 1.0,
                                                 "max": 3.0}
    assert parity.describe([5.0])["std"] is None  # one seed: no spread


def test_welch_interval_by_hand_and_against_scipy():
    # Equal variances 1, n 3 each: se = sqrt(2/3), Welch df = 4, t(0.975, 4) = 2.776445.
    d = parity.welch_interval([1, 2, 3], [2, 3, 4])
    half = 2.776445 * np.sqrt(2 / 3)
    assert d["difference"] == -1.0
    assert d["low"] == pytest.approx(-1 - half, abs=1e-5)
    assert d["high"] == pytest.approx(-1 + half, abs=1e-5)
    from scipy import stats

    a, b = [0.80, 0.83, 0.79, 0.84], [0.70, 0.74]
    expected = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    d = parity.welch_interval(a, b)
    assert (d["low"], d["high"]) == pytest.approx((expected.low, expected.high), abs=1e-9)
    assert parity.welch_interval([0.5], [0.4, 0.6])["low"] is None
    assert parity.welch_interval([0.5, 0.5], [0.4, 0.4]) == pytest.approx(
        {"difference": 0.1, "low": 0.1, "high": 0.1})


def _result(side, seed, f1, accuracy, train, rss=1000.0):
    return {"side": side, "seed": seed, "metrics": {"f1": f1, "accuracy": accuracy,
                                                    "PER_f1": 0.5},
            "train_seconds": train, "eval_seconds": 2.0, "process_seconds": train + 10,
            "peak_rss_mb": rss, "others_cpu_share": 0.25 if seed == 1 else None}


def test_summary_and_tables_on_hand_made_results():
    results = [_result("kerasbert", 1, 0.79, 0.70, 100),
               _result("huggingface", 1, 0.77, 0.69, 90),
               _result("huggingface", 2, 0.79, 0.71, 110),
               _result("kerasbert", 2, 0.81, 0.72, 120)]
    summary = parity.summarize(results, "f1")
    assert summary["metrics_shown"] == ["f1", "accuracy"]  # per-type metrics stay in the JSON
    assert summary["sides"]["kerasbert"]["seeds"] == [1, 2]
    assert summary["sides"]["huggingface"]["train_seconds"]["mean"] == 100.0
    text = parity.markdown(summary, results, "### header")
    # means 80 and 78 (points), std 1.4 each; se 1.414, Welch df 2, t 4.3027: ± 6.085
    assert ("| f1 (main) | 80.0 ± 1.4 (79.0–81.0) | 78.0 ± 1.4 (77.0–79.0) "
            "| +2.0 [-4.1, +8.1] |") in text
    assert "| training s | 110.0 ± 14.1 (100.0–120.0) | 100.0 ± 14.1 (90.0–110.0) |" in text
    rss = "| peak RSS MB | 1000 ± 0 (1000–1000) | 1000 ± 0 (1000–1000) | +0 [+0, +0] |"
    assert rss in text
    # equal stds 1.41 points; 1 df a side: χ² 2.5%/97.5% points 0.000982, 5.024; the ratio's
    # F(1, 1) 97.5% point is 647.79
    assert summary["spread"]["ratio"]["ratio"] == pytest.approx(1.0)
    assert ("Spread of f1: sample std kerasbert 1.41 [0.63, 45.13], HuggingFace 1.41 "
            "[0.63, 45.13] (95% χ² intervals); kerasbert / HF 1.00× [0.04, 25.45]") in text
    rows = [line for line in text.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert [r.split(" | ")[1] for r in rows] == ["kerasbert", "HuggingFace", "HuggingFace",
                                                 "kerasbert"]  # the order run
    assert rows[0].endswith("| 25% |") and rows[3].endswith("| – |")  # others' CPU share
    one_side = parity.summarize(results[::3], "f1")
    assert "differences" not in one_side
    assert "| f1 (main) | 80.0 ± 1.4 (79.0–81.0) | – |" in parity.markdown(
        one_side, results[::3], "")


def test_others_cpu_share_by_hand_and_beside_a_busy_process(tmp_path):
    # 30 s of the machine's busy time in 10 s on 4 CPUs, 12 of them the child's: 18 / 40
    assert parity.others_cpu_share(100.0, 130.0, 12.0, 10.0, 4) == pytest.approx(0.45)
    assert parity.others_cpu_share(100.0, 101.0, 2.0, 10.0, 4) == 0.0  # tick rounding
    assert parity.others_cpu_share(None, 130.0, 12.0, 10.0, 4) is None
    if parity.busy_cpu_seconds() is None:
        pytest.skip("no /proc/stat on this system")
    sleep = [sys.executable, "-c", "import time; time.sleep(1.5)"]
    spin = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.time()\nwhile time.time() - t < 4: pass"])
    try:
        code, seconds, _, beside_spin = parity.measure(sleep, str(tmp_path / "log.txt"))
    finally:
        spin.kill()
        spin.wait()
    assert code == 0 and seconds >= 1.5
    # one spinning process is one CPU's worth of others' time (less what the rest of the
    # machine left idle); the sleeping child itself counts for nothing
    assert beside_spin >= 0.6 / os.cpu_count()


# --- flags ---------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--task=nope"], "--task=nope: expected one of cola, .*, squad_v1, squad_v2"),
    (["--task=sst2", "--doc_stride=64"], "--task=sst2: --doc_stride and --max_query_length"),
    (["--task=sst2", "--seeds=1,x"], "--seeds=1,x: expected comma-separated integers"),
    (["--task=sst2", "--seeds=1,1"], "--seeds=1,1: give distinct seeds"),
    (["--task=sst2", "--learning_rate=0"], "--learning_rate=0.0: must be positive"),
    (["--task=sst2", "--data_dir={tmp}/nowhere"], "--data_dir=.*nowhere: no such folder"),
    (["--task=sst2", "--data_dir={tmp}"], "train.tsv: no such file"),
    (["--task=sst2", "--init_checkpoint={tmp}"], "not a HuggingFace BERT folder .*config.json"),
    (["--task=sst2", "--torch_python={tmp}/python"], "--torch_python=.*: no such interpreter"),
    (["--task=sst2", "--held_seed=1"], "--held_seed=1: only with --vary_seed=data_order"),
    (["--task=sst2", "--vary_seed=dropout"], "--vary_seed=dropout: give --held_seed"),
])
def test_bad_flags_and_files_are_one_line_errors(tmp_path, capsys, flags, message):
    import re

    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    code = parity.main([*flags, f"--output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("kerasbert: error: ")
    assert re.search(message, err), err


def test_default_checkpoint_is_kerasbert_s():
    from kerasbert.model.encoders import default_checkpoint

    assert parity.default_checkpoint() == default_checkpoint()


# --- the same inputs on both sides ---------------------------------------------------------

@pytest.mark.parametrize("task_name, max_len", [("sst2", 16), ("mrpc", 32), ("stsb", 24),
                                                ("swag", 24), ("conll2003", 32)])
def test_reference_builds_the_inputs_kerasbert_builds(tmp_path, uncased_vocab, task_name,
                                                      max_len):
    """Token ids, segments and (NER) first-piece labels of the reference equal kerasbert's
    on the bundled samples, short lengths included (pair truncation, cut sentences)."""
    transformers = pytest.importorskip("transformers")
    from kerasbert.data.tokenization import WordPieceTokenizer

    shutil.copy(uncased_vocab, tmp_path / "vocab.txt")
    reference = transformers.BertTokenizer(str(tmp_path / "vocab.txt"),
                                           do_lower_case=parity_hf.lower_cases(str(tmp_path)))
    task = parity.TASKS[task_name]
    examples = parity.read_splits(task, task.sample_dir(), None, None)["train"]
    ours = task.featurize(examples, WordPieceTokenizer(uncased_vocab, do_lower_case=True),
                          max_len)
    rows = [parity.reference_row(task, e) for e in examples]
    feats, _ = parity_hf.featurize(task.kind, rows, reference, max_len)
    compared = 0
    for i, f in enumerate(feats):
        row = i
        if task.kind == "tagging":  # kerasbert windows a long sentence, the reference cuts it
            rows = np.flatnonzero(ours.extra["row_sentence"] == i)
            if len(rows) > 1:
                continue
            row = rows[0]
        choices = (list(zip(f["input_ids"], f["token_type_ids"]))
                   if task.kind == "multiple_choice" else [(f["input_ids"], f["token_type_ids"])])
        for c, (ids, segments) in enumerate(choices):
            index = (row, c) if task.kind == "multiple_choice" else (row,)
            n = len(ids)
            assert ours.inputs["token_ids"][index][:n].tolist() == ids
            assert ours.inputs["segment_ids"][index][:n].tolist() == segments
            assert ours.inputs["padding_mask"][index].sum() == n
        if task.kind == "tagging":
            labels = ours.labels[row][: len(f["labels"])]
            assert np.where(labels < 0, -100, labels).tolist() == f["labels"]
        compared += 1
    assert compared >= len(examples) * 0.8


# --- end to end ----------------------------------------------------------------------------

TINY_RECIPE = ["--max_seq_length=64", "--max_train_examples=32", "--max_eval_examples=16",
               "--num_train_epochs=1", "--train_batch_size=16"]


def test_kerasbert_side_end_to_end_then_reused(tmp_path, tiny_checkpoint, capsys,
                                               monkeypatch):
    monkeypatch.delenv("KERASBERT_TORCH_PYTHON", raising=False)  # the HuggingFace side: none
    flags = ["--task=sst2", f"--init_checkpoint={tiny_checkpoint}", *TINY_RECIPE, "--seeds=3",
             f"--output_dir={tmp_path / 'cmp'}"]
    assert parity.main(flags) == 0
    out = capsys.readouterr().out
    assert "no --torch_python: the HuggingFace side is skipped" in out
    report = json.loads((tmp_path / "cmp" / "parity.json").read_text())
    (run,) = report["runs"]
    assert run["side"] == "kerasbert" and run["seed"] == 3
    assert set(run["metrics"]) == {"accuracy"}
    assert 0 < run["train_seconds"] < run["process_seconds"] and run["eval_seconds"] >= 0
    assert run["peak_rss_mb"] > 200  # TensorFlow's own, not this process's
    assert "--seed=3" in run["command"] and "--learning_rate=2e-05" in run["command"]
    assert not (tmp_path / "cmp" / "kerasbert" / "seed-3" / "run" / "checkpoints").exists()
    assert "| accuracy (main) |" in (tmp_path / "cmp" / "parity.md").read_text()
    # The reference's examples: kerasbert's first 32 / 16, labels as ids.
    rows = (tmp_path / "cmp" / "data" / "train.jsonl").read_text().splitlines()
    assert len(rows) == 32 and json.loads(rows[0])["label"] in (0, 1)

    assert parity.main(flags) == 0  # finished seeds are reused, not rerun
    assert "kerasbert seed 3: reusing" in capsys.readouterr().out
    assert json.loads((tmp_path / "cmp" / "parity.json").read_text())["runs"] == report["runs"]
    changed = [f for f in flags if not f.startswith("--max_train")] + ["--max_train_examples=8"]
    assert parity.main(changed) == 2
    assert "holds a comparison made with --max_train_examples=32 (now 8)" in capsys.readouterr().err


@pytest.mark.large
@pytest.mark.parametrize("task_name, seeds", [("sst2", "1,2"), ("stsb", "1"),
                                              ("conll2003", "1"), ("swag", "1"),
                                              ("squad_v1", "1"), ("squad_v2", "1")])
def test_both_sides_end_to_end_on_a_tiny_checkpoint(tmp_path, tiny_checkpoint, capsys,
                                                    task_name, seeds):
    if not (TORCH_PYTHON and os.path.isfile(TORCH_PYTHON)):
        pytest.skip("no torch interpreter: set KERASBERT_TORCH_PYTHON to one with torch and "
                    "transformers")
    squad = ["--max_query_length=16", "--doc_stride=16"] if task_name.startswith("squad") else []
    flags = [f"--task={task_name}", f"--init_checkpoint={tiny_checkpoint}", *TINY_RECIPE,
             *squad, f"--seeds={seeds}", f"--torch_python={TORCH_PYTHON}",
             f"--output_dir={tmp_path / 'cmp'}"]
    assert parity.main(flags) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "cmp" / "parity.json").read_text())
    order = [(r["side"], r["seed"]) for r in report["runs"]]
    expected = [("kerasbert", 1), ("huggingface", 1), ("huggingface", 2), ("kerasbert", 2)]
    assert order == expected[: 2 * len(seeds.split(","))]
    main = parity.TASKS[task_name].main_metric
    for run in report["runs"]:
        assert np.isfinite(run["metrics"][main]) and run["train_seconds"] > 0
        assert run["peak_rss_mb"] > 100 and run["process_seconds"] > run["train_seconds"]
    hf = [r for r in report["runs"] if r["side"] == "huggingface"]
    kb = [r for r in report["runs"] if r["side"] == "kerasbert"]
    assert set(hf[0]["metrics"]) == set(kb[0]["metrics"])  # the same scorer, the same keys
    history = (tmp_path / "cmp" / "kerasbert" / "seed-1" / "run" / "history.csv").read_text()
    kerasbert_steps = int(history.splitlines()[-1].split(",")[2])  # phase,epoch,step,...
    assert hf[0]["steps"] == kerasbert_steps  # 2 (32 rows / 16) but for SQuAD's windows
    differences = report["summary"]["differences"]
    assert (differences[main]["low"] is None) == (seeds == "1")


def test_a_run_s_three_seeds_follow_vary_seed():
    import argparse

    every = argparse.Namespace(vary_seed="all", held_seed=None)
    assert parity.seeds_of_run(every, 4) == {"data_order": 4, "head_init": 4, "dropout": 4}
    order = argparse.Namespace(vary_seed="data_order", held_seed=1)
    assert parity.seeds_of_run(order, 4) == {"data_order": 4, "head_init": 1, "dropout": 1}
    init = argparse.Namespace(vary_seed="head_init", held_seed=7)
    assert parity.seeds_of_run(init, 4) == {"data_order": 7, "head_init": 4, "dropout": 7}


def test_kerasbert_side_varies_only_the_data_order(tmp_path, tiny_checkpoint, capsys,
                                                   monkeypatch):
    monkeypatch.delenv("KERASBERT_TORCH_PYTHON", raising=False)
    flags = ["--task=sst2", f"--init_checkpoint={tiny_checkpoint}", *TINY_RECIPE, "--seeds=3",
             "--vary_seed=data_order", "--held_seed=1", f"--output_dir={tmp_path / 'cmp'}"]
    assert parity.main(flags) == 0
    (run,) = json.loads((tmp_path / "cmp" / "parity.json").read_text())["runs"]
    assert "--seed=1 --data_order_seed=3" in run["command"]
    assert "--vary_seed" not in run["command"]
    assert "each drives the data order only; the rest at seed 1" in capsys.readouterr().out


def test_only_the_kerasbert_side_takes_a_16_bit_policy():
    plain = parity.parse_args(["--task=sst2", "--output_dir=out"])
    assert not any("mixed_precision" in f for f in parity.kerasbert_flags(plain, 1, "run"))
    bf16 = parity.parse_args(["--task=sst2", "--output_dir=out",
                              "--mixed_precision=mixed_bfloat16"])
    assert "--mixed_precision=mixed_bfloat16" in parity.kerasbert_flags(bf16, 1, "run")

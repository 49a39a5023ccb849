"""The benchmark tools: bench_padding runs both paddings end to end and finds the same results;
bench_group_by_length runs both batchings over seeds; bench_training pools its rounds."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import bench_training
from benchmarks.processes import TORCH_PYTHON_VARIABLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**extra):
    """The benchmarks' environment: this checkout on the path, and no PyTorch interpreter
    unless a test names one (so "skipped" is what they print)."""
    env = {k: v for k, v in os.environ.items() if k != TORCH_PYTHON_VARIABLE}
    return {**env, "PYTHONPATH": ROOT, **extra}


@pytest.mark.large
def test_padding_benchmark_gives_identical_results_both_ways(tmp_path):
    out = tmp_path / "pad"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_padding", "--task=sst2",
         "--init_checkpoint=random", "--model_size=2/32/2", "--max_seq_length=64",
         "--max_train_examples=32", "--max_eval_examples=16", "--num_train_epochs=1",
         "--dropout=0", "--train_batch_size=16", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=600, check=False,
        env=_env())
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


def _report(framework, steps, loaded=5.0, first=9.0, rss=100.0):
    return {"framework": framework, "step_times": steps, "loaded_seconds": loaded,
            "first_step_seconds": first, "matmul_flops": 100e9, "peak_rss_mb": rss}


def test_training_benchmark_pools_rounds_and_compares_with_pytorch():
    xla = bench_training.merge_rounds([_report("kb xla", [2.0, 2.2], first=9.0, rss=300),
                                       _report("kb xla", [1.8, 2.0], first=11.0, rss=200)])
    torch = bench_training.merge_rounds([_report("torch", [2.5, 2.5]),
                                         _report("torch", [2.0, 2.2])])
    assert xla["step_times"] == [2.0, 2.2, 1.8, 2.0] and xla["round_steps"] == [2.1, 1.9]
    assert xla["first_step_seconds"] == 10.0 and xla["peak_rss_mb"] == 300
    text = bench_training.table({"xla": xla, "pytorch": torch}, flops_per_step=100e9,
                                batch_size=32, seq_length=128)
    rows = [line for line in text.splitlines() if line.startswith("| kb xla")]
    # median step 2.0 s: 16 examples/s, 2048 tokens/s, 50 GFLOP/s = 50% of 100; 1st step 5 s
    assert rows == ["| kb xla | 2.000 | 16.0 | 2048 | 50.0 | 50% of 100 | 300 | 5.0 | 5.0 |"]
    # PyTorch's median step is 2.35 s: 2.35 / 2.0; per round 2.5/2.1 and 2.1/1.9
    assert ("kerasbert xla throughput / PyTorch throughput = 1.18 (>1: kerasbert faster; "
            "per round: 1.19, 1.11)") in text


def test_training_benchmark_pads_every_other_row_when_asked(tmp_path):
    import numpy as np

    bench_training.make_batch(tmp_path / "b.npz", 2000, 8, batch_size=4, seq_length=10,
                              padded_positions=3)
    batch = np.load(tmp_path / "b.npz")
    assert batch["padding_mask"].sum(1).tolist() == [10, 7, 10, 7]
    assert batch["token_ids"][1, 6:].tolist() == [102, 0, 0, 0]  # [SEP], then [PAD]s
    assert batch["token_ids"][0, 9] == 102 and (batch["token_ids"][0, 1:9] >= 1000).all()


@pytest.mark.large
def test_training_benchmark_runs_both_kerasbert_variants_on_a_tiny_checkpoint(tmp_path):
    import json

    import numpy as np
    from safetensors.numpy import save_file

    hidden, layers, inner, vocab, positions = 16, 1, 32, 1100, 16
    rng = np.random.default_rng(0)
    shapes = {"embeddings.word_embeddings.weight": (vocab, hidden),
              "embeddings.position_embeddings.weight": (positions, hidden),
              "embeddings.token_type_embeddings.weight": (2, hidden),
              "pooler.dense.weight": (hidden, hidden), "pooler.dense.bias": (hidden,)}
    for name in ("embeddings.LayerNorm", "encoder.layer.0.attention.output.LayerNorm",
                 "encoder.layer.0.output.LayerNorm"):
        shapes.update({f"{name}.weight": (hidden,), f"{name}.bias": (hidden,)})
    p = "encoder.layer.0."
    for name, n_in, n_out in [(p + "attention.self.query", hidden, hidden),
                              (p + "attention.self.key", hidden, hidden),
                              (p + "attention.self.value", hidden, hidden),
                              (p + "attention.output.dense", hidden, hidden),
                              (p + "intermediate.dense", hidden, inner),
                              (p + "output.dense", inner, hidden)]:
        shapes.update({f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)})
    folder = tmp_path / "tiny"
    folder.mkdir()
    save_file({k: (0.1 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "bert", "vocab_size": vocab, "hidden_size": hidden,
        "num_hidden_layers": layers, "num_attention_heads": 2, "intermediate_size": inner,
        "max_position_embeddings": positions, "type_vocab_size": 2, "hidden_act": "gelu"}))
    (folder / "vocab.txt").write_text("".join(f"[unused{i}]\n" for i in range(vocab)))
    out = tmp_path / "bench.md"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_training",
         f"--checkpoint={folder}", "--variants=plain,xla", "--rounds=2", "--steps=2",
         "--warmup=1", "--batch_size=4", "--seq_length=16", f"--markdown={out}"],
        capture_output=True, text=True, timeout=600, check=False,
        env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert "2 round(s) × 2 steps after 1 warm-up" in table
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| kerasbert")]
    assert [("XLA" in r[1]) for r in rows] == [False, True]
    assert all(float(r[2]) > 0 and float(r[9]) > 0 for r in rows)  # step and first-step times
    assert "no --torch_python" in result.stdout


def test_group_by_length_benchmark_runs_both_ways_over_seeds(tmp_path):
    out = tmp_path / "group"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_group_by_length",
         "--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
         "--max_seq_length=32", "--max_train_examples=64", "--max_eval_examples=16",
         "--train_batch_size=8", "--num_train_epochs=1", "--length_group_batches=2",
         "--seeds=1,2", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=600, check=False,
        env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "group_by_length.md").read_text() in result.stdout
    import json

    saved = json.loads((out / "group_by_length.json").read_text())
    table = saved["tables"]["sst2"]
    assert table["seeds"] == [1, 2]
    plain, grouped = (table["variants"][v] for v in ("per-batch padding", "group_by_length"))
    assert table["time_ratio"]["values"] == pytest.approx(
        [g / p for g, p in zip(grouped["train_seconds"], plain["train_seconds"])])
    # Grouping never pads more than plain batching of the same shuffled rows.
    tokens = table["padded_tokens"]
    assert 0 < tokens["group_by_length"] <= tokens["per-batch padding"] <= 64 * 32
    for variant, grouping in (("per-batch_padding", False), ("group_by_length", True)):
        config = json.loads((out / variant / "seed-2" / "run_config.json").read_text())
        assert config["group_by_length"] is grouping and config["seed"] == 2


@pytest.mark.large
def test_device_check_smoke_runs_every_check_on_the_cpu(tmp_path):
    import json

    out = tmp_path / "device"
    result = subprocess.run(
        [os.path.join(ROOT, "benchmarks", "device_check.sh"), "--smoke", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=1200, check=False,
        env=_env(PYTHON=sys.executable))
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    report = json.loads((out / "device_check.json").read_text())
    assert (out / "device_check.md").read_text() in result.stdout
    checks = {r["check"] for r in report["checks"]}
    assert checks == {"training step, mixed_bfloat16 + XLA",
                      "mixed_float16 with dynamic loss scaling", "distribution_strategy=mirrored",
                      "two --deterministic runs, one seed",
                      "export on this machine, served on the CPU"}
    assert all(r["ok"] for r in report["checks"]), report["checks"]
    steps = [r for r in report["checks"] if r["check"].startswith("training step")]
    assert [r["setting"] for r in steps] == ["tiny 2/32/2, batch 4 × 16", "tiny 2/32/2, batch 4 × 32"]
    assert all(r["tokens_per_second"] > 0 and r["matmul_dtype"] == "bfloat16" for r in steps)


def test_device_check_without_a_gpu_says_so_and_exits_2(tmp_path):
    result = subprocess.run(
        [os.path.join(ROOT, "benchmarks", "device_check.sh"), f"--output_dir={tmp_path / 'd'}"],
        capture_output=True, text=True, timeout=300, check=False,
        env=_env(PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="-1"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith(
        "device_check: no GPU visible to TensorFlow")
    assert not (tmp_path / "d").exists()  # nothing written before the check


@pytest.mark.large
def test_serving_benchmark_serves_each_kind_from_raw_text(tmp_path):
    """Three tiny runs (classification, span, tagging) served from fresh processes; the
    HuggingFace side too where a torch interpreter is installed."""
    import json

    torch_python = os.environ.get(TORCH_PYTHON_VARIABLE)
    runs = []
    for task in ("sst2", "squad", "conll2003"):
        runs.append(tmp_path / task)
        done = subprocess.run(
            [sys.executable, "-m", "kerasbert.main", f"--task={task}", "--init_checkpoint=random",
             "--model_size=2/32/2", "--max_train_examples=16", "--max_eval_examples=40",
             "--num_train_epochs=1", f"--output_dir={runs[-1]}"],
            capture_output=True, text=True, timeout=600, check=False,
            env=_env())
        assert done.returncode == 0, done.stderr[-2000:]
    work = tmp_path / "work"
    with_torch = bool(torch_python) and os.path.isfile(torch_python)
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_serving",
         "--run_dirs=" + ",".join(map(str, runs)), f"--work_dir={work}", "--requests=6",
         "--warmup=1", "--batches=1", "--batch_size=8", "--rounds=2", "--tf_servers=lean,plain,litert"]
        + ([f"--torch_python={torch_python}"] if with_torch else []),
        capture_output=True, text=True, timeout=900, check=False,
        env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((work / "serving.json").read_text())
    saved = record["results"]
    assert set(saved) == {"sst2", "squad_v1", "conll2003"}  # rows named by task
    for task, sides in saved.items():
        assert set(sides) == {"kerasbert", "kerasbert plain"} | (
            {"huggingface"} if with_torch else set()) | {"kerasbert litert"}  # every kind
        for r in sides.values():
            assert r["rounds"] == 2 and r["requests"] == 12 and 0 < r["p50_ms"] <= r["p99_ms"]
            assert r["texts_per_second"] > 0
            assert 0 < r["import_seconds"] <= r["load_seconds"] <= r["first_answer_seconds"]
            # the server's own peak, not the parent's (LiteRT's process imports no TensorFlow)
            assert 20 < r["peak_rss_mb"] < 8000
    assert (work / "sst2" / "saved_model" / "1" / "saved_model.pb").exists()
    assert (work / "serving.md").read_text() in result.stdout
    host = record["host"]["before"]
    assert host["cpu_model"] and host["cpus_visible"] == os.cpu_count()
    assert len(host["load_average"]) == 3


def test_serving_benchmark_refuses_an_unfinished_run(tmp_path):
    (tmp_path / "run").mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_serving",
         f"--run_dirs={tmp_path / 'run'}", f"--work_dir={tmp_path / 'work'}"],
        capture_output=True, text=True, timeout=300, check=False,
        env=_env())
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"bench_serving: --run_dirs: {tmp_path / 'run'} is not a finished run")
    assert not (tmp_path / "work").exists()


@pytest.mark.large
def test_epoch_end_benchmark_times_each_epoch_under_two_replicas(tmp_path):
    out = tmp_path / "epochs.json"
    process = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_epoch_end", "--replicas=2", "--steps=3",
         "--pause=0", "--epochs=2", f"--json={out}"], check=False, cwd=ROOT, capture_output=True, text=True,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads(out.read_text())
    assert [e["epoch"] for e in report["epochs"]] == [1, 2]
    for epoch in report["epochs"]:
        assert 0 <= epoch["after_last_step_seconds"] <= epoch["seconds"]
    assert process.stdout.count("after the last step") == 2
    bad = subprocess.run([sys.executable, "-m", "benchmarks.bench_epoch_end", "--replicas=0"],
                         check=False,
                         cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--replicas" in bad.stderr.strip().splitlines()[-1]

"""benchmarks.bench_all: ratios and verdicts by hand, the README block generated from the
committed JSON, one-line refusals, and (large) the whole --quick pipeline without PyTorch."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import bench_all
from benchmarks.processes import TORCH_PYTHON_VARIABLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = [os.path.join(ROOT, *f.split("/")) for f in bench_all.README_SOURCES]


def _env():
    env = {k: v for k, v in os.environ.items() if k != TORCH_PYTHON_VARIABLE}
    return {**env, "PYTHONPATH": ROOT}


def test_ratios_medians_and_verdicts_by_hand():
    memory = bench_all.summarize(bench_all.item("sst2", "MB", [900, 1000, 1100],
                                                [1000, 800, 1100], ("ratio", "<=", 1.0)))
    assert memory["ratios"] == [0.9, 1.25, 1.0]
    assert memory["kerasbert_median"] == 1000 and memory["huggingface_median"] == 1000
    assert (memory["ratio_median"], memory["ratio_min"], memory["ratio_max"]) == (1.0, 0.9, 1.25)
    assert memory["verdict"] == "met"  # the median ratio 1.0 is ≤ 1
    # Throughput at least 1.15 × HF: a median ratio of 1.1 falls short.
    step = bench_all.summarize(bench_all.item("length 128", "steps/s", [1.1, 2.4, 1.2],
                                              [1.0, 2.0, 1.0], ("ratio", ">=", 1.15)))
    assert step["ratios"] == pytest.approx([1.1, 1.2, 1.2])
    assert step["ratio_median"] == pytest.approx(1.2) and step["verdict"] == "met"
    short = bench_all.summarize(bench_all.item("x", "steps/s", [1.0, 1.1], [1.0, 1.0],
                                               ("ratio", ">=", 1.15)))
    assert short["ratio_median"] == pytest.approx(1.05) and short["verdict"] == "short"
    # An HF round not measured: its ratio is None, the others still count.
    partial = bench_all.summarize(bench_all.item("x", "s", [2.0, 3.0], [4.0, None],
                                                 ("ratio", "<=", 1.0)))
    assert partial["ratios"] == [0.5, None] and partial["verdict"] == "met"
    # No HF at all: the ratio verdict is not measured, never guessed.
    alone = bench_all.summarize(bench_all.item("x", "MB", [1.0], [None], ("ratio", "<=", 1.0)))
    assert alone["verdict"] == "not measured" and alone["huggingface_median"] is None
    # A target on kerasbert's own value (first step ≤ 3 s, reading ≤ 5 × the file).
    first = bench_all.summarize(bench_all.item("first", "s", [2.0, 3.5, 2.5], None,
                                               ("value", "<=", 3.0)))
    assert first["kerasbert_median"] == 2.5 and first["verdict"] == "met"
    assert first["ratios"] == [None, None, None]
    reading = bench_all.summarize(bench_all.item("read", "×", [6.0], None, ("value", "<=", 5.0)))
    assert reading["verdict"] == "short"


def _data(rows):
    return {"host": {"cpu": "Test CPU", "cores": 2, "date": "2026-12-07T00:00:00+00:00",
                     "isa": {"avx2": True, "avx512f": False},
                     "versions": {"tensorflow": "2.21.0", "keras": "3.0", "torch": "2.9",
                                  "transformers": "5.0", "python": "3.11"}},
            "settings": {"command": "python -m benchmarks.bench_all --rounds=2", "rounds": 2},
            "rows": rows}


def test_the_table_shows_medians_ratios_targets_and_what_was_not_measured():
    rows = {"fine_tune_memory": {"items": [bench_all.summarize(bench_all.item(
                "mrpc", "MB", [900, 1100], [1000, 1000], ("ratio", "<=", 1.0)))]},
            "reader_memory": {"items": [bench_all.summarize(bench_all.item(
                "100 MB file", "×", [4.0, 4.2], None, ("value", "<=", 5.0)))]},
            "training_step": {"error": "bench_training exited 1 (log: boom)"},
            "serving": {"items": [bench_all.summarize(bench_all.item(
                "sst2: batch-1 p50", "ms", [5.0, 7.0], [None, None], ("ratio", "<=", 1.0)))]}}
    text = bench_all.render(_data(rows))
    assert text.startswith("2026-12-07, Test CPU (2 cores; avx2); TensorFlow 2.21.0")
    lines = text.splitlines()
    assert ("| Peak RSS while fine-tuning | mrpc (MB) | 1,000 | 1,000 | 0.90, 1.10 | "
            "1.00 (0.90–1.10) | ≤ HF | met |") in lines
    assert ("| Serving from raw text | sst2: batch-1 p50 (ms) | 6.00 | not measured | –, – | "
            "– | ≤ HF | not measured |") in lines
    assert ("| Reading a training file in memory | 100 MB file (×) | 4.10 | – | –, – | – | "
            "≤ 5 | met |") in lines
    assert "| Training step, batch 32 | failed: bench_training exited 1 (log: boom) |" in text
    # Rows in the table's order, whatever order the JSON has them in.
    titles = [line.split(" | ")[0] for line in lines if line.startswith("| ") and "---" not in line]
    assert titles[1:] == ["| Peak RSS while fine-tuning", "| Serving from raw text",
                          "| Training step, batch 32", "| Reading a training file in memory"]


def test_the_readme_block_is_the_rendering_of_the_committed_json():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    data = []
    for path in COMMITTED:
        with open(path, encoding="utf-8") as f:
            data.append(json.load(f))
    assert bench_all.block_of(readme) == bench_all.render(data), (
        f"README.md's bench_all block is stale: run `{bench_all.RENDER_COMMAND}`"
        if data else "README.md's bench_all block: run python -m benchmarks.bench_all "
        "--render=README.md")


def test_render_rewrites_only_the_block(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"before\n{bench_all.BEGIN}\nold table\n{bench_all.END}\nafter\n")
    source = tmp_path / "bench_all.json"
    source.write_text(json.dumps(_data({"reader_memory": {"items": [bench_all.summarize(
        bench_all.item("1 MB file", "×", [3.0], None, ("value", "<=", 5.0)))]}})))
    assert bench_all.main([f"--render={page}", f"--from={source}"]) == 0
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith(f"{bench_all.END}\nafter\n")
    assert bench_all.block_of(text) == bench_all.render(json.loads(source.read_text()))
    assert "old table" not in text
    assert bench_all.main([f"--render={page}"]) == 0  # no JSON: not yet measured
    assert bench_all.block_of(page.read_text()).startswith("Not yet measured: `python -m")
    with pytest.raises(ValueError, match="no <!-- bench_all:begin -->"):
        bench_all.replace_block("no markers here", "x")


def test_the_host_record_reads_the_cpu_model_and_isa_flags():
    text = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
            "flags\t\t: fpu sse2 avx2 avx512f amx_tile amx_bf16\n\nprocessor\t: 1\n")
    record = bench_all.cpu_record(text)
    assert record["model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert record["isa"] == {"avx2": True, "avx512f": True, "avx512_bf16": False,
                             "avx512_vnni": False, "amx_bf16": True, "amx_int8": False,
                             "amx_tile": True}


@pytest.mark.parametrize("flags, message", [
    (["--rows=speed"], "bench_all: --rows=speed: expected some of fine_tune_memory, serving, "
                       "training_step, first_step, reader_memory, eval_seconds"),
    (["--rows=serving"], "bench_all: --data_root: needed for the parity and serving rows "
                         "(the real GLUE, CoNLL-2003 and SQuAD files, e.g. ../shared/data); "
                         "or --quick"),
    (["--quick", "--tasks=mrpc"], "bench_all: --tasks=mrpc: --quick runs the bundled SST-2 "
                                  "sample only"),
    (["--rows=reader_memory", "--rounds=0"], "bench_all: --rounds=0: must be a positive "
                                             "integer"),
    (["--rows=training_step", "--lengths=32,x"], "bench_all: --lengths=32,x: expected "
                                                 "comma-separated integers"),
    (["--from=x.json"], "bench_all: --from: only with --render"),
])
def test_bad_flags_are_one_line_and_exit_2(flags, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        bench_all.main([*flags, f"--work_dir={tmp_path / 'work'}"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == message
    assert not (tmp_path / "work").exists()


@pytest.mark.large
def test_quick_runs_every_row_without_pytorch(tmp_path, tiny_checkpoint):
    """The whole pipeline on the bundled SST-2 sample and a tiny checkpoint, no torch: every
    row measured on kerasbert's side, every HF column "not measured"."""
    work = tmp_path / "work"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_all", "--quick",
         f"--init_checkpoint={tiny_checkpoint}", f"--work_dir={work}"],
        capture_output=True, text=True, timeout=1500, check=False, env=_env())
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    data = json.loads((work / "bench_all.json").read_text())
    assert set(data["rows"]) == set(bench_all.ROWS)
    assert data["settings"]["rounds"] == 1 and data["settings"]["torch_python"] is False
    assert data["host"]["versions"]["torch"] == "not measured"
    for row, entry in data["rows"].items():
        assert "error" not in entry, (row, entry)
        for it in entry["items"]:
            assert len(it["kerasbert"]) == 1 and it["kerasbert_median"] > 0, (row, it)
            assert it["huggingface_median"] is None and it["ratio_median"] is None
            if it["target"][0] == "ratio":
                assert it["verdict"] == "not measured"
            else:
                assert it["verdict"] in ("met", "short")
    names = {row: [it["name"] for it in e["items"]] for row, e in data["rows"].items()}
    assert names["fine_tune_memory"] == names["eval_seconds"] == ["sst2"]
    assert names["serving"] == [f"sst2{label}: {q[0]}" for label in ("", " (LiteRT)")
                                for q in bench_all.SERVING_QUANTITIES]  # both servers
    assert names["training_step"] == ["length 32: steps/s"]
    memory = data["rows"]["fine_tune_memory"]["items"][0]["kerasbert_median"]
    assert 200 < memory < 8000  # a TensorFlow process's peak, in MB
    assert (work / "bench_all.md").read_text() == bench_all.render(data)
    assert "| not measured |" in result.stdout


def test_several_measurements_render_each_row_from_the_newest():
    older = _data({"reader_memory": {"items": [bench_all.summarize(bench_all.item(
        "1 MB file", "×", [3.0], None, ("value", "<=", 5.0)))]},
        "eval_seconds": {"items": [bench_all.summarize(bench_all.item(
            "sst2", "s", [5.0], [3.0], ("ratio", "<=", 1.0)))]}})
    newer = _data({"eval_seconds": {"items": [bench_all.summarize(bench_all.item(
        "sst2", "s", [2.0], [3.0], ("ratio", "<=", 1.0)))]}})
    text = bench_all.render([older, newer])
    assert "| Evaluation seconds [2] | sst2 (s) | 2.00 | 3.00 |" in text
    assert "| Evaluation seconds [1]" not in text
    assert "| Reading a training file in memory [1] | 1 MB file" in text
    assert text.startswith("[1] Reading a training file in memory: ")
    assert "\n\n[2] Evaluation seconds: " in text
    assert bench_all.render([newer]) == bench_all.render(newer)

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


@pytest.mark.parametrize("page", bench_all.RENDER_PAGES)
def test_the_pages_blocks_are_the_rendering_of_the_committed_json(page):
    """README.md's summary and the speed page's full table, both from README_SOURCES."""
    with open(os.path.join(ROOT, *page.split("/")), encoding="utf-8") as f:
        text = f.read()
    data = []
    for path in COMMITTED:
        with open(path, encoding="utf-8") as f:
            data.append(json.load(f))
    assert bench_all.style_of(text) == ("summary" if page == "README.md" else "full")
    assert bench_all.block_of(text) == bench_all.render(data, bench_all.style_of(text)), (
        f"{page}'s bench_all block is stale: run `{bench_all.RENDER_COMMAND}`")


def test_the_summary_gives_one_line_per_row_and_server_with_the_ratios():
    serving = [bench_all.summarize(bench_all.item(f"sst2{label}: {name}", unit, [k], [2.0],
                                                  ("ratio", op, 1.0)))
               for label, k in (("", 3.0), (" (LiteRT)", 1.0))
               for name, _, unit, op in bench_all.SERVING_QUANTITIES]
    rows = {"serving": {"items": serving},
            "first_step": {"items": [bench_all.summarize(bench_all.item(
                "length 128: loaded → 1st step done", "s", [2.5], [1.5], ("value", "<=", 3.0)))]}}
    text = bench_all.render(_data(rows), "summary")
    lines = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert lines[0] == ("| Serving from raw text | sst2 (SavedModel) | peak RSS 1.50, batch-1 p50 "
                        "1.50, batch-1 p99 1.50, batch texts/s 1.50, start → first answer 1.50 "
                        "| ≤ HF (batch texts/s: ≥ HF) | 1 of 5 |")
    assert lines[1].endswith("| 4 of 5 |") and "sst2 (LiteRT)" in lines[1]
    assert lines[2] == ("| First step after load |  | length 128: loaded → 1st step done 2.50 s "
                        "| ≤ 3 | met |")
    assert "[the full table](docs/experiments/speed-and-memory.md#the-full-table)" in text


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
    assert names["serving"] == [f"sst2{label}: {q[0]}"
                                for label in ("", " (LiteRT)", " (LiteRT int8)")
                                for q in bench_all.SERVING_QUANTITIES]  # every server
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


def test_a_later_run_of_some_tasks_replaces_only_their_items():
    def eval_items(**seconds):
        return {"eval_seconds": {"items": [bench_all.summarize(bench_all.item(
            task, "s", [value], [3.0], ("ratio", "<=", 1.0))) for task, value in seconds.items()]}}

    older = _data(eval_items(conll2003=4.0, sst2=5.0, mrpc=6.0))
    newer = _data(eval_items(conll2003=2.0))
    text = bench_all.render([older, newer])
    rows = [line for line in text.splitlines() if line.startswith("| Evaluation seconds")]
    assert [r.split(" | ")[:3] for r in rows] == [  # grouped in TASKS' order
        ["| Evaluation seconds [1]", "sst2 (s)", "5.00"],
        ["| Evaluation seconds [1]", "mrpc (s)", "6.00"],
        ["| Evaluation seconds [2]", "conll2003 (s)", "2.00"]]
    assert text.startswith("[1] Evaluation seconds (sst2, mrpc): ")
    assert "\n\n[2] Evaluation seconds (conll2003): " in text

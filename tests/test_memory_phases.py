"""benchmarks/memory_phases.py: one fine-tuning with its memory read at the end of every
phase (benchmarks/phase_probe.py), and the tables made from those readings."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import memory_phases, phase_probe
from benchmarks.processes import TORCH_PYTHON_VARIABLE
from tests.helpers.hf_bert import hf_config, hf_weights, write_hf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mark(phase, rss, peak, seconds=1.0):
    return {"phase": phase, "seconds": seconds, "rss_mb": rss, "phase_peak_rss_mb": peak,
            "anon_mb": rss / 2, "file_mb": rss / 2}


def test_the_comparison_lines_up_the_phases_both_sides_have():
    results = {
        "kerasbert": {"framework": "kb", "marks": [
            _mark("interpreter", 10, 10), _mark("import kerasbert", 800, 800),
            _mark("encoder loaded", 900, 1000), _mark("data featurized", 910, 920),
            _mark("model built", 915, 915), _mark("first step (traced)", 1500, 1500),
            _mark("training", 1600, 1700), _mark("evaluation", 1600, 1650)]},
        "huggingface": {"framework": "hf", "marks": [
            _mark("interpreter", 10, 10), _mark("import torch", 200, 200),
            _mark("import transformers", 400, 400), _mark("data featurized", 410, 410),
            _mark("encoder loaded", 500, 500), _mark("first step (traced)", 900, 1000),
            _mark("training", 950, 1100), _mark("evaluation", 900, 1000)]}}
    text = memory_phases.markdown(results, "header")
    assert "| imports | 800 | 400 | +400 | 800 | 400 |" in text
    assert "| encoder loaded | 900 | 500 | +400 | 1000 | 500 |" in text
    assert "| first step (traced) | 1500 | 900 | +600 | 1500 | 1000 |" in text
    assert "Process peak RSS: kerasbert 1700 MB, HF 1100 MB (+600)" in text
    # each side's own table: the growth in each phase
    assert "| import kerasbert | 1.0 | 800 | +790 | 800 |" in text
    assert "| import transformers | 1.0 | 400 | +200 | 400 |" in text


def test_a_mark_reads_this_process_and_resets_the_high_water_mark():
    probe = phase_probe.Probe(trace_python=True)
    probe.mark("start")
    block = bytearray(64 * 2**20)  # 64 MiB, touched
    block[::4096] = b"x" * len(block[::4096])
    del block
    probe.mark("after a 64 MiB block")
    probe.mark("nothing")
    start, block, nothing = probe.marks
    assert block["phase_peak_rss_mb"] >= start["rss_mb"] + 60
    assert block["python_heap_peak_mb"] >= 64  # a bytearray is Python heap
    assert nothing["phase_peak_rss_mb"] < block["phase_peak_rss_mb"] - 30  # reset
    assert nothing["python_heap_peak_mb"] < 1


@pytest.mark.large
def test_the_benchmark_marks_every_phase_of_a_tiny_fine_tuning(tmp_path):
    checkpoint = write_hf(tmp_path / "tiny", hf_weights(positions=64),
                          hf_config(positions=64))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != TORCH_PYTHON_VARIABLE}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory_phases", "--quick",
         f"--init_checkpoint={checkpoint}", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=900, check=False,
        env={**env, "PYTHONPATH": ROOT}, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the HuggingFace side is skipped" in result.stdout
    marks = json.loads((out / "memory_phases.json").read_text())["kerasbert"]["marks"]
    phases = [m["phase"] for m in marks]
    assert phases[:5] == ["interpreter", "import tensorflow (+ keras)", "import keras_hub",
                          "import kerasbert", "encoder loaded"]
    for later in ("data featurized", "model built", "first step (traced)", "training",
                  "evaluation", "checkpoint", "model.weights.h5", "encoder/ written"):
        assert later in phases
    assert phases.index("first step (traced)") < phases.index("training") < phases.index(
        "evaluation")
    assert phases[-1] == "outputs written"
    assert marks[1]["rss_mb"] > marks[0]["rss_mb"] + 100  # TensorFlow is heavy
    assert all(m["phase_peak_rss_mb"] >= m["rss_mb"] - 1 for m in marks)
    assert all(m["python_heap_peak_mb"] >= m["python_heap_mb"] - 1e-6 for m in marks)
    assert (out / "kerasbert" / "run" / "metrics.json").is_file()  # the run itself finished
    assert "#### kerasbert (TensorFlow" in (out / "memory_phases.md").read_text()

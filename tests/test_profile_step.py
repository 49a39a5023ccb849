"""benchmarks/profile_step.py: self times, busy time and the tables from a hand-made trace; one
real profile of a tiny model."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import profile_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _space(threads):
    """An XSpace with one host plane; `threads`: {thread name: [(name, type, start µs,
    duration µs)]}; a type None makes a non-op event (the executor's own)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    ids = {}
    for line_id, (thread, events) in enumerate(threads.items()):
        line = plane.lines.add(id=line_id, name=thread, timestamp_ns=1000)
        for name, kind, start_us, duration_us in events:
            full = name if kind is None else f"{name}:{kind}"
            if full not in ids:
                ids[full] = len(ids) + 1
                meta = plane.event_metadata[ids[full]]
                meta.id, meta.name, meta.display_name = ids[full], full, kind or ""
            line.events.add(metadata_id=ids[full], offset_ps=start_us * 10**6,
                            duration_ps=duration_us * 10**6)
    return space


def test_self_times_take_nested_ops_out_and_busy_time_is_the_union():
    space = _space({
        "tf_Compute/1": [
            ("ExecutorState::Process", None, 0, 1000),  # not an op
            ("task_model/call", "StatefulPartitionedCall", 0, 100),  # holds the next two
            ("task_model/bert/transformer_layer_0/self_attention_layer/query/einsum",
             "_MklEinsum", 10, 30),
            ("task_model/bert/transformer_layer_0/feedforward_output_dense/MatMul",
             "_MklMatMul", 50, 40),
            ("gradient_tape/task_model/bert/transformer_layer_0/self_attention_layer_norm/Sum",
             "Sum", 300, 20)],
        "tf_Compute/2": [  # overlaps the call on thread 1 from 80 to 100
            ("fused_adam_w/ResourceApplyAdam", "ResourceApplyAdam", 80, 60)],
        "tf_data_private_threadpool/3": [("Sum", "Sum", 500, 400)],  # the input's: left out
    })
    events = profile_step.op_events(space)
    assert sorted(e[2] for e in events) == ["ResourceApplyAdam", "StatefulPartitionedCall",
                                            "Sum", "_MklEinsum", "_MklMatMul"]
    own = {kind: ps / 10**6 for _, kind, ps in profile_step.self_times(events)}
    assert own == {"StatefulPartitionedCall": 30, "_MklEinsum": 30, "_MklMatMul": 40,
                   "ResourceApplyAdam": 60, "Sum": 20}
    # union: [0, 140) and [300, 320)
    assert profile_step.busy_ps(events) == 160 * 10**6

    # two steps in 0.5 ms of wall time
    summary = profile_step.summarize(space, wall_seconds=500e-6, steps=2, top=2)
    assert summary["step_seconds"] == pytest.approx(250e-6)
    assert summary["busy_seconds"] == pytest.approx(80e-6)
    assert summary["gap_seconds"] == pytest.approx(170e-6)
    assert summary["op_seconds"] == pytest.approx(90e-6)
    assert [(r["type"], r["seconds"], r["calls"]) for r in summary["op_types"]] == [
        ("ResourceApplyAdam", pytest.approx(30e-6), 0.5),
        ("_MklMatMul", pytest.approx(20e-6), 0.5)]
    parts = {(r["phase"], r["part"]): r["seconds"] for r in summary["parts"]}
    assert parts == {("update", "–"): pytest.approx(30e-6),
                     ("forward", "feed-forward"): pytest.approx(20e-6),
                     ("forward", "attention"): pytest.approx(15e-6),
                     ("forward", "head and loss"): pytest.approx(15e-6),
                     ("backward", "layer norm"): pytest.approx(10e-6)}
    assert summary["parts"][0]["share"] == pytest.approx(30 / 250)


def test_a_trace_without_ops_is_refused():
    with pytest.raises(ValueError, match="no TensorFlow op events"):
        profile_step.summarize(
            _space({"tf_Compute/1": [("ExecutorState::Process", None, 0, 5)]}), 1.0, 1)


def test_profile_of_a_tiny_model_names_the_step_parts(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.profile_step", "--model_size=2/32/2",
         "--batch_size=4", "--seq_length=16", "--steps=2", "--warmup=1",
         f"--output_dir={tmp_path}"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "profile.json").read_text())
    phases = {r["phase"] for r in summary["parts"]}
    assert {"forward", "backward", "update"} <= phases
    assert 0 < summary["busy_seconds"] <= summary["step_seconds"]
    assert any(r["type"] == "ResourceApplyAdam" for r in summary["op_types"])
    assert "| op type |" in (tmp_path / "profile.md").read_text()
    assert list(tmp_path.glob("trace/**/*.xplane.pb"))


def test_profile_refuses_a_zero_warmup(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.profile_step", "--model_size=2/32/2",
         "--warmup=0", f"--output_dir={tmp_path}"], capture_output=True, text=True,
        check=False, cwd=ROOT)
    assert result.returncode != 0
    assert "--warmup=0" in result.stderr
    assert not list(tmp_path.iterdir())

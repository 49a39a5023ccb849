"""benchmarks/lockstep.py: its comparison on hand-made losses, its flag errors, and under `large`
both sides on a tiny HuggingFace checkpoint: in step where the recipes are the same, apart
where they are known to differ."""

import json
import os

import pytest

from benchmarks import lockstep

TORCH_PYTHON = os.environ.get("KERASBERT_TORCH_PYTHON")  # with torch and transformers


def test_compare_names_the_first_step_that_parts():
    ours = [2.0, 1.5, 1.2, 0.5, 0.4]
    theirs = [2.0, 1.5 + 1e-5, 1.2 + 5e-4, 0.5, 0.4 + 2e-4]
    rows, parted = lockstep.compare(ours, theirs, tolerance=1e-4)
    # |d| ≤ 1e-4 · max(1, |HF|): step 1 (1e-5 ≤ 1.5e-4) agrees, step 2 (5e-4 > 1.2e-4) not;
    # step 4's loss is below 1, so its bound is 1e-4 and 2e-4 parts too.
    assert [r["agrees"] for r in rows] == [True, True, False, True, False]
    assert parted == 2
    assert rows[2]["difference"] == pytest.approx(5e-4)
    text = lockstep.markdown(rows, parted, "header")
    assert "part at step 2" in text and "| 2 | 1.200000 | 1.200500 | 5.0e-04 ✗ |" in text
    assert lockstep.compare(ours, ours, 1e-4)[1] is None


@pytest.mark.parametrize("flags, message", [
    (["--task=nosuch"], "--task=nosuch: unknown task"),
    (["--task=sst2", "--steps=0"], "--steps=0: must be positive"),
    (["--task=sst2", "--data_dir=/no/such/dir"], "--data_dir=/no/such/dir: no such folder"),
    (["--task=sst2", "--torch_python=/no/python"], "--torch_python=/no/python: not an interpreter"),
])
def test_bad_flags_are_one_line_errors_before_anything_is_written(tmp_path, capsys, flags,
                                                                   message):
    out = tmp_path / "out"
    base = ["--torch_python=/no/python", f"--output_dir={out}"]
    assert lockstep.main(base + flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kerasbert: error: ") and message in err[0]
    assert not out.exists()


def test_without_a_torch_interpreter_it_says_how_to_name_one(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERASBERT_TORCH_PYTHON", raising=False)
    assert lockstep.main(["--task=sst2", f"--output_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kerasbert: error: --torch_python: required (an interpreter with torch and "
                   "transformers), or set KERASBERT_TORCH_PYTHON"]
    assert not (tmp_path / "out").exists()


@pytest.mark.large
@pytest.mark.parametrize("task_name, flags, agrees", [
    ("sst2", [], True),
    ("stsb", [], True),
    ("conll2003", [], True),  # token_mean, HuggingFace's reduction
    ("conll2003", ["--tagging_loss=sentence_mean"], False),  # a known difference: found
    ("swag", [], True),
    # SQuAD: the reference leaves padding out of its softmax too
    ("squad_v1", ["--max_seq_length=64", "--max_query_length=16", "--doc_stride=16"], True),
])
def test_both_sides_take_the_same_steps_on_a_tiny_checkpoint(tmp_path, capsys, tiny_checkpoint,
                                                             task_name, flags, agrees):
    if not (TORCH_PYTHON and os.path.isfile(TORCH_PYTHON)):
        pytest.skip("no torch interpreter: set KERASBERT_TORCH_PYTHON to one with torch and "
                    "transformers")
    code = lockstep.main([f"--task={task_name}", f"--init_checkpoint={tiny_checkpoint}",
                          "--steps=6",
                          "--learning_rate=1e-3", "--train_batch_size=8", *flags,
                          f"--torch_python={TORCH_PYTHON}", f"--output_dir={tmp_path / 'out'}"])
    report = json.loads((tmp_path / "out" / "lockstep.json").read_text())
    assert len(report["steps"]) == 6
    if agrees:
        assert code == 0 and report["first_parted"] is None, capsys.readouterr().out
    else:  # a per-sentence mean is another loss from the first batch on
        assert code == 1 and report["first_parted"] == 0
        assert "part at step 0" in (tmp_path / "out" / "lockstep.md").read_text()

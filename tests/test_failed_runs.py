"""Failed runs (Mosbach et al. 2021): the constant-prediction baseline of a dev set, the
check against it, its record in failure_check.json and report.md, and the restarts tables'
failure counts."""

import copy
import csv
import json
import os

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kerasbert import plugins, restarts, run_folder
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.kinds.base import TaskKind
from kerasbert.metrics import failure_check
from kerasbert.tasks import conll
from kerasbert.tasks.base import Features

REGISTRY = plugins.registry()


def _features(labels, shape=(3,)):
    rows = len(labels)
    inputs = {name: np.ones((rows, *shape), np.int32)
              for name in ("token_ids", "segment_ids", "padding_mask")}
    return Features(inputs=inputs, labels=np.asarray(labels), examples=[None] * rows)


def _baseline(name, features):
    task = REGISTRY.task(name)
    return task.constant_baseline(features, task.dev_splits[0], REGISTRY.kind_of(task))


# ---- the baseline, against hand-computed values ------------------------------------------

def test_majority_accuracy():
    assert _baseline("sst2", _features([0, 0, 0, 1])) == pytest.approx(0.75)
    assert _baseline("sst2", _features([1, 0, 1, 1, 1])) == pytest.approx(0.8)


@pytest.mark.parametrize("labels", [[1, 0, 0, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0, 1]])
def test_f1_is_that_of_predicting_every_example_positive(labels):
    p = np.mean(labels)
    assert _baseline("mrpc", _features(labels)) == pytest.approx(2 * p / (1 + p))


def test_a_constant_prediction_has_no_correlation():
    """Matthews' coefficient of one class is 0; Pearson's of one value is undefined,
    counted as 0."""
    assert _baseline("cola", _features([0, 1, 1, 1])) == 0.0
    assert _baseline("stsb", _features([0.5, 4.0, 2.5])) == 0.0


def test_multiple_choice_picks_the_most_frequent_choice():
    assert _baseline("swag", _features([0, 2, 2, 1], shape=(4, 3))) == pytest.approx(0.5)


def test_tagging_takes_the_best_constant_tag(uncased_vocab):
    """"EU rejects German call" (B-ORG O B-MISC O): all O finds no entity (F1 0); all
    B-MISC (or B-ORG) predicts 4 one-word entities, 1 right of 2: P 1/4, R 1/2, F1 1/3;
    all I-X is one 4-word entity (conlleval reads a leading I as B), none right."""
    from kerasbert.data.tokenization import WordPieceTokenizer

    task = REGISTRY.task("conll2003")
    example = conll.Sentence(guid="dev-0", text_a="EU rejects German call",
                             words=("EU", "rejects", "German", "call"),
                             label=("B-ORG", "O", "B-MISC", "O"))
    features = task.featurize([example], WordPieceTokenizer(uncased_vocab, do_lower_case=True),
                              16)
    assert task.constant_baseline(features, "dev", REGISTRY.kind_of(task)) == pytest.approx(1 / 3)


def test_squad_answers_nothing():
    """v1.1: an empty answer scores 0; v2.0: 100 × the share of unanswerable questions."""
    for name in ("squad_v1", "squad_v2"):
        task = REGISTRY.task(name)
        examples = task.read_examples(task.sample_dir(), "dev")
        features = Features(inputs={}, labels=None, examples=examples)
        unanswerable = np.mean([not any(a.text for a in e.answers) for e in examples])
        expected = 0.0 if name == "squad_v1" else 100 * unanswerable
        assert task.constant_baseline(features, "dev") == pytest.approx(expected)
    assert 0 < unanswerable < 1  # the v2 sample has both kinds of question


def test_a_kind_without_constant_predictions_leaves_the_baseline_unknown():
    task = REGISTRY.task("sst2")
    assert task.constant_baseline(_features([0, 1]), "dev", TaskKind()) is None
    bare = copy.copy(task)
    bare.registered_kind = None  # a task outside any registry, given no kind
    assert bare.constant_baseline(_features([0, 1]), "dev") is None


# ---- the check ---------------------------------------------------------------------------

def test_failure_check_margin_and_direction():
    assert failure_check("accuracy", 0.75, 0.75, 0.0)["failed"]  # the majority's own accuracy
    assert not failure_check("accuracy", 0.76, 0.75, 0.0)["failed"]
    assert failure_check("accuracy", 0.76, 0.75, 0.02)["failed"]
    assert failure_check("mse", 2.0, 1.9, 0.1, greater=False)["failed"]
    assert not failure_check("mse", 1.7, 1.9, 0.1, greater=False)["failed"]
    assert failure_check("accuracy", 0.9, None, 0.0) == {
        "failed": None, "metric": "accuracy", "value": 0.9, "baseline": None, "margin": 0.0,
        "greater_is_better": True}
    assert failure_check("accuracy", float("nan"), 0.5, 0.0)["failed"] is None


def test_failure_margin_is_checked():
    with pytest.raises(InputError, match="--failure_margin=-0.1"):
        RunConfig(task="sst2", output_dir="x", failure_margin=-0.1).validate()
    with pytest.raises(InputError, match="--grad_norm_every=-1"):
        RunConfig(task="sst2", output_dir="x", grad_norm_every=-1).validate()


# ---- end to end: a run that cannot learn fails, one that learns does not -----------------

ROWS = [("a good film", "positive"), ("bad and dull", "negative"),
        ("good acting", "positive"), ("a bad plot", "negative")] * 6
DEV = [("a good film", "positive"), ("good acting", "positive"), ("good fun", "positive"),
       ("a bad plot", "negative")]  # majority 3/4


def _run(tmp_path, name, learning_rate):
    from kerasbert import run as run_lib

    for file, rows in (("train.csv", ROWS), ("dev.csv", DEV)):
        (tmp_path / file).write_text("text,label\n" + "".join(f"{t},{l}\n" for t, l in rows))
    out = tmp_path / name
    run_lib.execute(RunConfig(
        task="text_classification", train_file=str(tmp_path / "train.csv"),
        validation_file=str(tmp_path / "dev.csv"), init_checkpoint="random", model_size="2/32/2",
        max_seq_length=16, train_batch_size=8, num_train_epochs=6.0, dropout=0.0,
        learning_rate=learning_rate, warmup_proportion=0.0, seed=1, grad_norm_every=2,
        output_dir=str(out)))
    return out


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("failed_runs")
    # 0 is refused by --learning_rate; 1e-12 moves no float32 weight of this model (Adam's
    # step, ~lr, is far below half an ulp of every weight), so the model stays at its
    # initialisation, which predicts the same class for every dev text.
    return _run(folder, "stuck", 1e-12), _run(folder, "learns", 3e-3)


def test_a_run_that_cannot_learn_is_recorded_as_failed(two_runs):
    stuck, learns = two_runs
    failed = run_folder.read_failure_check(stuck)
    assert failed["failed"] is True and failed["metric"] == "accuracy"
    assert failed["baseline"] == pytest.approx(0.75) and failed["margin"] == 0.0
    assert failed["value"] <= 0.75
    assert "**Failed run**: dev accuracy" in (stuck / "report.md").read_text()
    ok = run_folder.read_failure_check(learns)
    assert ok["failed"] is False and ok["value"] == pytest.approx(1.0)
    assert "Not a failed run" in (learns / "report.md").read_text()
    # failure_check.json holds the record; metrics.json the metrics alone, as before.
    assert json.loads((stuck / "failure_check.json").read_text()) == failed
    assert set(json.loads((stuck / "metrics.json").read_text())) == {"accuracy", "macro_f1"}


def test_the_runs_record_their_gradient_norms(two_runs):
    groups = ["embeddings", "layer_0", "layer_1", "pooler", "head", "total"]
    for out in two_runs:
        with open(out / "history.csv") as f:
            history = list(csv.DictReader(f))
        assert len(history) == 6
        for prefix in ("grad_norm/", "grad_norm_last/"):
            assert all(float(history[-1][prefix + g]) > 0 for g in groups)
        with open(out / "grad_norms.csv") as f:
            steps = list(csv.DictReader(f))
        assert [int(r["step"]) for r in steps] == list(range(2, 19, 2))  # 3 steps × 6 epochs
        assert all(float(r["grad_norm/total"]) > 0 for r in steps)
        # an epoch's last step (3, 6, ...; the even ones are in grad_norms.csv) is its "last"
        assert float(history[1]["grad_norm_last/total"]) == float(steps[2]["grad_norm/total"])


def test_the_restarts_table_counts_failed_runs(two_runs):
    stuck, learns = two_runs
    rows = [{"label": "tiny", "runs": {1: str(stuck), 2: str(learns)}}]
    table = restarts.summarize(restarts.collect(rows, "accuracy"), "accuracy")
    failures = table["rows"][0]["failures"]
    assert (failures["count"], failures["n"], failures["seeds"]) == (1, 2, [1])
    # Clopper–Pearson by its definition: Beta quantiles.
    assert failures["low"] == pytest.approx(scipy_stats.beta.ppf(0.025, 1, 2))
    assert failures["high"] == pytest.approx(scipy_stats.beta.ppf(0.975, 2, 1))
    assert failures["successful"]["mean"] == pytest.approx(1.0)
    text = restarts.markdown(table)
    assert "| failed runs (95% CI) | successful runs: mean ± std |" in text
    assert "| 1/2 (50%, [1, 99]%) | 100.0 (n=1) |" in text


def test_tables_of_runs_without_the_check_are_unchanged(tmp_path):
    """Runs made before the check (no failure_check.json): no failure key, no column."""
    runs = {}
    for seed, value in ((1, 0.8), (2, 0.9)):
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        (folder / "metrics.json").write_text(json.dumps({"accuracy": value}))
        runs[seed] = str(folder)
    table = restarts.summarize(restarts.collect([{"label": "a", "runs": runs}], "accuracy"),
                               "accuracy")
    assert "failures" not in table["rows"][0] and "failure_checks" not in table["rows"][0]
    assert "failed runs" not in restarts.markdown(table)
    assert "Failed runs" not in restarts.markdown(table)


def test_a_failing_baseline_is_recorded_as_unknown(monkeypatch, tmp_path, capsys):
    """A plugin task whose scoring of constant outputs raises: the run still finishes."""
    from kerasbert import run as run_lib

    task = REGISTRY.task("sst2")

    def broken(*args, **kwargs):
        raise ValueError("cannot score")

    monkeypatch.setattr(type(task), "constant_baseline", broken)
    config = RunConfig(task="sst2", output_dir=str(tmp_path), failure_margin=0.01)
    record = run_lib.check_failure(config, task, REGISTRY.kind_of(task),
                                   {"dev": _features([0, 1])}, {"accuracy": 0.5})
    assert record["failed"] is None and record["baseline"] is None
    assert record["margin"] == 0.01
    assert "baseline unknown (ValueError: cannot score)" in capsys.readouterr().out
    assert os.listdir(tmp_path) == []

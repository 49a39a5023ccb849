"""End-to-end runs of `kerasbert.main` on a tiny random model and the bundled samples."""

import copy
import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError

TINY = dict(init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            train_batch_size=8, eval_batch_size=16, num_train_epochs=1.0, seed=1)


def _run(tmp_path, task, name="run", **overrides):
    values = dict(TINY, task=task, output_dir=str(tmp_path / name))
    values.update(overrides)
    return run_lib.execute(RunConfig(**values)), tmp_path / name


def test_single_sentence_task_writes_every_output(tmp_path):
    metrics, out = _run(tmp_path, "sst2", max_train_examples=48, num_train_epochs=2.0,
                        do_predict=True)
    assert set(metrics) == {"accuracy"} and 0.0 <= metrics["accuracy"] <= 1.0
    assert json.loads((out / "metrics.json").read_text()) == metrics
    config = json.loads((out / "run_config.json").read_text())
    # The task's recipe was filled in where no flag was given.
    assert config["learning_rate"] == 2e-5 and config["head"] == "cls_linear"
    assert (out / "eval_results.txt").read_text() == f"accuracy = {metrics['accuracy']}\n"
    history = list(csv.DictReader(open(out / "history.csv")))
    assert [row["epoch"] for row in history] == ["1", "2"]
    assert int(history[-1]["step"]) == 2 * 6  # 48 examples / batch 8 = 6 steps per epoch
    assert float(history[-1]["dev_accuracy"]) == pytest.approx(metrics["accuracy"], abs=1e-6)
    # Each epoch's dev evaluation time is a part of the cumulative train + dev seconds.
    assert 0 <= sum(float(r["eval_seconds"]) for r in history) <= float(history[-1]["seconds"])
    # each epoch's process peak memory in MiB (Linux): TensorFlow alone holds hundreds
    assert all(float(r["peak_rss_mb"]) > 100 for r in history)
    assert any(name.startswith("events.out") for name in os.listdir(out / "tensorboard"))
    assert not os.path.exists(out / "checkpoints")  # finished: the resume state is dropped
    assert os.path.exists(out / "model.weights.h5")
    # the encoder's weights are stored once, in model.weights.h5
    assert sorted(os.listdir(out / "encoder")) == ["encoder_config.json", "vocab.txt"]
    rows = list(csv.reader(open(out / "test_results.tsv"), delimiter="\t"))
    assert rows[0] == ["index", "prediction"] and len(rows) > 1
    assert {r[1] for r in rows[1:]} <= {"0", "1"}
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_sentence_pair_task_reports_f1_and_accuracy(tmp_path):
    metrics, _ = _run(tmp_path, "mrpc", max_train_examples=16)
    assert set(metrics) == {"accuracy", "f1"}


def test_head_options_reach_the_head(tmp_path):
    # The raw [CLS] state instead of the pooler: the pooler then gets no gradient.
    metrics, _ = _run(tmp_path, "rte", max_train_examples=16,
                      head_options={"cls_linear_use_pooler": False})
    assert set(metrics) == {"accuracy"}


def test_a_heads_options_leave_out_a_longer_named_heads():
    from absl import flags

    from kerasbert import main, plugins

    values = flags.FlagValues()
    for name in ("tagger_dropout", "tagger_crf_constraints", "bimpm_lstm_units",
                 "bimpm_no_context_lstm_units"):
        flags.DEFINE_string(name, "x", "", flag_values=values)
    values(["prog"])
    heads = plugins.registry().heads
    assert set(main.head_options(values, "tagger", heads)) == {"tagger_dropout"}
    assert set(main.head_options(values, "tagger_crf", heads)) == {"tagger_crf_constraints"}
    assert set(main.head_options(values, "bimpm", heads)) == {"bimpm_lstm_units"}


def test_multiple_choice_task_runs(tmp_path):
    metrics, out = _run(tmp_path, "swag", max_train_examples=16, max_eval_examples=16,
                        do_predict=True)
    assert set(metrics) == {"accuracy"}
    history = list(csv.DictReader(open(out / "history.csv")))
    assert 0.0 <= float(history[0]["train_accuracy"]) <= 1.0
    rows = list(csv.reader(open(out / "test_predictions.csv")))
    assert rows[0][:2] == ["id", "prediction"] and len(rows) > 1


def test_ner_fine_tuning_writes_one_tag_per_word(tmp_path):
    metrics, out = _run(tmp_path, "conll2003", max_train_examples=16, max_eval_examples=8,
                        max_seq_length=16)  # short windows: long sentences are split
    assert {"precision", "recall", "f1", "PER_f1"} <= set(metrics)
    sentences = (out / "valid_predictions.txt").read_text().strip().split("\n\n")
    assert len(sentences) == 8
    assert all(len(line.split()) == 3 for s in sentences for line in s.splitlines())


def test_feature_based_ner_keeps_the_encoder_frozen(tmp_path):
    from kerasbert.model import encoders

    metrics, out = _run(tmp_path, "conll2003", head="feature_bilstm", max_train_examples=16,
                        max_eval_examples=8, learning_rate=1e-2,
                        head_options={"feature_bilstm_layers": "sum_all",
                                      "feature_bilstm_lstm_units": 8})
    assert "f1" in metrics
    # The encoder saved after training equals a fresh one from the same seed.
    trained = encoders.load_encoder(str(out)).backbone
    fresh = encoders.random_encoder("2/32/2", seed=1).backbone
    for a, b in zip(trained.weights, fresh.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # The head holds the encoder's layers under its own name in model.weights.h5, where a
    # lone encoder cannot read them: encoder/ keeps its own copy.
    assert "encoder.weights.h5" in os.listdir(out / "encoder")


@pytest.mark.parametrize("task, keys", [
    ("squad_v1", {"exact_match", "f1"}),
    ("squad_v2", {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"}),
])
def test_squad_fine_tunes_decodes_and_scores(tmp_path, task, keys):
    metrics, out = _run(tmp_path, task, max_train_examples=16, max_eval_examples=12,
                        max_seq_length=64, max_query_length=16, doc_stride=24)
    assert keys <= set(metrics)
    predictions = json.loads((out / "predictions.json").read_text())
    assert len(predictions) == 12 and all(isinstance(v, str) for v in predictions.values())
    assert (out / "nbest_predictions.json").exists()
    assert (out / "null_odds.json").exists() == (task == "squad_v2")
    # An epoch covers every window (feature row), not one batch per 8 questions: the
    # bundled contexts are longer than 64 pieces, so 16 questions make more rows.
    from kerasbert import plugins
    from kerasbert.data.tokenization import WordPieceTokenizer

    # A copy: configuring the registry's shared task would leak into later tests.
    squad_task = copy.copy(plugins.registry().task(task)).configure(max_query_length=16,
                                                                     doc_stride=24)
    examples = squad_task.read_examples(squad_task.sample_dir(), "train")[:16]
    tokenizer = WordPieceTokenizer(str(out / "encoder" / "vocab.txt"))
    rows = len(squad_task.featurize(examples, tokenizer, 64).inputs["token_ids"])
    history = list(csv.DictReader(open(out / "history.csv")))
    assert rows > 16 and int(history[-1]["step"]) == -(-rows // TINY["train_batch_size"])


def _squad_files(tmp_path, dev_questions=3):
    """The bundled SQuAD v1.1 train file, and a dev file of its first questions, under
    names of their own (so a run can only have read them through the flags)."""
    from kerasbert.tasks.squad import TASKS

    sample = TASKS["squad_v1"].sample_dir()
    train, dev = tmp_path / "my-train.json", tmp_path / "my-dev.json"
    train.write_text(open(os.path.join(sample, "train-v1.1.json"), encoding="utf-8").read(),
                     encoding="utf-8")
    data = json.load(open(os.path.join(sample, "dev-v1.1.json"), encoding="utf-8"))
    paragraph = data["data"][0]["paragraphs"][0]
    paragraph["qas"] = paragraph["qas"][:dev_questions]
    data["data"] = [{"title": data["data"][0]["title"], "paragraphs": [paragraph]}]
    dev.write_text(json.dumps(data), encoding="utf-8")
    return train, dev, [qa["id"] for qa in paragraph["qas"]]


SQUAD_TINY = dict(max_train_examples=8, max_seq_length=48, max_query_length=16, doc_stride=16)


def test_squad_reads_train_file_and_predict_file(tmp_path):
    """README: python -m kerasbert.main --task=squad_v1 --train_file=train-v1.1.json
    --predict_file=dev-v1.1.json"""
    train, dev, ids = _squad_files(tmp_path)
    metrics, out = _run(tmp_path, "squad_v1", train_file=str(train), predict_file=str(dev),
                        **SQUAD_TINY)
    assert {"exact_match", "f1"} <= set(metrics)
    assert sorted(json.loads((out / "predictions.json").read_text())) == sorted(ids)


@pytest.mark.large
def test_cli_squad_train_file_and_predict_file(tmp_path):
    train, dev, ids = _squad_files(tmp_path)
    out = tmp_path / "cli"
    result = _cli("--task=squad_v1", f"--train_file={train}", f"--predict_file={dev}",
                  "--init_checkpoint=random", "--model_size=2/32/2", "--num_train_epochs=1",
                  *[f"--{k}={v}" for k, v in SQUAD_TINY.items()], f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "squad_v1 dev metrics: exact_match=" in result.stdout
    assert sorted(json.loads((out / "predictions.json").read_text())) == sorted(ids)


def test_squad_query_length_must_leave_room_for_the_passage(tmp_path):
    with pytest.raises(InputError, match="--max_seq_length=40: must exceed --max_query_length"):
        _run(tmp_path, "squad_v1", max_seq_length=40, max_query_length=40)


def test_export_after_training(tmp_path):
    _, out = _run(tmp_path, "sst2", max_train_examples=8, export_dir=str(tmp_path / "serving"))
    assert os.listdir(tmp_path / "serving") == ["1"]
    assert os.path.exists(tmp_path / "serving" / "1" / "saved_model.pb")
    # --export_dir=... without --do_train: refused before anything is written.
    with pytest.raises(InputError, match="--export_dir"):
        _run(tmp_path, "sst2", name="no_train", do_train=False,
             export_dir=str(tmp_path / "serving2"))
    assert not (tmp_path / "no_train").exists() and not (tmp_path / "serving2").exists()
    # A run killed after its export was renamed into place but before export.json was written
    # finds that version again (same run, same weights) instead of adding a second one.
    from kerasbert import plugins

    config = RunConfig(**{**json.loads((out / "run_config.json").read_text()),
                          "export_dir": str(tmp_path / "serving")})
    os.remove(out / "export.json")
    run_lib.export_once(config, plugins.registry())
    assert os.listdir(tmp_path / "serving") == ["1"]
    assert json.loads((out / "export.json").read_text())["path"] == str(tmp_path / "serving" / "1")
    metadata = json.loads((tmp_path / "serving" / "1" / "assets.extra" / "kerasbert.json")
                          .read_text())
    assert metadata["run_dir"] == str(out) and len(metadata["weights_sha256"]) == 64


def test_regression_task_reports_pearson_and_spearman(tmp_path):
    metrics, out = _run(tmp_path, "stsb", max_train_examples=16, do_predict=True)
    assert {"pearson", "spearman"} <= set(metrics)
    scores = [float(r[1]) for r in list(csv.reader(open(out / "test_results.tsv"),
                                                    delimiter="\t"))[1:]]
    assert scores and all(0.0 <= s <= 5.0 for s in scores)


def test_mnli_reports_matched_and_mismatched(tmp_path):
    metrics, _ = _run(tmp_path, "mnli", max_train_examples=8, max_eval_examples=8)
    assert set(metrics) == {"accuracy", "mismatched_accuracy"}


def test_training_lowers_the_loss_and_is_deterministic(tmp_path):
    kwargs = dict(max_train_examples=64, num_train_epochs=3.0, learning_rate=1e-3,
                  do_eval=False)
    _, out_a = _run(tmp_path, "sst2", name="a", **kwargs)
    _, out_b = _run(tmp_path, "sst2", name="b", **kwargs)
    loss_a = [float(r["train_loss"]) for r in csv.DictReader(open(out_a / "history.csv"))]
    loss_b = [float(r["train_loss"]) for r in csv.DictReader(open(out_b / "history.csv"))]
    assert loss_a[-1] < loss_a[0]
    np.testing.assert_allclose(loss_a, loss_b, rtol=1e-5)


def test_continues_from_an_earlier_run(tmp_path, capsys):
    _run(tmp_path, "sst2", name="first", max_train_examples=16)
    capsys.readouterr()
    _run(tmp_path, "sst2", name="second", max_train_examples=16,
         init_checkpoint=str(tmp_path / "first"))
    assert "encoder kerasbert_run" in capsys.readouterr().out


def test_finished_run_is_not_overwritten_silently(tmp_path):
    _run(tmp_path, "sst2", max_train_examples=8, do_eval=False)
    with pytest.raises(InputError, match="holds a finished run"):
        _run(tmp_path, "sst2", max_train_examples=8, do_eval=False)
    _run(tmp_path, "sst2", max_train_examples=8, do_eval=False, overwrite_output_dir=True)


def test_bad_input_fails_before_the_output_dir_is_created(tmp_path):
    bad = tmp_path / "data"
    bad.mkdir()
    (bad / "train.tsv").write_text("sentence\tlabel\na fine film\t1\nbad row\n")
    with pytest.raises(InputError, match=r"train\.tsv:3:"):
        _run(tmp_path, "sst2", data_dir=str(bad))
    with pytest.raises(InputError, match="--max_seq_length=600: the encoder has only 512"):
        _run(tmp_path, "sst2", max_seq_length=600)
    with pytest.raises(InputError, match="--head=nope: unknown head"):
        _run(tmp_path, "sst2", head="nope")
    assert not (tmp_path / "run").exists()


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kerasbert.main", *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})


def test_cli_errors_are_one_line_and_nonzero(tmp_path):
    result = _cli("--task=nope", f"--output_dir={tmp_path / 'x'}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("kerasbert: error: --task=nope")
    assert "Traceback" not in result.stderr
    result = _cli("--task=sst2", "--train_batch_size=0", f"--output_dir={tmp_path / 'x'}")
    assert result.returncode == 2 and "--train_batch_size=0" in result.stderr
    result = _cli("--task=sst2", "--no_such_flag=1")
    assert result.returncode == 2 and "no_such_flag" in result.stderr
    assert not (tmp_path / "x").exists()


def test_cli_lists_tasks_and_heads():
    result = _cli("--list_tasks")
    assert result.returncode == 0
    names = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"} <= names
    result = _cli("--list_heads")
    assert result.returncode == 0 and "cls_linear" in result.stdout


@pytest.mark.large
def test_cli_full_run_on_a_tiny_model(tmp_path):
    out = tmp_path / "cli"
    result = _cli("--task=rte", "--init_checkpoint=random", "--model_size=2/32/2",
                  "--max_seq_length=32", "--num_train_epochs=1", "--max_train_examples=16",
                  f"--output_dir={out}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "rte dev metrics: accuracy=" in result.stdout
    assert json.loads((out / "metrics.json").read_text())["accuracy"] >= 0.0


def test_a_run_stopped_after_an_epoch_resumes_and_ends_the_same(tmp_path, monkeypatch):
    from kerasbert.training import run_state

    kwargs = dict(max_train_examples=32, num_train_epochs=2.0, learning_rate=1e-3)
    reference, straight = _run(tmp_path, "sst2", name="straight", **kwargs)

    original_save = run_state.RunState.save

    def save_then_die(self, *args):
        original_save(self, *args)
        raise KeyboardInterrupt  # as if killed right after the first epoch's checkpoint

    monkeypatch.setattr(run_state.RunState, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, "sst2", name="resumed", **kwargs)
    monkeypatch.setattr(run_state.RunState, "save", original_save)
    assert not (tmp_path / "resumed" / "metrics.json").exists()
    resumed, out = _run(tmp_path, "sst2", name="resumed", **kwargs)
    rows = list(csv.DictReader(open(out / "history.csv")))
    reference_rows = list(csv.DictReader(open(straight / "history.csv")))
    assert [r["epoch"] for r in rows] == ["1", "2"]
    # Same step, learning-rate position, data order and weights: the second epoch's
    # training loss (which depends on all of them) and the final metrics match.
    for key in ("step", "learning_rate"):
        assert rows[1][key] == reference_rows[1][key]
    assert float(rows[1]["train_loss"]) == pytest.approx(float(reference_rows[1]["train_loss"]),
                                                         abs=1e-5)
    assert resumed == pytest.approx(reference, abs=1e-6)

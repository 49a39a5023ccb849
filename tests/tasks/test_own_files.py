"""The generic tasks on a user's own files (kerasbert/tasks/own_files/): labels taken from
the training file and kept in the run, every bad input one line naming the file (and line)
before the encoder loads, and a CSV with string labels and a JSON Lines NER file trained,
evaluated, predicted, exported and served (run.execute and the CLI)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from tools.samples import make_own_files_samples

TINY = dict(init_checkpoint="random", model_size="1/16/1", dropout=0.0, max_seq_length=32,
            train_batch_size=8, eval_batch_size=16, num_train_epochs=1.0, seed=1)


def _write(folder, name, text, mode="w"):
    path = folder / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(path)


def _resolve(tmp_path, task="text_classification", **flags):
    """The run's task and config as the run's first stage makes them (files read, checked)."""
    config = RunConfig(task=task, output_dir=str(tmp_path / "run"), **flags)
    task, config, _ = run_lib.resolve(config, plugins.registry())
    return task, config


def _error(tmp_path, **flags):
    with pytest.raises(InputError) as error:
        _resolve(tmp_path, **flags)
    message = str(error.value)
    assert "\n" not in message
    return message


SENTIMENT = """
    text,label
    a great film,positive
    dull and far too long,negative
    "warm, funny and wise",positive
    """


# ---- labels ---------------------------------------------------------------------------------

def test_the_label_set_is_the_training_files_sorted_and_label_list_fixes_it(tmp_path):
    train = _write(tmp_path, "train.csv", SENTIMENT)
    task, config = _resolve(tmp_path, train_file=train, validation_file=train)
    assert task.label_list == ("negative", "positive")
    assert config.label_list == "negative,positive"  # what run_config.json keeps
    examples = task.read_file(train, "train")
    assert [e.text_a for e in examples][2] == "warm, funny and wise"  # a quoted comma
    task, config = _resolve(tmp_path, train_file=train, validation_file=train,
                            label_list=["positive", "negative", "neutral"])
    assert task.label_list == ("positive", "negative", "neutral")
    numbers = _write(tmp_path, "n.jsonl", '{"text": "a", "label": 10}\n{"text": "b", "label": 2}\n')
    task, _ = _resolve(tmp_path, train_file=numbers, validation_file=numbers)
    assert task.label_list == ("2", "10")  # integers sort as numbers


def test_a_label_with_a_comma_is_refused(tmp_path):
    train = _write(tmp_path, "train.csv", 'text,label\na,"good, really"\n')
    assert _error(tmp_path, train_file=train).startswith(
        f"{train}:2: label 'good, really' has a comma")


def test_a_label_outside_the_label_list_is_refused(tmp_path):
    train = _write(tmp_path, "train.csv", SENTIMENT)
    message = _error(tmp_path, train_file=train, validation_file=train, label_list="positive,x")
    assert message.startswith(f"{train}:3: label 'negative' is not among --label_list")


def test_a_validation_label_absent_from_training(tmp_path):
    train = _write(tmp_path, "train.csv", SENTIMENT)
    dev = _write(tmp_path, "dev.csv", "text,label\nfine,positive\nso-so,neutral\n")
    message = _error(tmp_path, train_file=train, validation_file=dev)
    assert message.startswith(f"{dev}:3: label 'neutral' is not among the training file")
    assert "negative, positive" in message


# ---- bad files: one line naming the file (and line) -------------------------------------------

def test_a_ragged_row(tmp_path):
    train = _write(tmp_path, "train.csv", "text,label\nfine,positive\ntoo,many,fields\n")
    assert _error(tmp_path, train_file=train) == (
        f"{train}:3: 3 fields, but the header has 2 (text, label)")


def test_a_missing_column_names_the_columns_present(tmp_path):
    train = _write(tmp_path, "train.csv", "review,stars\nfine,5\n")
    message = _error(tmp_path, train_file=train)
    assert message.startswith(f"{train}: no column 'text'") and "'review', 'stars'" in message
    message = _error(tmp_path, train_file=train, text_column="review")
    assert message.startswith(f"{train}: no column 'label'") and "'review', 'stars'" in message
    task, _ = _resolve(tmp_path, train_file=train, validation_file=train,
                       text_column="review", label_column="stars")
    assert task.label_list == ("5",)


def test_an_empty_file_and_a_header_only(tmp_path):
    empty = _write(tmp_path, "train.csv", "")
    assert _error(tmp_path, train_file=empty).startswith(f"{empty}: empty file")
    header = _write(tmp_path, "h.csv", "text,label\n")
    assert _error(tmp_path, train_file=header).startswith(f"{header}: no examples")


def test_an_undecodable_byte_names_its_line(tmp_path):
    train = _write(tmp_path, "train.csv", b"text,label\nfine,positive\nbad \xff byte,negative\n",
                   mode="wb")
    assert _error(tmp_path, train_file=train).startswith(f"{train}:3: not valid UTF-8 (byte 0xff)")


def test_mixed_label_types(tmp_path):
    train = _write(tmp_path, "train.jsonl", '{"text": "a", "label": 1}\n'
                   '{"text": "b", "label": "positive"}\n')
    assert _error(tmp_path, train_file=train).startswith(
        f"{train}:2: label 'positive' is a string, but line 1's label 1 is a number")
    scores = _write(tmp_path, "scores.csv", "text,label\na,0.5\nb,high\n")
    assert _error(tmp_path, task="text_regression", train_file=scores).startswith(
        f"{scores}:3: label 'high' is not a number")


def test_a_tsv_without_tabs(tmp_path):
    train = _write(tmp_path, "train.tsv", "text,label\nfine,positive\n")
    message = _error(tmp_path, train_file=train)
    assert message.startswith(f"{train}:1: no tab in the header") and "tabs" in message


def test_an_unknown_extension(tmp_path):
    train = _write(tmp_path, "train.xlsx", "text,label\n")
    assert ".csv, .tsv, .jsonl" in _error(tmp_path, train_file=train)


def test_the_cli_says_one_line_exits_2_and_writes_nothing(tmp_path):
    train = _write(tmp_path, "train.csv", SENTIMENT)
    dev = _write(tmp_path, "dev.csv", "text,label\nso-so,neutral\n")
    out = tmp_path / "runs" / "mine"
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=text_classification",
         f"--train_file={train}", f"--validation_file={dev}", f"--output_dir={out}"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kerasbert: error: {dev}:2: label 'neutral'"), result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists() and not out.parent.exists()


# ---- token classification ---------------------------------------------------------------------

def test_token_files_read_any_tag_set(tmp_path):
    jsonl = _write(tmp_path, "train.jsonl", """
        {"tokens": ["Aspirin", "helps"], "tags": ["B-DRUG", "O"]}
        {"tokens": ["take", "ibuprofen", "daily"], "tags": ["O", "B-DRUG", "O"]}
        """)
    task, config = _resolve(tmp_path, task="token_classification", train_file=jsonl,
                            validation_file=jsonl)
    assert task.label_list == ("B-DRUG", "O") and config.label_list == "B-DRUG,O"
    columns = _write(tmp_path, "train.txt", """
        Aspirin NN B-DRUG x
        helps VB O x

        take VB O x
        """)
    task, _ = _resolve(tmp_path, task="token_classification", train_file=columns,
                       validation_file=columns, label_column_index=2)
    assert [s.label for s in task.read_file(columns, "train")] == [("B-DRUG", "O"), ("O",)]
    test = _write(tmp_path, "test.jsonl", '{"tokens": ["no", "tags", "here"]}\n')
    assert task.read_file(test, "test")[0].label is None  # a test file may leave tags out
    ragged = _write(tmp_path, "bad.jsonl", '{"tokens": ["a", "b"], "tags": ["O"]}\n')
    assert _error(tmp_path, task="token_classification", train_file=ragged).startswith(
        f"{ragged}:1: `tags` must be an array with one tag per token")
    dev = _write(tmp_path, "dev.jsonl", '{"tokens": ["x"], "tags": ["B-GENE"]}\n')
    assert _error(tmp_path, task="token_classification", train_file=jsonl,
                  validation_file=dev).startswith(f"{dev}:1: label 'B-GENE' is not among")


def test_the_bundled_samples_are_the_generators_output():
    from kerasbert.tasks.base import SAMPLES_DIR

    for name, text in make_own_files_samples.samples().items():
        with open(os.path.join(SAMPLES_DIR, name), encoding="utf-8", newline="") as f:
            assert f.read() == text, name


# ---- end to end ---------------------------------------------------------------------------------

def _execute(tmp_path, uncased_vocab, **flags):
    config = RunConfig(**{**TINY, "vocab_file": uncased_vocab,
                          "output_dir": str(tmp_path / "run"), **flags})
    return run_lib.execute(config)


def _predictions(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


def test_a_csv_with_string_labels_trains_evaluates_and_predicts(tmp_path, uncased_vocab):
    from kerasbert.tasks.base import bundled_sample

    sample = bundled_sample("text_classification")
    metrics = _execute(tmp_path, uncased_vocab, task="text_classification",
                       train_file=os.path.join(sample, "train.csv"),
                       validation_file=os.path.join(sample, "dev.csv"),
                       test_file=os.path.join(sample, "test.csv"), do_predict=True)
    assert 0 <= metrics["accuracy"] <= 1 and "macro_f1" in metrics
    rows = _predictions(tmp_path / "run" / "test_results.tsv")
    assert rows[0] == ["index", "prediction"] and len(rows) == 1 + 16
    assert {label for _, label in rows[1:]} <= {"negative", "positive"}
    saved = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert saved["label_list"] == "negative,positive"


SERVE = textwrap.dedent(r"""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    path, inputs = sys.argv[1], json.loads(sys.argv[2])
    serve = tf.saved_model.load(path).signatures["serving_default"]
    outputs = serve(**{k: tf.constant(v) for k, v in inputs.items()})
    print(json.dumps({k: v.numpy().tolist() for k, v in outputs.items()},
                     default=lambda b: b.decode()))
""")


def _serve(export_dir, inputs):
    versions = sorted(os.listdir(export_dir))
    result = subprocess.run([sys.executable, "-c", SERVE, os.path.join(export_dir, versions[-1]),
                             json.dumps(inputs)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.large
def test_text_classification_exports_reloads_and_serves_label_names(tmp_path, uncased_vocab):
    from kerasbert.export.checkpoint import export_checkpoint
    from kerasbert.export.saved_model import load_run

    train = _write(tmp_path, "train.csv", SENTIMENT)
    _execute(tmp_path, uncased_vocab, task="text_classification", train_file=train,
             validation_file=train, label_list="positive,negative,neutral",
             export_dir=str(tmp_path / "export"))
    os.remove(train)  # a finished run is rebuilt from its own folder
    assert load_run(str(tmp_path / "run")).task.label_list == ("positive", "negative", "neutral")
    export_checkpoint(str(tmp_path / "run"), str(tmp_path / "hf"), "huggingface")
    hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf_config["id2label"] == {"0": "positive", "1": "negative", "2": "neutral"}
    served = _serve(tmp_path / "export", {"text_a": ["a great film", "dull"]})
    assert len(served["label"]) == 2
    assert set(served["label"]) <= {"positive", "negative", "neutral"}
    assert len(served["probabilities"][0]) == 3


@pytest.mark.large
def test_a_jsonl_ner_file_trains_predicts_exports_and_serves(tmp_path, uncased_vocab):
    from kerasbert.tasks.base import bundled_sample

    sample = bundled_sample("token_classification")
    metrics = _execute(tmp_path, uncased_vocab, task="token_classification",
                       train_file=os.path.join(sample, "train.jsonl"),
                       validation_file=os.path.join(sample, "dev.jsonl"),
                       test_file=os.path.join(sample, "test.jsonl"), do_predict=True,
                       max_train_examples=32, export_dir=str(tmp_path / "export"))
    assert "f1" in metrics and "test_f1" not in metrics  # the test file has no tags
    predicted = (tmp_path / "run" / "test_predictions.txt").read_text().split("\n\n")[0]
    tags = {line.split()[-1] for line in predicted.splitlines()}
    assert tags <= set(json.loads((tmp_path / "run" / "run_config.json").read_text())
                       ["label_list"].split(","))
    served = _serve(tmp_path / "export", {"text": ["John lives in Berlin"]})
    assert len(served["tags"][0]) >= 4


@pytest.mark.large
def test_the_readme_command_on_a_csv(tmp_path, uncased_vocab):
    """kerasbert --task=text_classification --train_file=train.csv --validation_file=dev.csv
    --test_file=test.csv --do_predict --export_dir=... --output_dir=runs/mine"""
    from kerasbert.tasks.base import bundled_sample

    sample = bundled_sample("text_classification")
    out = tmp_path / "runs" / "mine"
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=text_classification",
         f"--train_file={sample}/train.csv", f"--validation_file={sample}/dev.csv",
         f"--test_file={sample}/test.csv", "--do_predict", f"--export_dir={tmp_path}/export",
         f"--output_dir={out}", f"--vocab_file={uncased_vocab}",
         *[f"--{k}={v}" for k, v in TINY.items()]],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert "accuracy" in metrics
    rows = _predictions(out / "test_results.tsv")
    assert {label for _, label in rows[1:]} <= {"negative", "positive"}
    served = _serve(tmp_path / "export", {"text_a": ["a great film"]})
    assert served["label"][0] in ("negative", "positive")


def test_other_heads_phases_and_the_landscape_work_on_own_files(tmp_path, uncased_vocab):
    """A frozen phase, another head and a trajectory on a CSV with its own labels; the
    landscape rebuilds the run from its folder and reads the run's own files (not the
    bundled sample, whose labels are not these)."""
    from kerasbert.landscape import run as landscape_run

    rows = "".join(f"{'good' if i % 2 else 'bad'} film number {i},{'yes' if i % 2 else 'no'}\n"
                   for i in range(24))
    train = _write(tmp_path, "train.csv", "text,label\n" + rows)
    metrics = _execute(tmp_path, uncased_vocab, task="text_classification", train_file=train,
                       validation_file=train, head="mean_pool", frozen_epochs=1.0,
                       save_trajectory_every=2)
    assert 0 <= metrics["accuracy"] <= 1
    loaded = landscape_run.load(str(tmp_path / "run"), train_sample=8, dev_sample=8)
    assert loaded.task.label_list == ("no", "yes")
    assert len(loaded.samples["train"].labels) == 8
    assert set(loaded.samples["dev"].labels.tolist()) <= {0, 1}
    assert all("film number" in e.text_a for e in loaded.samples["train"].examples)


def test_a_sweep_on_own_files_keeps_the_label_list_in_every_run(tmp_path, uncased_vocab):
    from kerasbert import sweep

    train = _write(tmp_path, "train.csv", SENTIMENT)
    base = RunConfig(**{**TINY, "vocab_file": uncased_vocab, "task": "text_classification",
                        "output_dir": str(tmp_path / "sweep"), "train_file": train,
                        "validation_file": train})
    summary = sweep.run_sweep(base, "1e-3,2e-3", 1, log=lambda _: None)
    assert summary["best"] in ("lr0.001-r0", "lr0.002-r0")
    for name in ("lr0.001-r0", "lr0.002-r0"):
        saved = json.loads((tmp_path / "sweep" / "runs" / name / "run_config.json").read_text())
        assert saved["label_list"] == "negative,positive"


def test_pairs_tsv_and_regression_read_as_written(tmp_path):
    pairs = _write(tmp_path, "train.tsv", 'premise\thypothesis\tlabel\n'
                   'He said "hi\tHe spoke\tentailment\nIt rains\tIt is dry\tcontradiction\n')
    task, _ = _resolve(tmp_path, train_file=pairs, validation_file=pairs,
                       text_column="premise", text_pair_column="hypothesis")
    first = task.read_file(pairs, "train")[0]
    assert (first.text_a, first.text_b) == ('He said "hi', "He spoke")  # quotes kept, as GLUE
    assert task.is_sentence_pair() and task.label_list == ("contradiction", "entailment")
    scores = _write(tmp_path, "scores.jsonl", '{"sentence": "a", "label": 4.5}\n'
                    '{"sentence": "b", "label": 1}\n')
    task, config = _resolve(tmp_path, task="text_regression", train_file=scores,
                            validation_file=scores)
    assert [e.label for e in task.read_file(scores, "train")] == [4.5, 1.0]
    assert task.label_list is None and config.label_list is None

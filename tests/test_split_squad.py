"""tools/split_squad.py: whole articles to each side, files kerasbert's SQuAD task reads,
one line and nothing written for bad input."""

import json
import os

import pytest

from kerasbert import plugins
from tools import split_squad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "kerasbert", "data", "samples", "squad", "train-v1.1.json")


def read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def question_ids(dataset):
    return [q["id"] for a in dataset["data"] for p in a["paragraphs"] for q in p["qas"]]


def test_split_keeps_whole_articles_and_every_question_once(tmp_path, capsys):
    original = read(SAMPLE)
    assert split_squad.main([f"--input={SAMPLE}", "--train_articles=3",
                             f"--output_dir={tmp_path}"]) == 0
    train = read(tmp_path / "train-v1.1.json")
    dev = read(tmp_path / "dev-v1.1.json")
    assert [a["title"] for a in train["data"]] == [a["title"] for a in original["data"][:3]]
    assert [a["title"] for a in dev["data"]] == [a["title"] for a in original["data"][3:]]
    assert question_ids(train) + question_ids(dev) == question_ids(original)
    assert train["version"] == dev["version"] == original["version"]
    out = capsys.readouterr().out
    assert f"3 articles, {len(question_ids(train))} questions" in out
    assert f"1 articles, {len(question_ids(dev))} questions" in out

    task = plugins.registry().task("squad_v1")  # the files are what --data_dir reads
    assert len(task.read_examples(str(tmp_path), "train")) == len(question_ids(train))
    assert len(task.read_examples(str(tmp_path), "dev")) == len(question_ids(dev))


@pytest.mark.parametrize("articles", ["0", "4", "-1"])
def test_a_side_without_articles_is_refused(tmp_path, capsys, articles):
    out = tmp_path / "out"
    assert split_squad.main([f"--input={SAMPLE}", f"--train_articles={articles}",
                             f"--output_dir={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--train_articles={articles}" in err
    assert "4 articles" in err
    assert not out.exists()


def test_a_file_that_is_not_squad_is_named_with_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "1.1",\n "data": [}\n')
    assert split_squad.main([f"--input={bad}", "--train_articles=1",
                             f"--output_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{bad}:2:" in err and err.count("\n") == 0
    assert not (tmp_path / "out").exists()

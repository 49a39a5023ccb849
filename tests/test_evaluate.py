"""`python -m kerasbert.evaluate`: official-script arguments and output, clean errors."""

import json
import os
import subprocess
import sys

import pytest

from kerasbert import evaluate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def squad_file(folder, name, questions, version="1.1"):
    """questions: [(id, [answer texts])]; one paragraph holding every answer."""
    context = "Denver Broncos won in 1887 with a blue cat."
    qas = [{"id": qid, "question": "?", "answers": [
        {"text": t, "answer_start": max(context.find(t), 0)} for t in answers]}
        for qid, answers in questions]
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": [
            {"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}, f)
    return path


def json_file(folder, name, obj):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    return path


def cli(*args):
    return subprocess.run([sys.executable, "-m", "kerasbert.evaluate", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=60)


V1 = [("q1", ["Denver Broncos", "The Denver Broncos"]), ("q2", ["1887"]), ("q3", ["blue cat"])]


def test_squad_v1_prints_official_json(tmp_path):
    data = squad_file(tmp_path, "dev-v1.1.json", V1)
    preds = json_file(tmp_path, "predictions.json", {"q1": "the Denver Broncos!", "q2": "in 1887"})
    result = cli("squad_v1", data, preds)
    assert result.returncode == 0, result.stderr
    # q1 right; q2 F1 2/3 (P 1/2, R 1); q3 unanswered: 0 and named on stderr.
    out = json.loads(result.stdout)
    assert list(out) == ["exact_match", "f1"]
    assert out == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (5 / 3) / 3})
    assert result.stdout.count("\n") == 1  # one line, as evaluate-v1.1.py prints
    assert "Unanswered question q3 will receive score 0." in result.stderr


def test_squad_v1_warns_about_the_version(tmp_path):
    data = squad_file(tmp_path, "dev.json", V1, version="v2.0")
    preds = json_file(tmp_path, "p.json", {"q1": "x", "q2": "x", "q3": "x"})
    result = cli("squad_v1", data, preds)
    assert result.returncode == 0
    assert "Evaluation expects v-1.1, but got dataset with v-v2.0" in result.stderr


def test_squad_v2_with_na_probs_and_out_file(tmp_path):
    data = squad_file(tmp_path, "dev-v2.0.json", [("a", ["Denver Broncos"]), ("b", []), ("c", [])],
                      version="v2.0")
    preds = json_file(tmp_path, "predictions.json", {"a": "Denver Broncos", "b": "cat", "c": ""})
    odds = json_file(tmp_path, "null_odds.json", {"a": -3.0, "b": 2.0, "c": 0.5})
    result = cli("squad_v2", data, preds, "--na-prob-file", odds)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    # b's odds 2.0 > 1.0 (default --na-prob-thresh): scored as "" -> right. All three right.
    # Best: start 2 (b, c), a(-3.0) +1 -> 3 (best, thresh -3.0), c(0.5) 0, b(2.0) -1.
    assert out == pytest.approx({
        "exact": 100.0, "f1": 100.0, "total": 3,
        "HasAns_exact": 100.0, "HasAns_f1": 100.0, "HasAns_total": 1,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 2,
        "best_exact": 100.0, "best_exact_thresh": -3.0, "best_f1": 100.0, "best_f1_thresh": -3.0})
    assert list(out) == list(evaluate.squad_metrics.evaluate_v2(
        {"a": ["x"], "b": []}, {"a": "x", "b": ""}, {"a": 0, "b": 0}))

    # --na-prob-thresh 5: nothing is overridden, b's "cat" is wrong: 2/3.
    result = cli("squad_v2", data, preds, "-n", odds, "-t", "5", "-o", tmp_path / "eval.json")
    assert result.returncode == 0 and result.stdout == ""
    with open(tmp_path / "eval.json") as f:
        assert json.load(f)["exact"] == pytest.approx(200 / 3)


@pytest.mark.parametrize("case", ["bad_json", "missing", "not_squad", "pred_not_object",
                                  "pred_not_string", "na_missing_id"])
def test_bad_files_exit_2_with_one_line(tmp_path, case):
    data = squad_file(tmp_path, "dev.json", [("a", ["cat"]), ("b", [])], version="v2.0")
    preds = json_file(tmp_path, "p.json", {"a": "cat", "b": ""})
    odds = json_file(tmp_path, "o.json", {"a": 0.0, "b": 0.0})
    named = {"bad_json": data, "missing": preds, "not_squad": data, "pred_not_object": preds,
             "pred_not_string": preds, "na_missing_id": odds}[case]
    if case == "bad_json":
        with open(data, "w") as f:
            f.write('{"version": "v2.0",\n "data": [}\n')
    elif case == "missing":
        os.remove(preds)
    elif case == "not_squad":
        json_file(tmp_path, "dev.json", {"data": [{"title": "no paragraphs"}]})
    elif case == "pred_not_object":
        json_file(tmp_path, "p.json", ["cat"])
    elif case == "pred_not_string":
        json_file(tmp_path, "p.json", {"a": 3, "b": ""})
    else:
        json_file(tmp_path, "o.json", {"a": 0.0})
    result = cli("squad_v2", data, preds, "--na-prob-file", odds)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert str(named) in result.stderr
    if case == "bad_json":
        assert f"{data}:2:" in result.stderr  # the line json reports


def test_unknown_subcommand_is_a_usage_error():
    result = cli("squad_v3", "a", "b")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_a_subcommand_is_one_function_and_one_line(monkeypatch, capsys):
    from absl import flags

    def echo(flag_values):
        """Echo a word."""
        flags.DEFINE_integer("times", 1, "How often.", short_name="x", flag_values=flag_values)
        return lambda word: print(json.dumps({"word": word, "times": flag_values.times}))

    monkeypatch.setattr(evaluate, "COMMANDS", evaluate.COMMANDS + [echo])
    assert evaluate.main(["echo", "hi"]) == 0
    assert json.loads(capsys.readouterr().out) == {"word": "hi", "times": 1}
    assert evaluate.main(["echo", "hi", "-x", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == {"word": "hi", "times": 3}
    assert evaluate.main(["echo", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: python -m kerasbert.evaluate echo word [options]" in out and "--times" in out
    assert evaluate.main(["echo"]) == 2  # a missing argument: one line
    assert capsys.readouterr().err == ("kerasbert: error: echo: expected 1 argument(s), word; "
                                       "got 0\n")


def test_conll2003_scorer_prints_the_metrics(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "pred.txt"
    # gold: PER "John Smith", LOC "Paris"; predicted: PER "John Smith" right, "Paris" as ORG
    # → 1 of 2 predicted entities right, 1 of 2 gold found: P = R = F1 = 0.5
    path.write_text("John B-PER B-PER\nSmith I-PER I-PER\nvisited O O\nParis B-LOC B-ORG\n\n")
    result = subprocess.run([sys.executable, "-m", "kerasbert.evaluate", "conll2003", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert (metrics["precision"], metrics["recall"], metrics["f1"]) == (0.5, 0.5, 0.5)
    assert metrics["PER_f1"] == 1.0 and metrics["LOC_recall"] == 0.0

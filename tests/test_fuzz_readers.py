"""Property-based tests of every reader and feature builder on random and adversarial input
(control characters, very long words, mixed scripts, empty fields, broken structure, bytes
that are not UTF-8): each either gives valid features or raises the project's InputError,
never anything else. Bounded example counts keep the suite to seconds."""

import copy
import json
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.tasks import conll, glue, squad, swag

SAMPLES = os.path.join(os.path.dirname(glue.__file__), "..", "data", "samples")
MAX_SEQ_LENGTH = 24
FUZZ = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# Characters that break readers in practice: separators, quotes, line ends of every
# kind, control and format characters, combining marks, wide and right-to-left scripts.
NASTY = ("\t,\"' \r\n\x00\x01\x0b\x0c\x1c\x7f\x85\u00a0\u00ad\u200b\u200d\u2028\u2029\ufeff"
         "\ufffd\u0301\u0308ΣΟΔé中文日本ひらがな한국어مرحباשלום👍🏽\U00020000-.#[]{}")
WORDS = ["the", "a", "[CLS]", "[SEP]", "##ing", "x" * 150, "é" * 120, "B-PER", "I-LOC", "O",
         "-DOCSTART-", "0", "1", "5.0", "nan", "entailment", ""]
FIELD = st.lists(st.one_of(st.sampled_from(list(NASTY)), st.sampled_from(WORDS),
                           st.characters(exclude_categories=("Cs",))), max_size=12).map("".join)


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return WordPieceTokenizer(uncased_vocab, do_lower_case=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz"))


def _write(folder, data, name):
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def _check_features(features, vocab_size, choices=False):
    inputs = features.inputs
    ids, segments, mask = inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
    assert ids.shape == segments.shape == mask.shape and ids.shape[-1] <= MAX_SEQ_LENGTH
    assert len(ids) == (len(features.labels) if features.labels is not None else len(ids))
    assert ids.min(initial=0) >= 0 and ids.max(initial=0) < vocab_size
    assert set(np.unique(mask)) <= {0, 1} and set(np.unique(segments)) <= {0, 1}
    flat = mask.reshape(-1, mask.shape[-1])
    lengths = flat.sum(axis=-1)
    assert (lengths >= 2).all()  # at least [CLS] ... [SEP]
    assert all(row[:n].all() and not row[n:].any() for row, n in zip(flat, lengths))


def _read_and_featurize(read, task, tokenizer, **check):
    """The property: InputError, or examples whose features are valid."""
    try:
        examples = read()
    except InputError as e:
        assert str(e) and "\n" not in str(e).strip()
        event("reader: InputError")
        return
    try:
        features = task.featurize(examples, tokenizer, MAX_SEQ_LENGTH)
    except InputError:
        event("featurize: InputError")
        return
    _check_features(features, tokenizer.vocab_size, **check)
    event("valid features")


def _mutate(data, seed):
    """Cuts, splices random bytes into, or deletes a span of a valid file."""
    rng = random.Random(seed)
    i, j = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    kind = rng.randrange(3)
    if kind == 0:
        return data[:i]
    if kind == 1:
        return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))) + data[i:]
    return data[:i] + data[j:]


def _sample(*parts):
    with open(os.path.join(SAMPLES, *parts), "rb") as f:
        return f.read()


# ---- GLUE TSV ------------------------------------------------------------------------------

@FUZZ
@given(rows=st.lists(st.tuples(FIELD, FIELD, st.sampled_from(["0", "1", "0", "1", "", "2", " 1"])),
                     max_size=5), task_name=st.sampled_from(["sst2", "mrpc", "cola"]))
def test_glue_structured(tokenizer, scratch, rows, task_name):
    task = glue.TASKS[task_name]
    header = {"sst2": "sentence\tlabel", "mrpc": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
              "cola": None}[task_name]
    lines = [header] if header else []
    for a, b, label in rows:
        lines.append({"sst2": f"{a}\t{label}", "mrpc": f"{label}\t1\t2\t{a}\t{b}",
                      "cola": f"src\t{label}\t\t{a}"}[task_name])
    path = _write(scratch, "\n".join(lines), "train.tsv")
    _read_and_featurize(lambda: task.read_file(path, "train"), task, tokenizer)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1), task_name=st.sampled_from(["sst2", "mrpc", "stsb"]))
def test_glue_mutated(tokenizer, scratch, seed, task_name):
    task = glue.TASKS[task_name]
    path = _write(scratch, _mutate(_sample("glue", task.folder, "dev.tsv"), seed), "dev.tsv")
    _read_and_featurize(lambda: task.read_file(path, "dev"), task, tokenizer)


# ---- SWAG CSV ------------------------------------------------------------------------------

@FUZZ
@given(rows=st.lists(st.tuples(st.lists(FIELD, min_size=6, max_size=6),
                               st.sampled_from(["0", "3", "", "x"])), max_size=4),
       quote=st.booleans())
def test_swag_structured(tokenizer, scratch, rows, quote):
    def cell(text):
        return '"' + text.replace('"', '""') + '"' if quote else text

    lines = ["sent1,sent2,ending0,ending1,ending2,ending3,label"]
    lines += [",".join(cell(f) for f in fields) + "," + label for fields, label in rows]
    path = _write(scratch, "\n".join(lines), "val.csv")
    task = swag.SwagTask()
    _read_and_featurize(lambda: task.read_file(path, "val"), task, tokenizer)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_swag_mutated(tokenizer, scratch, seed):
    path = _write(scratch, _mutate(_sample("swag", "val.csv"), seed), "val.csv")
    task = swag.SwagTask()
    _read_and_featurize(lambda: task.read_file(path, "val"), task, tokenizer)


# ---- SQuAD JSON ----------------------------------------------------------------------------

@FUZZ
@given(context=FIELD, question=FIELD, answer=FIELD, start=st.integers(-2, 40),
       impossible=st.booleans(), version_2=st.booleans())
def test_squad_structured(tokenizer, scratch, context, question, answer, start, impossible,
                          version_2):
    qa = {"id": "q1", "question": question,
          "answers": [] if impossible else [{"text": answer, "answer_start": start}]}
    if version_2:
        qa["is_impossible"] = impossible
    data = {"version": "x", "data": [{"title": "T", "paragraphs": [
        {"context": context, "qas": [qa]}]}]}
    path = _write(scratch, json.dumps(data, ensure_ascii=False), "dev.json")
    task = copy.copy(squad.TASKS["squad_v2" if version_2 else "squad_v1"]).configure(
        doc_stride=8, max_query_length=8)
    _read_and_featurize(lambda: squad.read_squad_file(path, version_2, "dev"), task, tokenizer)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_squad_mutated(tokenizer, scratch, seed):
    path = _write(scratch, _mutate(_sample("squad", "dev-v1.1.json"), seed), "dev.json")
    task = copy.copy(squad.TASKS["squad_v1"]).configure(doc_stride=8, max_query_length=8)
    _read_and_featurize(lambda: squad.read_squad_file(path, False, "dev"), task, tokenizer)


# ---- CoNLL-2003 ----------------------------------------------------------------------------

@FUZZ
@given(sentences=st.lists(st.lists(st.tuples(FIELD, st.sampled_from(
    ["O", "B-PER", "I-PER", "B-LOC", "I-MISC", "B-ORG", "X", ""])), max_size=6), max_size=4))
def test_conll_structured(tokenizer, scratch, sentences):
    text = "\n\n".join("\n".join(f"{word} NN I-NP {tag}" for word, tag in sentence)
                       for sentence in sentences)
    _write(scratch, text, "train.txt")
    task = conll.ConllTask()
    _read_and_featurize(lambda: task.read_examples(scratch, "train"), task, tokenizer)


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_conll_mutated(tokenizer, scratch, seed):
    _write(scratch, _mutate(_sample("conll2003", "valid.txt"), seed), "valid.txt")
    task = conll.ConllTask()
    _read_and_featurize(lambda: task.read_examples(scratch, "valid"), task, tokenizer)

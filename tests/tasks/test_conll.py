"""CoNLL-2003: reader and tag schemes, word-piece alignment, windows, metric, output files."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.errors import InputError
from kerasbert.tasks import base, conll
from kerasbert.tasks.conll import TASK, ConllTask, Sentence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = "/work/shared/data/conll2003"


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    from kerasbert.data.tokenization import WordPieceTokenizer

    return WordPieceTokenizer(uncased_vocab, do_lower_case=True)


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


def conll_text(*sentences, docstart=True):
    """Sentences of (word, tag) pairs -> a CoNLL file with dummy POS/chunk columns."""
    out = "-DOCSTART- -X- -X- O\n\n" if docstart else ""
    for sentence in sentences:
        out += "".join(f"{w} NNP B-NP {t}\n" for w, t in sentence) + "\n"
    return out


def sentence(words, tags=None, guid="x-0"):
    words = words.split() if isinstance(words, str) else words
    return Sentence(guid=guid, text_a=" ".join(words), words=tuple(words),
                    label=None if tags is None else tuple(tags.split()))


def oracle(features, continuation_noise=True):
    """Outputs that put all mass on the gold label at labelled positions; elsewhere a
    different label, which must never be read."""
    labels = features.labels
    out = np.zeros(labels.shape + (9,), np.float32)
    if continuation_noise:
        out[..., 8] = 5.0  # I-MISC everywhere the model is not asked
    rows, cols = np.nonzero(labels >= 0)
    out[rows, cols, labels[rows, cols]] = 10.0
    return out


# ---- task description -------------------------------------------------------------------------


def test_task_attributes():
    assert (TASK.name, TASK.kind, TASK.default_head) == ("conll2003", base.TAGGING, "tagger")
    assert TASK.label_list == ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                               "B-MISC", "I-MISC")
    assert TASK.num_outputs == 9
    assert (TASK.main_metric, tuple(TASK.dev_splits), tuple(TASK.test_splits)) == (
        "f1", ("valid",), ("test",))
    assert (TASK.default_learning_rate, TASK.default_train_batch_size,
            TASK.default_num_train_epochs) == (5e-5, 32, 3.0)
    assert TASK.sample_dir().endswith(os.path.join("data", "samples", "conll2003"))


# ---- reader ------------------------------------------------------------------------------------


def test_reader_iob2_with_docstart_trailing_spaces_crlf_and_no_final_blank(tmp_path, caplog):
    text = ("-DOCSTART- -X- -X- O\r\n\r\n"
            "EU NNP B-NP B-ORG  \r\n"      # trailing spaces
            "rejects VBZ B-VP O\r\n"
            "\r\n"
            "\r\n"                          # two blank lines: still one break
            "Peter NNP B-NP B-PER\t\r\n"
            "Blackburn NNP I-NP I-PER\r\n"
            "-DOCSTART- -X- -X- O\r\n"      # a document break also ends a sentence
            "Oslo NNP B-NP B-LOC")          # no final newline
    path = write(tmp_path, "train.txt", text)
    with caplog.at_level(logging.INFO, logger="kerasbert.tasks.conll"):
        examples = TASK.read_examples(str(tmp_path), "train")
    assert [(e.guid, e.words, e.label, e.line) for e in examples] == [
        ("train-0", ("EU", "rejects"), ("B-ORG", "O"), 3),
        ("train-1", ("Peter", "Blackburn"), ("B-PER", "I-PER"), 7),
        ("train-2", ("Oslo",), ("B-LOC",), 10),
    ]
    assert examples[1].text_a == "Peter Blackburn"
    assert TASK.schemes_found["train"] == "IOB2"
    assert f"{path}: tag scheme IOB2" in caplog.text


def test_reader_converts_iob1_to_iob2(tmp_path, caplog):
    # IOB1: I- everywhere; B- only where an entity directly follows one of the same type.
    text = conll_text(
        [("John", "I-PER"), ("Smith", "I-PER"), ("Mary", "B-PER"), ("met", "O"),
         ("Acme", "I-ORG"), ("Paris", "I-LOC"), ("Rome", "B-LOC")],
        [("German", "I-MISC"), ("firms", "O"), ("in", "O"), ("New", "I-LOC"), ("York", "I-LOC")])
    path = write(tmp_path, "valid.txt", text)
    with caplog.at_level(logging.INFO, logger="kerasbert.tasks.conll"):
        examples, scheme = conll.read_conll_file(path, "valid")
    assert scheme == "IOB1"
    assert "tag scheme IOB1, converted to IOB2" in caplog.text
    assert [e.label for e in examples] == [
        ("B-PER", "I-PER", "B-PER", "O", "B-ORG", "B-LOC", "B-LOC"),
        ("B-MISC", "O", "O", "B-LOC", "I-LOC"),
    ]
    # Same entities before and after: conversion keeps conlleval's reading of the data.
    from seqeval.metrics.sequence_labeling import get_entities
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-ORG", "I-LOC", "B-LOC"]
    assert get_entities(iob1) == get_entities(list(examples[0].label))


def test_scheme_detection_rules():
    def detect(*tag_lines, scheme="auto"):
        sentences = [(t.split(), t.split(), list(range(1, len(t.split()) + 1))) for t in tag_lines]
        return conll.fix_scheme(sentences, "f.txt", scheme), [s[1] for s in sentences]

    assert detect("O O", "B-PER I-PER O")[0] == "IOB2"
    assert detect("B-PER B-PER")[0] == "IOB2"  # valid in both: no conversion needed
    assert detect("I-PER B-PER") == ("IOB1", [["B-PER", "B-PER"]])
    assert detect("B-PER I-LOC") == ("IOB2", [["B-PER", "B-LOC"]])  # type change + B- start
    with pytest.raises(InputError, match=r"^f\.txt:2: I-LOC starts an entity"):
        detect("O I-LOC", scheme="iob2")
    with pytest.raises(InputError, match=r"^f\.txt:1: B-LOC starts an entity after O"):
        detect("B-LOC I-LOC", scheme="iob1")
    assert detect("I-LOC I-LOC B-LOC", scheme="iob1") == ("IOB1", [["B-LOC", "I-LOC", "B-LOC"]])


def test_stray_i_tag_in_iob2_data_is_counted_and_read_as_b(tmp_path, caplog):
    text = conll_text([("Acme", "B-ORG"), ("said", "O")],
                      [("in", "O"), ("Paris", "I-LOC")],       # line 7: an IOB2 error
                      [("Rome", "I-LOC"), ("and", "O")])       # line 9: another
    path = write(tmp_path, "train.txt", text)
    with caplog.at_level(logging.WARNING, logger="kerasbert.tasks.conll"):
        examples, scheme = conll.read_conll_file(path)
    assert scheme == "IOB2"
    assert f"{path}: 2 I- tag(s) start an entity in IOB2 data (first at line 7)" in caplog.text
    assert [e.label for e in examples][1:] == [("O", "B-LOC"), ("B-LOC", "O")]
    with pytest.raises(InputError, match=rf"^{path}:7: I-LOC starts an entity"):
        ConllTask(scheme="iob2").read_examples(str(tmp_path), "train")


@pytest.mark.parametrize("text, where, message", [
    ("EU NNP B-NP B-ORG\nrejects\n", 2, "expected a word and its NER tag"),
    ("EU NNP B-NP B-ORG\n\nx NN I-NP B-PERSON\n", 3, "'B-PERSON' is not a CoNLL-2003 NER tag"),
    ("EU NNP B-NP B-ORG\nrejects VBZ B-VP o\n", 2, "'o' is not a CoNLL-2003 NER tag"),
])
def test_reader_bad_lines(tmp_path, text, where, message):
    path = write(tmp_path, "train.txt", text)
    with pytest.raises(InputError, match=rf"^{path}:{where}: .*") as info:
        TASK.read_examples(str(tmp_path), "train")
    assert message in str(info.value)


def test_a_line_with_another_number_of_columns_is_refused_where_it_is(tmp_path):
    # The case: line 52 of the bundled sample, `. . O O`, cut to `. . O`: its last
    # column was read as the tag. conlleval refuses files that mix column counts.
    with open(os.path.join(TASK.sample_dir(), "train.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[51] == ". . O O"
    lines[51] = ". . O"
    path = write(tmp_path, "train.txt", "\n".join(lines))
    expected = (rf"^{path}:52: 3 columns, but line 3 has 4; every line of the file has the "
                r"same columns \(`word POS chunk NER`, the tag last\): '\. \. O'$")
    with pytest.raises(InputError, match=expected):
        TASK.read_examples(str(tmp_path), "train")
    with pytest.raises(InputError, match=expected):  # the streaming reader, as it is read
        list(TASK.iter_file(path, "train"))
    # More columns than the others, and a two-column file, are refused the same way.
    write(tmp_path, "valid.txt", "EU B-ORG\nrejects VBZ B-VP O\n")
    with pytest.raises(InputError, match=r"valid\.txt:2: 4 columns, but line 1 has 2"):
        TASK.read_examples(str(tmp_path), "valid")


def test_reader_file_problems(tmp_path):
    with pytest.raises(InputError, match=r"train\.txt: no such file; .* has: nothing"):
        TASK.read_examples(str(tmp_path), "train")
    with pytest.raises(InputError, match="unknown split 'dev'; expected one of train, valid, test"):
        TASK.read_examples(str(tmp_path), "dev")
    write(tmp_path, "test.txt", "-DOCSTART- -X- -X- O\n\n")
    with pytest.raises(InputError, match=r"test\.txt: no sentences"):
        TASK.read_examples(str(tmp_path), "test")
    with open(tmp_path / "valid.txt", "wb") as f:
        f.write(b"a NN O O\nb\xff NN O O\n")
    with pytest.raises(InputError, match=r"valid\.txt:2: not valid UTF-8"):
        TASK.read_examples(str(tmp_path), "valid")


# ---- TFDS ---------------------------------------------------------------------------------------


def test_read_tfds_maps_fields_and_splits(monkeypatch):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    # tfds ids follow its own NER_TAGS list: 0 = O, 1 = B-PER, 2 = I-PER, 6 = I-LOC, 8 = I-MISC.
    # The data is IOB1 (entities start with I-), as the original CoNLL release is.
    rows = [{"tokens": ["Ana", "Lopes", "visited", "Lima"], "ner": [2, 2, 0, 6]},
            {"tokens": ["Rio", "Open"], "ner": [8, 8]},
            {"tokens": ["Ana", "Rui"], "ner": [2, 1]}]
    calls = []

    def fake_load(name, split, data_dir=None, download=True):
        calls.append((name, split, data_dir, download))
        return tf.data.Dataset.from_generator(
            lambda: iter([{"tokens": np.array(r["tokens"], object), "ner": np.array(r["ner"]),
                           "pos": np.zeros(len(r["ner"]), np.int64),
                           "chunks": np.zeros(len(r["ner"]), np.int64)} for r in rows]),
            output_signature={"tokens": tf.TensorSpec([None], tf.string),
                              "ner": tf.TensorSpec([None], tf.int64),
                              "pos": tf.TensorSpec([None], tf.int64),
                              "chunks": tf.TensorSpec([None], tf.int64)})

    monkeypatch.setattr(tfds, "load", fake_load)
    task = ConllTask()
    examples = task.read_tfds("valid", "/data/tfds")
    assert calls == [("conll2003", "dev", "/data/tfds", False)]
    assert [(e.guid, e.words, e.label) for e in examples] == [
        ("valid-0", ("Ana", "Lopes", "visited", "Lima"), ("B-PER", "I-PER", "O", "B-LOC")),
        ("valid-1", ("Rio", "Open"), ("B-MISC", "I-MISC")),
        ("valid-2", ("Ana", "Rui"), ("B-PER", "B-PER")),
    ]
    assert task.schemes_found["valid"] == "IOB1"
    task.read_tfds("train", None)
    task.read_tfds("test", None)
    assert [c[1] for c in calls[1:]] == ["train", "test"]


def test_read_tfds_not_prepared(tmp_path):
    with pytest.raises(InputError, match=r"TFDS conll2003 \(dev\) is not prepared in .*tfds build"):
        TASK.read_tfds("valid", str(tmp_path))


# ---- windows --------------------------------------------------------------------------------------


def test_windows_hand_computed():
    # capacity 6, stride 3. Word offsets 0, 2, 3, 4, 7, 8 (9 pieces in all).
    lengths = [2, 1, 1, 3, 1, 1]
    # window 0: words 0-2 (4 pieces; word 3 would make 7) -> [0, 3).
    # next start: the first word at offset >= 0 + 3 -> word 2; words 2-5 are 1+3+1+1 = 6.
    assert conll.windows(lengths, 6) == [(0, 3), (2, 6)]
    assert conll.windows(lengths, 9) == [(0, 6)]
    # Word 2 (offset 3, 1 piece) is in both: context in window 0 is min(3 left, 0 right) = 0,
    # in window 1 min(0, 5) = 0; the tie goes to the fuller window (6 pieces vs 4) -> 1.
    assert list(conll.best_windows(lengths, [(0, 3), (2, 6)])) == [0, 0, 1, 1, 1, 1]
    # Every word gets its own window when each is as long as the capacity.
    assert conll.windows([3, 3, 3], 3) == [(0, 1), (1, 2), (2, 3)]


@pytest.mark.parametrize("seed", range(20))
def test_windows_cover_every_word_and_fit(seed):
    rng = np.random.default_rng(seed)
    capacity = int(rng.integers(1, 12))
    lengths = rng.integers(1, capacity + 1, size=int(rng.integers(1, 60))).tolist()
    spans = conll.windows(lengths, capacity)
    assert spans[0][0] == 0 and spans[-1][1] == len(lengths)
    for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
        assert s0 < s1 <= e0 <= e1  # progress, no gap
    assert all(sum(lengths[s:e]) <= capacity for s, e in spans)
    owner = conll.best_windows(lengths, spans)
    assert all(spans[w][0] <= i < spans[w][1] for i, w in enumerate(owner))


# ---- alignment ------------------------------------------------------------------------------------


def test_first_piece_carries_the_label(tokenizer):
    s = sentence("Schwarzenkopfberger visited Wojciechowski in Oslo .",
                 "B-PER O B-PER O B-LOC O")
    pieces = [tokenizer.tokenize(w) for w in s.words]
    assert [len(p) for p in pieces] == [4, 1, 5, 1, 1, 1]  # see the uncased vocab
    f = TASK.featurize([s], tokenizer, 32)
    ids = tokenizer.ids_to_tokens(f.inputs["token_ids"][0, :16])
    assert ids == ["[CLS]", *sum(pieces, []), "[SEP]", "[PAD]"]
    # labels: B-PER=1 at [CLS]+0, -1 for its 3 continuation pieces, O=0, B-PER=1, ...
    expected = [-1, 1, -1, -1, -1, 0, 1, -1, -1, -1, -1, 0, 5, 0, -1] + [-1] * 17
    assert f.labels[0].tolist() == expected
    assert f.inputs["padding_mask"][0].tolist() == [1] * 15 + [0] * 17
    assert f.inputs["segment_ids"].max() == 0
    assert f.extra["word_position"].tolist() == [1, 5, 6, 11, 12, 13]
    assert f.inputs["token_ids"].dtype == np.int32 and f.labels.dtype == np.int32


def test_round_trip_predicts_every_word_once(tokenizer):
    sentences = [
        sentence("Krzyzanowski Papadopoulou Abdulrahmanov met in Kuala Lumpur",
                 "B-PER I-PER I-PER O O B-LOC I-LOC", "valid-0"),
        sentence("Quiet .", "O O", "valid-1"),
        sentence(["\u200b", "Oslo"], "O B-LOC", "valid-2"),  # a word with no word pieces
    ]
    f = TASK.featurize(sentences, tokenizer, 64)
    assert tokenizer.ids_to_tokens(f.inputs["token_ids"][2, :4]) == ["[CLS]", "[UNK]", "oslo", "[SEP]"]
    predicted = TASK.predict_tags(oracle(f), f)
    assert predicted == [list(s.label) for s in sentences]


def test_long_sentence_windows_predict_each_word_exactly_once(tokenizer):
    # 60 words: names of several pieces, so ~150 pieces over windows of 14.
    names = ["Schwarzenkopfberger", "of", "Vanderslootenberg", "Lisbon", "and", "Osaka", "."]
    tags = ["B-PER", "O", "B-PER", "B-LOC", "O", "B-LOC", "O"]
    words = [names[i % 7] for i in range(60)]
    long = sentence(words, " ".join(tags[i % 7] for i in range(60)), "train-0")
    short = sentence("Helix Telecom", "B-ORG I-ORG", "train-1")
    f = TASK.featurize([long, short], tokenizer, 16)
    rows = len(f.inputs["token_ids"])
    assert rows > 10 and f.extra["row_sentence"].tolist() == [0] * (rows - 1) + [1]
    # Each word: exactly one (row, position), pointing at its own first word piece ...
    pairs = set(zip(f.extra["word_row"].tolist(), f.extra["word_position"].tolist()))
    assert len(pairs) == 62
    first_piece = {w: tokenizer.tokenize_ids([w])[0, 0].numpy() for w in set(words)}
    for k, word in enumerate(words):
        r, p = f.extra["word_row"][k], f.extra["word_position"][k]
        assert f.inputs["token_ids"][r, p] == first_piece[word]
        assert f.labels[r, p] == TASK.label_list.index(long.label[k])
    # ... and labels exist at those positions only: each word trains once.
    assert (f.labels >= 0).sum() == 62
    assert f.inputs["padding_mask"].sum(1).max() <= 16
    assert TASK.predict_tags(oracle(f), f) == [list(long.label), list(short.label)]


def test_word_longer_than_a_window_keeps_its_first_piece(tokenizer, caplog):
    s = sentence("Wojciechowski Schwarzenkopfberger Oslo", "B-PER I-PER B-LOC")
    with caplog.at_level(logging.WARNING, logger="kerasbert.tasks.conll"):
        f = TASK.featurize([s], tokenizer, 6)  # capacity 4: 5 and 4 pieces
    assert "1 word(s) had more word pieces than fit a window of 4" in caplog.text
    assert "(4 pieces dropped)" in caplog.text and f.extra["dropped_pieces"] == 4
    assert tokenizer.ids_to_tokens(f.inputs["token_ids"][0][:3]) == ["[CLS]", "wo", "[SEP]"]
    assert TASK.predict_tags(oracle(f), f) == [["B-PER", "I-PER", "B-LOC"]]


def test_count_rows_is_the_number_of_rows_featurize_makes(tokenizer):
    # What a streamed training split counts before training: windows of long sentences,
    # words cut to their first piece and words without pieces each as featurize has them.
    examples = TASK.read_examples(TASK.sample_dir(), "train") + [
        sentence("Wojciechowski Schwarzenkopfberger Oslo", "B-PER I-PER B-LOC"),
        sentence(["Oslo", "\u200b", "is"], "B-LOC O O")]
    for length in (6, 16, 64, 128):
        rows = len(TASK.featurize(examples, tokenizer, length).inputs["token_ids"])
        assert TASK.count_rows(examples, tokenizer, length) == rows
        assert conll.count_rows(examples[:7], tokenizer, length) == len(
            TASK.featurize(examples[:7], tokenizer, length).labels)
    assert rows == len(examples) < conll.count_rows(examples, tokenizer, 16)


def test_iter_file_reads_what_read_file_reads(tmp_path):
    text = conll_text([("John", "I-PER"), ("Smith", "I-PER"), ("met", "O")],
                      [("Acme", "I-ORG"), ("Paris", "B-LOC")])  # IOB2 with a stray I-
    path = write(tmp_path, "train.txt", text)
    task = ConllTask()
    streamed = list(task.iter_file(path, "train"))
    assert task.schemes_found["train"] == "IOB2"
    assert streamed == task.read_file(path, "train")
    assert [s.label for s in streamed] == [("B-PER", "I-PER", "O"), ("B-ORG", "B-LOC")]
    assert [s.line for s in streamed] == [3, 7]


def test_unlabelled_sentences_have_no_labels(tokenizer):
    f = TASK.featurize([sentence("Oslo is cold")], tokenizer, 8)
    assert f.labels is None and len(f.extra["word_row"]) == 3


# ---- metric -----------------------------------------------------------------------------------------

GOLD = [["B-PER", "I-PER", "O", "B-LOC", "O"],
        ["B-ORG", "I-ORG", "I-ORG", "O", "B-MISC"],
        ["O", "O"]]
PRED = [["B-PER", "I-PER", "O", "B-ORG", "O"],     # PER right; ORG for LOC: type error
        ["B-ORG", "I-ORG", "O", "O", "I-MISC"],    # ORG one word short: boundary error;
        ["B-LOC", "O"]]                            # I-MISC after O starts MISC: right; LOC spurious


def test_entity_metric_against_hand_counts():
    m = conll.entity_metrics(GOLD, PRED)
    # gold entities 4 (PER, LOC, ORG, MISC); predicted 5 (PER, ORG, ORG, MISC, LOC);
    # exact matches 2 (PER, MISC) -> P = 2/5, R = 2/4, F1 = 2PR/(P+R) = 0.4/0.9 = 4/9.
    assert m["precision"] == pytest.approx(2 / 5)
    assert m["recall"] == pytest.approx(2 / 4)
    assert m["f1"] == pytest.approx(4 / 9)
    # token accuracy: 4/5 + 3/5 + 1/2 -> 8 of 12 tags right.
    assert m["accuracy"] == pytest.approx(8 / 12)
    # per type: PER 1 gold / 1 predicted / 1 right; MISC likewise;
    # ORG 1 gold / 2 predicted / 0 right; LOC 1 gold / 1 predicted / 0 right.
    assert (m["PER_precision"], m["PER_recall"], m["PER_f1"], m["PER_support"]) == (1, 1, 1, 1)
    assert (m["MISC_precision"], m["MISC_recall"], m["MISC_f1"]) == (1, 1, 1)
    assert (m["ORG_precision"], m["ORG_recall"], m["ORG_f1"], m["ORG_support"]) == (0, 0, 0, 1)
    assert (m["LOC_precision"], m["LOC_recall"], m["LOC_f1"]) == (0, 0, 0)
    assert all(isinstance(v, float) for v in m.values())


def test_entity_metric_conlleval_chunk_rules():
    # I- after another type starts a new entity; consecutive I- of one type are one entity.
    m = conll.entity_metrics([["B-PER", "I-PER", "B-LOC"]], [["I-PER", "I-PER", "I-LOC"]])
    assert (m["precision"], m["recall"]) == (1.0, 1.0)
    # no entities at all: zeros, never nan, and the same keys
    empty = conll.entity_metrics([["O"]], [["O"]])
    assert empty["f1"] == 0.0 and empty["accuracy"] == 1.0
    assert set(empty) == set(m) and "PER_support" in m


# ---- evaluate, prediction files -----------------------------------------------------------------------


def test_evaluate_writes_conll_file_that_scores_the_same(tokenizer, tmp_path):
    sentences = [sentence(" ".join(f"w{i}" for i in range(len(g))), " ".join(g), f"valid-{n}")
                 for n, g in enumerate(GOLD)]
    f = TASK.featurize(sentences, tokenizer, 16)
    logits = np.zeros(f.inputs["token_ids"].shape + (9,), np.float32)
    ids = [TASK.label_list.index(t) for p in PRED for t in p]
    logits[f.extra["word_row"], f.extra["word_position"], ids] = 1.0
    metrics = TASK.evaluate(logits, f, str(tmp_path), "valid")
    assert metrics == conll.entity_metrics(GOLD, PRED)
    path = tmp_path / "valid_predictions.txt"
    lines = path.read_text().split("\n")
    assert lines[:6] == ["w0 B-PER B-PER", "w1 I-PER I-PER", "w2 O O", "w3 B-LOC B-ORG",
                         "w4 O O", ""]
    assert sum(1 for line in lines if line) == 12  # exactly one line per input word
    assert conll.evaluate_file(str(path)) == metrics
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))
    # No output_dir: metrics only.
    assert TASK.evaluate(logits, f, None, "valid") == metrics


def test_write_predictions_test_split_and_trimmed_batches(tokenizer, tmp_path):
    labelled = [sentence("Ana visited Lima", "B-PER O B-LOC", "test-0"),
                sentence("Schwarzenkopfberger", "B-PER", "test-1")]
    f = TASK.featurize(labelled, tokenizer, 12)
    out = oracle(f)
    # Per-batch outputs trimmed to each batch's longest row, as the pipeline does.
    widths = f.inputs["padding_mask"].sum(1)
    batches = [out[:1, : widths[0]], out[1:, : widths[1]]]
    path = TASK.write_predictions(batches, f, str(tmp_path), "test")
    assert path == os.path.join(str(tmp_path), "test_predictions.txt")
    assert open(path).read() == ("Ana B-PER B-PER\nvisited O O\nLima B-LOC B-LOC\n\n"
                                 "Schwarzenkopfberger B-PER B-PER\n\n")
    # Unlabelled input: `word predicted`.
    f = TASK.featurize([sentence("Ana visited Lima")], tokenizer, 12)
    logits = np.zeros(f.inputs["token_ids"].shape + (9,), np.float32)
    logits[..., 5] = 1.0
    path = TASK.write_predictions(logits, f, str(tmp_path), "test")
    assert open(path).read() == "Ana B-LOC\nvisited B-LOC\nLima B-LOC\n\n"


def test_do_predict_scores_the_test_split_beside_the_dev_one(tmp_path):
    from kerasbert.config import RunConfig
    from kerasbert.run import execute

    out = tmp_path / "run"
    metrics = execute(RunConfig(task="conll2003", output_dir=str(out), init_checkpoint="random",
                                model_size="2/32/2", max_seq_length=48, max_train_examples=8,
                                train_batch_size=8, num_train_epochs=1.0, do_predict=True))
    # The whole bundled test.txt, scored as conlleval scores the file written for it.
    written = out / "test_predictions.txt"
    blocks = written.read_text().strip().split("\n\n")
    assert len(blocks) == len(TASK.read_examples(TASK.sample_dir(), "test"))
    assert all(len(line.split()) == 3 for b in blocks for line in b.splitlines())
    test = {k[len("test_"):]: v for k, v in metrics.items() if k.startswith("test_")}
    assert test == conll.evaluate_file(str(written))
    assert {k: v for k, v in metrics.items() if not k.startswith("test_")} == (
        conll.evaluate_file(str(out / "valid_predictions.txt")))
    assert "test_f1 = " in (out / "eval_results.txt").read_text()


def test_evaluate_file_reads_conlleval_input(tmp_path):
    path = write(tmp_path, "p.txt", "-DOCSTART- -X- O O\n\nJohn NNP B-PER B-PER\n"
                                    "lives VBZ O O  \nin IN O O\nOslo NNP B-LOC B-ORG")
    m = conll.evaluate_file(path)  # 2 gold, 2 predicted, 1 right
    assert (m["precision"], m["recall"], m["f1"]) == (0.5, 0.5, 0.5)
    with pytest.raises(InputError, match=r"q\.txt:2: expected `word gold predicted`"):
        conll.evaluate_file(write(tmp_path, "q.txt", "a O O\nb\n"))
    with pytest.raises(InputError, match=r"r\.txt:1: 'Oslo' is not an IOB tag"):
        conll.evaluate_file(write(tmp_path, "r.txt", "Oslo B-LOC\n"))
    with pytest.raises(InputError, match=r"s\.txt: no tagged words"):
        conll.evaluate_file(write(tmp_path, "s.txt", "\n\n"))
    with pytest.raises(InputError, match=r"nope\.txt: no such file"):
        conll.evaluate_file(str(tmp_path / "nope.txt"))


# ---- bundled sample ---------------------------------------------------------------------------------


def test_bundled_sample_equals_generator_output(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.samples.make_conll_samples",
                    "--out", str(tmp_path)], check=True, cwd=REPO)
    for name in ("train.txt", "valid.txt", "test.txt"):
        with open(os.path.join(TASK.sample_dir(), name), encoding="utf-8") as f:
            committed = f.read()
        assert committed == (tmp_path / name).read_text(encoding="utf-8"), \
            f"{name}: regenerate with python -m tools.samples.make_conll_samples"


def test_bundled_sample_reads_and_needs_windows_at_64(tokenizer):
    sizes = {"train": 200, "valid": 60, "test": 30}
    for split, size in sizes.items():
        examples = TASK.read_examples(TASK.sample_dir(), split)
        assert len(examples) == size and TASK.schemes_found[split] == "IOB2"
        types = {t[2:] for e in examples for t in e.label if t != "O"}
        assert types == {"PER", "ORG", "LOC", "MISC"}
        f = TASK.featurize(examples, tokenizer, 64)
        assert len(f.inputs["token_ids"]) > size  # some sentences needed windows
        assert (f.labels >= 0).sum() == sum(len(e.words) for e in examples)
        pieces_per_word = (f.inputs["padding_mask"].sum() - 2 * len(f.labels)) / (f.labels >= 0).sum()
        assert pieces_per_word > 1.0  # multi-piece words (and window overlap)


# ---- the real data ----------------------------------------------------------------------------------


@pytest.mark.large
@pytest.mark.skipif(not os.path.exists(os.path.join(REAL, "valid.txt")),
                    reason="CoNLL-2003 not in /work/shared/data")
def test_real_conll2003(tokenizer):
    task = ConllTask()
    train = task.read_examples(REAL, "train")
    valid = task.read_examples(REAL, "valid")
    assert (len(train), len(valid)) == (14041, 3250)
    assert task.schemes_found == {"train": "IOB2", "valid": "IOB2"}
    assert sum(len(e.words) for e in valid) == 51362
    f = task.featurize(valid, tokenizer, 128)
    assert task.predict_tags(oracle(f), f) == [list(e.label) for e in valid]
    assert task.evaluate(oracle(f), f)["f1"] == 1.0

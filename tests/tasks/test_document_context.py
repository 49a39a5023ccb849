"""--document_context: CoNLL sentences encoded with their document's neighbours around them.

A hand-made vocabulary (every word one piece, "ddyy" two) and a two-document snippet make
every row checkable by hand: which pieces are context, that context never crosses a
-DOCSTART- line, that context is whole words, and that every word, also of a sentence longer
than a row, is labelled and predicted exactly once.
"""

import copy
import dataclasses
import os

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert.config import RunConfig, configure_task
from kerasbert.data import pipeline, streaming
from kerasbert.errors import InputError
from kerasbert.tasks import conll

SNIPPET = """-DOCSTART- -X- -X- O

aa NNP B-NP B-PER
bb NNP I-NP I-PER

cc NNP B-NP O
ddyy NNP I-NP B-LOC
ee NNP I-NP O

ff NNP B-NP O

-DOCSTART- -X- -X- O

gg NNP B-NP B-ORG
hh NNP I-NP O

ii NNP B-NP O
jj NNP B-NP O
kk NNP B-NP B-MISC
ll NNP B-NP I-MISC
mm NNP B-NP O
nn NNP B-NP O
oo NNP B-NP B-PER
pp NNP B-NP O
"""
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "aa", "bb", "cc", "dd", "##yy", "ee",
         "ff", "gg", "hh", "ii", "jj", "kk", "ll", "mm", "nn", "oo", "pp"]
LENGTH = 8  # 6 pieces a row besides [CLS] [SEP]: the last sentence (8 words) makes 2 rows


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from kerasbert.data.tokenization import WordPieceTokenizer

    folder = tmp_path_factory.mktemp("snippet")
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "train.txt").write_text(SNIPPET)
    tokenizer = WordPieceTokenizer(str(folder / "vocab.txt"), do_lower_case=True)
    sentences, _ = conll.read_conll_file(str(folder / "train.txt"))
    return tokenizer, sentences, str(folder / "train.txt")


def _rows(features, tokenizer):
    """Each row as (its pieces between [CLS] and [SEP], own (start, end), labelled
    positions)."""
    out = []
    for r, ids in enumerate(features.inputs["token_ids"]):
        real = ids[features.inputs["padding_mask"][r] == 1]
        assert real[0] == tokenizer.cls_id and real[-1] == tokenizer.sep_id
        out.append((" ".join(tokenizer.ids_to_tokens(real[1:-1])),
                    tuple(int(x) for x in features.extra["own_positions"][r]),
                    [int(p) for p in np.flatnonzero(features.labels[r] >= 0)]))
    return out


def test_the_reader_numbers_the_documents(tiny):
    _, sentences, _ = tiny
    assert [s.document for s in sentences] == [0, 0, 0, 1, 1]
    assert [len(r) for r in conll.documents(sentences)] == [3, 2]


def test_rows_hold_their_documents_neighbours_hand_computed(tiny):
    tokenizer, sentences, _ = tiny
    features = conll.featurize_sentences(sentences, tokenizer, LENGTH, document_context=4)
    # (pieces, own pieces' positions [start, end), labelled positions); 4 context pieces at
    # most, about half on each side, what one side lacks taken from the other.
    assert _rows(features, tokenizer) == [
        ("aa bb cc dd ##yy ee", (1, 3), [1, 2]),  # document start: all context after
        ("bb cc dd ##yy ee ff", (2, 6), [2, 3, 5]),  # room 2: one piece each side
        ("cc dd ##yy ee ff", (5, 6), [5]),  # document end: all before, not "gg" after
        ("gg hh ii jj kk ll", (1, 3), [1, 2]),  # not "ff" before: another document
        ("ii jj kk ll mm nn", (1, 7), [1, 2, 3, 4, 5]),  # a full window: no room
        ("kk ll mm nn oo pp", (2, 7), [4, 5, 6]),  # its own sentence's "kk" as context
    ]
    assert features.extra["row_sentence"].tolist() == [0, 1, 2, 3, 4, 4]
    # Labels are the sentence's own tags at its words' first pieces.
    labels = [conll.LABELS[i] for i in features.labels[features.labels >= 0]]
    assert labels == [t for s in sentences for t in s.label]


def test_context_is_whole_words(tiny):
    tokenizer, sentences, _ = tiny
    features = conll.featurize_sentences(sentences, tokenizer, LENGTH, document_context=2)
    assert [r[0] for r in _rows(features, tokenizer)] == [
        "aa bb cc",  # 2 pieces after "bb" would cut "ddyy": only "cc"
        "bb cc dd ##yy ee ff",
        "ee ff",  # 2 pieces before "ff" would cut "ddyy": only "ee"
        "gg hh ii jj",
        "ii jj kk ll mm nn",
        "kk ll mm nn oo pp",
    ]


@pytest.mark.parametrize("context", [0, 1, 3, 4, "max"])
def test_every_word_is_predicted_exactly_once_at_a_labelled_position(tiny, context):
    tokenizer, sentences, _ = tiny
    features = conll.featurize_sentences(sentences, tokenizer, LENGTH,
                                         document_context=context)
    extra = features.extra
    labelled = set(zip(*np.nonzero(features.labels >= 0)))
    read = list(zip(extra["word_row"].tolist(), extra["word_position"].tolist()))
    assert len(read) == len(set(read)) == sum(len(s.words) for s in sentences)
    assert set(read) == {(int(r), int(p)) for r, p in labelled}
    if context:  # labels only on a row's own pieces
        for row, position in read:
            start, end = extra["own_positions"][row]
            assert start <= position < end
    gold = [list(s.label) for s in sentences]
    assert conll.predict_word_tags(_oracle(features), features) == gold


def _oracle(features):
    out = np.zeros(features.labels.shape + (9,), np.float32)
    out[..., 8] = 5.0  # I-MISC wherever the model is not asked, context included
    rows, cols = np.nonzero(features.labels >= 0)
    out[rows, cols, features.labels[rows, cols]] = 10.0
    return out


def test_max_fills_the_row_and_more_than_a_row_is_the_row(tiny):
    tokenizer, sentences, _ = tiny
    full = conll.featurize_sentences(sentences, tokenizer, LENGTH, document_context="max")
    for context in (6, 8):  # a row holds 6 pieces besides [CLS] [SEP]
        same = conll.featurize_sentences(sentences, tokenizer, LENGTH, document_context=context)
        np.testing.assert_array_equal(same.inputs["token_ids"], full.inputs["token_ids"])
    # A full row of 6 pieces: 5 before "ff" (its document has no more after it).
    assert _rows(full, tokenizer)[2][0] == "bb cc dd ##yy ee ff"


def test_no_context_is_each_sentence_alone(uncased_vocab):
    """0 gives the rows of each sentence alone, [CLS] its pieces [SEP], as before
    --document_context existed (on the bundled sample, with windows at 32); so do sentences
    of no document at any setting, but for the windows of a long sentence, which take
    their context from the sentence's other words."""
    from kerasbert.data.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(uncased_vocab, do_lower_case=True)
    task = conll.ConllTask()
    sentences = task.read_examples(task.sample_dir(), "train")
    zero = conll.featurize_sentences(sentences, tokenizer, 32)
    same = conll.featurize_sentences(sentences, tokenizer, 32, document_context="0")
    for k in zero.inputs:
        np.testing.assert_array_equal(same.inputs[k], zero.inputs[k])
    np.testing.assert_array_equal(same.labels, zero.labels)
    assert "own_positions" not in zero.extra
    # Each row is [CLS] + pieces of its sentence's words only.
    pieces = [tokenizer.tokenize_ids([w])[0].numpy().tolist() or [tokenizer.unk_id]
              for s in sentences for w in s.words]
    by_sentence = np.split(np.arange(len(pieces)), zero.extra["sentence_starts"][1:-1])
    rows_of = np.bincount(zero.extra["row_sentence"])
    assert (rows_of > 1).any()  # some sentences make windows
    for r, n in enumerate(zero.extra["row_sentence"]):
        ids = zero.inputs["token_ids"][r][zero.inputs["padding_mask"][r] == 1][1:-1].tolist()
        sentence = [p for k in by_sentence[n] for p in pieces[k]]
        assert ids == sentence if rows_of[n] == 1 else _is_sublist(ids, sentence)
    alone = conll.featurize_sentences([dataclasses.replace(s, document=None)
                                       for s in sentences], tokenizer, 32, document_context="max")
    single = rows_of[zero.extra["row_sentence"]] == 1
    for k in zero.inputs:
        np.testing.assert_array_equal(alone.inputs[k][single], zero.inputs[k][single])
    with_context = conll.featurize_sentences(sentences, tokenizer, 32, document_context=16)
    assert (with_context.inputs["padding_mask"].sum() > zero.inputs["padding_mask"].sum())
    np.testing.assert_array_equal(with_context.labels[with_context.labels >= 0],
                                  zero.labels[zero.labels >= 0])


def _is_sublist(part, whole):
    return any(whole[i: i + len(part)] == part for i in range(len(whole) - len(part) + 1))


# ---- the setting ------------------------------------------------------------------------------


@pytest.mark.parametrize("value, message", [
    ("-1", "--document_context=-1: must be a number of word pieces (0 or more) or max"),
    ("half", "--document_context=half: must be a number of word pieces (0 or more) or max"),
    ("2.5", "--document_context=2.5: must be a number of word pieces (0 or more) or max"),
    ("200", "--document_context=200: more word pieces than a row holds "
            "(--max_seq_length=128)"),
])
def test_bad_values_are_one_line_naming_the_flag(tmp_path, value, message):
    with pytest.raises(InputError) as error:
        RunConfig(task="conll2003", output_dir=str(tmp_path), max_seq_length=128,
                  document_context=value)
    assert str(error.value) == message


def test_the_default_max_seq_length_bounds_it_too(tmp_path):
    config = RunConfig(task="conll2003", output_dir=str(tmp_path), document_context="129")
    with pytest.raises(InputError, match=r"^--document_context=129: more word pieces than a "
                       r"row holds \(--max_seq_length=128\)$"):
        config.resolved(conll.ConllTask())  # the task's 128


@pytest.mark.parametrize("task_name", ["mrpc", "squad_v1", "swag"])
def test_a_task_without_documents_refuses_it(tmp_path, task_name):
    registry = plugins.registry()
    config = RunConfig(task=task_name, output_dir=str(tmp_path), document_context="max")
    with pytest.raises(InputError, match=f"^--document_context=max: the {task_name} task has "
                       "no documents to take context from"):
        configure_task(copy.copy(registry.task(task_name)), config.resolved(
            registry.task(task_name)))
    # 0 is every task's default.
    configure_task(copy.copy(registry.task(task_name)), RunConfig(
        task=task_name, output_dir=str(tmp_path), document_context="0").resolved(
        registry.task(task_name)))


def test_tfds_has_no_documents(tmp_path):
    config = RunConfig(task="conll2003", output_dir=str(tmp_path), use_tfds=True,
                       document_context="16").resolved(conll.ConllTask())
    with pytest.raises(InputError, match="^--document_context=16: TFDS conll2003 has no "):
        configure_task(conll.ConllTask(), config)


def test_the_task_takes_the_runs_value(tmp_path):
    task = conll.ConllTask()
    configure_task(task, RunConfig(task="conll2003", output_dir=str(tmp_path),
                                   document_context="016").resolved(task))
    assert task.document_context == "16"
    assert conll.TASK.document_context == "0"  # the shared instance is left alone


# ---- streaming ----------------------------------------------------------------------------------


def test_chunks_never_cut_a_document():
    docs = [0] * 5 + [1] * 2 + [None, None] + [2] * 4
    sentences = [conll.Sentence(guid=str(n), text_a="x", words=("x",), document=d)
                 for n, d in enumerate(docs)]
    task = conll.ConllTask().configure(document_context="8")
    got = [[int(s.guid) for s in c] for c in streaming.chunks(sentences, task.keeps_together, 3)]
    assert got == [[0, 1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11, 12]]
    plain = conll.ConllTask()  # without context, chunks of 3 as before
    assert [len(c) for c in streaming.chunks(sentences, plain.keeps_together, 3)] == [3] * 4 + [1]


@pytest.mark.parametrize("context", ["5", "max"])
def test_streamed_rows_are_the_in_memory_rows(uncased_vocab, monkeypatch, context):
    from kerasbert.data.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(uncased_vocab, do_lower_case=True)
    task = conll.ConllTask().configure(document_context=context)
    path = task.split_path(task.sample_dir(), "train")  # 200 sentences in 20 documents
    memory = task.featurize(task.read_file(path, "train"), tokenizer, 32)
    rows = len(memory.labels)
    monkeypatch.setattr(streaming, "CHUNK", 8)  # chunks would otherwise cut documents
    streamed = streaming.StreamedFeatures(task, path, tokenizer, 32, rows)
    assert pipeline.num_rows(streamed) == rows
    for seed in (None, 7):
        got = list(pipeline.dataset_of(streamed, 8, seed, labels_per_token=True))
        want = list(pipeline.dataset_of(memory, 8, seed, labels_per_token=True))
        assert len(got) == len(want)
        for (gi, gl), (wi, wl) in zip(got, want):
            for k in wi:
                np.testing.assert_array_equal(gi[k].numpy(), wi[k].numpy())
            np.testing.assert_array_equal(gl.numpy(), wl.numpy())
    # Without keeping documents together the chunk edges would lose context: a real check.
    monkeypatch.setattr(task, "keeps_together", lambda a, b: False)
    cut = np.concatenate([task.featurize(c, tokenizer, 32).inputs["token_ids"][:, :32]
                          for c in streaming.chunks(list(streamed.examples), lambda a, b: False,
                                                    8)])
    assert not np.array_equal(cut, memory.inputs["token_ids"])


def test_sample_files_have_documents():
    task = conll.ConllTask()
    for split in ("train", "valid", "test"):
        sentences = task.read_examples(task.sample_dir(), split)
        assert len(conll.documents(sentences)) == len(
            [line for line in open(os.path.join(task.sample_dir(), f"{split}.txt"))
             if line.startswith("-DOCSTART-")])


@pytest.mark.parametrize("args, message", [
    (["--task=conll2003", "--document_context=-3"],
     "kerasbert: error: --document_context=-3: must be a number of word pieces (0 or more) or "
     "max"),
    (["--task=mrpc", "--document_context=max"],
     "kerasbert: error: --document_context=max: the mrpc task has no documents to take "
     "context from (CoNLL-2003 NER does)"),
    (["--task=conll2003", "--max_seq_length=64", "--document_context=65"],
     "kerasbert: error: --document_context=65: more word pieces than a row holds "
     "(--max_seq_length=64)"),
])
def test_the_cli_refuses_bad_values_before_training(tmp_path, args, message):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", *args, "--init_checkpoint=random",
         f"--output_dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300,
        cwd=root, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == message
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()

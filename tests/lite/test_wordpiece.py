"""kerasbert/lite/wordpiece.py, the plain-Python WordPiece of the LiteRT runtime: id for id
the reference google-research/bert FullTokenizer (tests/data/test_tokenization.py builds it)
and kerasbert's TF tokenizer, and packing as the TF graph packs."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.data.tokenization import WordPieceTokenizer, pack_inputs
from kerasbert.lite.model import pack
from kerasbert.lite.wordpiece import WordPiece, read_vocab
from tests.data.test_tokenization import (
    TRICKY,
    _boring,
    _cased_vocab_tokens,
    _google_tokens,
    _reference,
    _text_strategy,
)


@pytest.fixture(scope="module")
def uncased(uncased_vocab):
    return WordPiece(read_vocab(uncased_vocab), True), _reference(uncased_vocab, True)


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "cased_vocab.txt"
    path.write_text("\n".join(_cased_vocab_tokens()) + "\n", encoding="utf-8")
    return WordPiece(read_vocab(str(path)), False), _reference(str(path), False)


@pytest.fixture(params=["uncased", "cased"])
def pair(request):
    return request.getfixturevalue(request.param)


def _google_ids(ref, text):
    return ref.convert_tokens_to_ids(_google_tokens(ref, text))


def test_special_ids_and_a_worked_example(uncased):
    piece, _ = uncased
    assert (piece.pad_id, piece.unk_id, piece.cls_id, piece.sep_id, piece.mask_id) == (
        0, 100, 101, 102, 103)
    assert piece.ids("Unaffable naïve!") == [14477, 20961, 3468, 15743, 999]  # una ##ffa ##ble naive !


def test_tricky_strings_as_google_tokenizes_them(pair):
    piece, ref = pair
    for text in TRICKY + [t.upper() for t in TRICKY] + [t.lower() for t in TRICKY]:
        assert piece.ids(text) == _google_ids(ref, text), text


def test_every_code_point_as_google_tokenizes_it(pair):
    piece, ref = pair
    cps = [cp for cp in range(sys.maxunicode + 1) if not _boring(cp) or cp % 61 == 0]
    cps = [cp for cp in cps if not 0xD800 <= cp <= 0xDFFF]
    bad = [hex(cp) for cp in cps
           if piece.ids(f"A{chr(cp)}b") != _google_ids(ref, f"A{chr(cp)}b")]
    assert not bad, bad[:20]


@settings(max_examples=150, deadline=None)
@given(text=_text_strategy())
def test_random_text_as_google_tokenizes_it(uncased, text):
    piece, ref = uncased
    assert piece.ids(text) == _google_ids(ref, text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(max_codepoint=127), max_size=60))
def test_ascii_text_takes_a_shortcut_to_the_same_ids(uncased, cased, text):
    for piece, ref in (uncased, cased):
        assert piece.ids(text) == _google_ids(ref, text)


def test_the_same_ids_as_the_tf_tokenizer_on_the_tricky_strings(uncased_vocab):
    """What the exported SavedModel's graph computes (kerasbert/data/tokenization.py)."""
    tf_tokenizer = WordPieceTokenizer(uncased_vocab, do_lower_case=True)
    piece = WordPiece(read_vocab(uncased_vocab), True)
    assert [piece.ids(t) for t in TRICKY] == tf_tokenizer.tokenize_ids(TRICKY).to_list()


def test_words_over_the_limit_and_words_without_a_match_are_one_unk(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a", "é", "##é", ","]
    piece = WordPiece(vocab, do_lower_case=False)
    assert piece.ids("a" * 100) == [5] + [6] * 99
    assert piece.ids("a" * 101 + " a") == [1, 5]
    assert piece.ids("é" * 101) == [1]  # characters, not UTF-8 bytes
    assert WordPiece(vocab, False, max_chars_per_word=3).ids("b aab é,éééé") == [1, 1, 7, 9, 1]


@settings(max_examples=60, deadline=None)
@given(len_a=st.integers(0, 40), len_b=st.one_of(st.none(), st.integers(0, 40)),
       max_seq_length=st.integers(3, 24))
def test_packing_and_truncation_equal_the_graph_s(len_a, len_b, max_seq_length):
    import tensorflow as tf

    piece = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    a = list(range(1000, 1000 + len_a))
    b = None if len_b is None else list(range(2000, 2000 + len_b))
    token_ids, segment_ids = pack(piece, a, b, max_seq_length)
    want = pack_inputs(piece, tf.ragged.constant([a], tf.int32),
                       None if b is None else tf.ragged.constant([b], tf.int32), max_seq_length)
    n = len(token_ids)
    assert n <= max_seq_length and want["padding_mask"].numpy()[0].sum() == n
    np.testing.assert_array_equal(want["token_ids"].numpy()[0, :n], token_ids)
    np.testing.assert_array_equal(want["segment_ids"].numpy()[0, :n], segment_ids)

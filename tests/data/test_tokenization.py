"""WordPiece tokenizer: id-for-id parity with BERT's reference tokenizer, packing, vocab errors.

The reference is google-research/bert `FullTokenizer` (master). It is not on PyPI, so it is
assembled from HuggingFace's slow (pure Python) BERT tokenizer, whose character-level pieces are
Google's code, minus two steps where HF departs from Google master:
  * HF's `_clean_text` drops every category C* char (also unassigned Cn and private-use Co);
    Google master drops only Cc and Cf (upstream commit d66a146, "support emojis").
  * HF NFC-normalises the text after cleaning; Google does not.
`_google_tokens` redoes Google's driver with Google's cleaning; whenever neither difference can
matter for a text, the tests also compare against HF's unmodified `tokenize` directly.
"""

import sys
import types
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text as tf_text
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.data import tokenization
from kerasbert.data.tokenization import WordPieceTokenizer, encode_texts, pack_inputs, read_vocab
from kerasbert.errors import InputError


TRICKY = [
    "Héllo wörld, naïve café! Ångström in Zürich. HÉLLO Crème Brûlée",
    "Hello!!!...??? a--b (x)[y]{z} $100 ^_^ `code` ~tilde |pipe| 3.14 1,000,000 2023-01-01",
    "„Anführungszeichen“ — dash… ¿qué? ¡sí! «guillemets» ‹›  ‘single’ ·middot· ※",
    "https://example.com/a?b=c&d=e#f user@mail.org",
    "我爱北京天安门 中文English混合 \U00020000\U0002A700\U0002B820 \uF900\uFA6E \u3007",
    "한국어 텍스트 ひらがな カタカナ 日本語です ｶﾀｶﾅ",
    "™ © ® ° € £ ¥ ½ ² ∑∫√ x² ≤ y ＡＢＣ１２３！",
    "I ❤️ 🐍 👍🏽 👨‍👩‍👧 🇩🇪",
    "a\x00b\x01c\x7fd\x85e \ufffd f\ufffdg \x0bvt\x0cff\x1cfs\x1f",
    "tab\there\nnew\rline non\u00a0breaking\u2003em\u3000ideo\u202fnarrow\u1680ogham",
    "zero\u200bwidth\u200cnon\u200djoin\ufeffbom soft\u00adhyphen line\u2028sep\u2029para",
    "a" * 100 + " " + "b" * 101 + " " + "é" * 101 + " supercalifragilisticexpialidocious" * 3,
    "x" * 250 + "," + "y" * 99 + "!",
    "unaffable qwxzvj \U0010FFFF \ue000 \u0378 xx\ue000yy",
    "McDonald's iPhone XML HTTPRequest eBay",
    "ΟΔΟΣ ΟΔΟΣ. ΑΣ'Β Σ ΣΑ ΑΣ\u00adΒ ΑΣ中 ὈΔΥΣΣΕΎΣ 1Σ'Σ ΑΣ1Σ \ua7a8\u1ac1`Σ",
    "İstanbul ıi STRASSE Straße ẞ ПРИВЕТ Мир Ёж ǅungla Ǉ ΐ ᾼ ᾳ",
    "Kelvin \u212a Ångström-sign \u212b \u1fef \u037e \u0387",
    "a\u0301\u0327\u0323 \u0301leading \u0308 e\u0301 Zu\u0308rich",
    "مرحبا שלום สวัสดี नमस्ते ሰላም",
    "[CLS] [MASK] [UNK] [SEP] [PAD] ##ing",
    "\U00010570\U00010597 \u2c2f \U000105C9 \U00016121",
    "",
    "   ",
    "\t\n\r \u00a0\u2000",
    "\u200b",
]


# ---------------------------------------------------------------------------------------------
# The reference.

def _reference_class():
    transformers = pytest.importorskip("transformers")
    try:  # transformers >= 5: the slow tokenizer was renamed
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
        return BertTokenizerLegacy
    except ImportError:
        return transformers.BertTokenizer


def _reference(vocab_file, do_lower_case):
    return _reference_class()(vocab_file, do_lower_case=do_lower_case,
                              tokenize_chinese_chars=True, strip_accents=None)


def _google_clean(text):
    """google-research/bert master `_clean_text` (drops Cc/Cf only)."""
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\x00\ufffd" or (ch not in "\t\n\r" and cat in ("Cc", "Cf")):
            continue
        out.append(" " if ch in " \t\n\r" or cat == "Zs" else ch)
    return "".join(out)


def _google_tokens(ref, text):
    """google-research/bert master BasicTokenizer + WordpieceTokenizer."""
    basic = ref.basic_tokenizer
    words = []
    for word in basic._tokenize_chinese_chars(_google_clean(text)).split():
        if basic.do_lower_case:
            word = basic._run_strip_accents(word.lower())
        words.extend(basic._run_split_on_punc(word))
    return ref.wordpiece_tokenizer.tokenize(" ".join(words))


def _hf_equals_google(ref, text):
    """True when HF's two departures from Google master cannot matter for `text`."""
    if any(unicodedata.category(ch) in ("Cn", "Co") for ch in text):
        return False
    return unicodedata.is_normalized("NFC", ref.basic_tokenizer._tokenize_chinese_chars(_google_clean(text)))


def _check_parity(tok, ref, texts):
    ours = tok.tokenize_ids(texts).to_list()
    for text, got in zip(texts, ours):
        want = ref.convert_tokens_to_ids(_google_tokens(ref, text))
        assert got == want, (text, tok.ids_to_tokens(got), _google_tokens(ref, text))
        if _hf_equals_google(ref, text):
            assert got == ref.convert_tokens_to_ids(ref._tokenize(text, split_special_tokens=True)), text


# ---------------------------------------------------------------------------------------------
# Fixtures: the official uncased vocab, and a small cased vocab written to a tmp dir.

def _cased_vocab_tokens():
    words = ["Hello", "hello", "He", "##llo", "Z", "##ürich", "##urich", "na", "##ïve", "Å", "##ngström",
             "Crème", "ΟΔΟΣ", "Σ", "##Σ", "##ς", "Mc", "##Donald", "iPhone", "XML", "##ML", "the", "un",
             "##aff", "##able", "中", "文", "한국어", "##어", "™", "İstanbul", "Straße", "STR", "##ASSE",
             "ПРИВЕТ", "e", "##\u0301", "\u0301", "[", "]"]
    chars = sorted({ch for text in TRICKY for ch in text if not ch.isspace()} - set("#"))
    pieces = words + chars + ["##" + ch for ch in chars]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return vocab + [p for p in dict.fromkeys(pieces) if p not in vocab]


@pytest.fixture(scope="module")
def uncased(uncased_vocab):
    return WordPieceTokenizer(uncased_vocab, do_lower_case=True), _reference(uncased_vocab, True)


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "cased_vocab.txt"
    path.write_text("\n".join(_cased_vocab_tokens()) + "\n", encoding="utf-8")
    return WordPieceTokenizer(str(path), do_lower_case=False), _reference(str(path), False)


@pytest.fixture(params=["uncased", "cased"])
def pair(request):
    return request.getfixturevalue(request.param)


# ---------------------------------------------------------------------------------------------
# Parity with the reference.

def test_special_ids_and_vocab(uncased, uncased_vocab):
    tok, _ = uncased
    ids = (tok.vocab_size, tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id)
    assert ids == (30522, 0, 100, 101, 102, 103)
    assert tok.do_lower_case and tok.vocab_file == uncased_vocab
    assert tok.tokenize("Unaffable naïve!") == ["una", "##ffa", "##ble", "naive", "!"]
    assert tok.ids_to_tokens([101, 7592, 102]) == ["[CLS]", "hello", "[SEP]"]


def test_parity_tricky_strings(pair):
    tok, ref = pair
    _check_parity(tok, ref, TRICKY)
    _check_parity(tok, ref, [text.upper() for text in TRICKY] + [text.lower() for text in TRICKY])


def test_batch_equals_one_by_one(uncased):
    tok, _ = uncased
    batch = tok.tokenize_ids(TRICKY).to_list()
    assert batch == [tok.tokenize_ids([text]).to_list()[0] for text in TRICKY]
    assert tok.tokenize_ids([]).to_list() == []


def _boring(cp):
    """Unassigned, private-use or inside a big ideograph block: all handled alike, so sampled."""
    blocks = tokenization._CJK_RANGES + [(0x30000, 0x3134A)]
    if any(a + 64 <= cp <= b - 64 for a, b in blocks):
        return True
    return unicodedata.category(chr(cp)) in ("Cn", "Co", "Cs")


def test_parity_every_code_point(pair):
    """Every assigned code point (and a sample of the boring ones), inside a word."""
    tok, ref = pair
    cps = [cp for cp in range(sys.maxunicode + 1) if not _boring(cp) or cp % 61 == 0]
    cps = [cp for cp in cps if not 0xD800 <= cp <= 0xDFFF]
    texts = [f"A{chr(cp)}b" for cp in cps]
    ours = tok.tokenize_ids(texts).to_list()
    bad = [(hex(cp), got) for cp, text, got in zip(cps, texts, ours)
           if got != ref.convert_tokens_to_ids(_google_tokens(ref, text))]
    assert not bad, bad[:20]


def test_long_words(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##a\né\n##é\n,\n", encoding="utf-8")
    tok = WordPieceTokenizer(str(path), do_lower_case=False)
    assert tok.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert tok.tokenize("a" * 101 + " a") == ["[UNK]", "a"]
    # The limit counts characters, not UTF-8 bytes (é is 2 bytes).
    assert tok.tokenize("é" * 100) == ["é"] + ["##é"] * 99
    assert tok.tokenize("é" * 101) == ["[UNK]"]
    short = WordPieceTokenizer(str(path), do_lower_case=False, max_chars_per_word=3)
    assert short.tokenize("aaa aaaa é,éééé") == ["a", "##a", "##a", "[UNK]", "é", ",", "[UNK]"]
    assert short.tokenize("b aab") == ["[UNK]", "[UNK]"]  # no full match -> one [UNK] per word


def _text_strategy():
    interesting = st.sampled_from(sorted(set("".join(TRICKY))))
    words = st.sampled_from(["the", "un", "##", "able", "hello", "ΟΔΟΣ", "Σ", " ", "  "])
    pieces = st.one_of(st.characters(exclude_categories=("Cs",)), interesting, words)
    return st.lists(pieces, max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=_text_strategy())
def test_parity_random_text_uncased(uncased, text):
    _check_parity(*uncased, [text])


@settings(max_examples=150, deadline=None)
@given(text=_text_strategy())
def test_parity_random_text_cased(cased, text):
    _check_parity(*cased, [text])


# ---------------------------------------------------------------------------------------------
# Lower-casing, and the pinned differences between TF's Unicode tables and Python's.

def _lower(tok, texts):
    return [t.decode() for t in tok._lower(tf.constant(texts)).numpy()]


def test_lowercase_matches_python_for_every_code_point(uncased):
    tok, _ = uncased
    chars = [chr(cp) for cp in range(1, sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    joined = "\n".join(chars)  # "\n" is neither cased nor case-ignorable: no sigma context
    assert _lower(tok, [joined]) == [joined.lower()]
    # Final sigma next to every assigned char (others have no case properties), on either side.
    assigned = [ch for ch in chars if unicodedata.category(ch) not in ("Cn", "Co") and ch != "\n"]
    for probe in ("A{}Σ", "1{}Σ", "AΣ{}", "AΣ{}A", "A{}Σ{}1", "{}Σ"):
        joined = "\n".join(probe.format(ch, ch) for ch in assigned)
        assert _lower(tok, [joined]) == [joined.lower()], probe
    words = ["ΟΔΟΣ", "ΟΔΟΣ.", "Α'Σ", "ΑΣ'", "ΑΣ\u0301", "Α\u0301Σ", "Σ", "ΣΑ", "ΑΣΣ", "ΑΣ.Β",
             "İSTANBUL", "ẞ ß", "ǅ Ǉ", "ΐ ᾼ ῼ", "ПРИВЕТ Ёж", "ÀÉÎÕÜ", "\u2c2f\U00010570\ua7c0"]
    assert _lower(tok, words) == [w.lower() for w in words]


def test_tf_lower_residual_difference_is_pinned():
    """tf.strings.lower's ICU is older than Python 3.11's Unicode 14: it misses the new capitals
    (and new case-ignorable chars, see `_lower_rules`). If this fails, TF has caught up."""
    new_capitals = "\u2c2f\ua7c0\ua7d0\ua7d6\ua7d8\U00010570\U00010595"
    if unicodedata.unidata_version != "14.0.0":
        pytest.skip("pinned for Python's Unicode 14.0")
    raw = tf.strings.lower(tf.constant([new_capitals]), encoding="utf-8").numpy()[0].decode()
    assert raw == new_capitals != new_capitals.lower()
    fixups = tokenization._patterns()[1]
    assert all(chr(k).lower() == chr(v) for k, v in fixups.items())
    assert set(map(ord, new_capitals)) <= set(fixups) and len(fixups) == 40
    # U+1AC1 (new in 14.0) is case-ignorable for Python, not for ICU: ICU would say σ here.
    text = "\ua7a8\u1ac1Σ"
    assert tf.strings.lower(text, encoding="utf-8").numpy().decode() == "\ua7a9\u1ac1σ"
    assert text.lower() == "\ua7a9\u1ac1ς"


def test_tf_nfd_residual_difference_is_pinned(uncased, uncased_vocab):
    """tf_text's NFD (newer ICU) decomposes ~20 code points that Python's Unicode database has
    not assigned (Cn) into other unassigned ones, where Python keeps them. Ids can differ only if
    the vocab lists such code points, which the official one does not."""
    tok, ref = uncased
    chars = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    nfd = [n.decode() for n in tf_text.normalize_utf8(tf.constant(chars), "NFD").numpy()]
    differ = {ch: n for ch, n in zip(chars, nfd) if n != unicodedata.normalize("NFD", ch)}
    assert len(differ) <= 40
    for ch, decomposed in differ.items():
        kept = [c for c in decomposed if unicodedata.category(c) != "Mn"]
        assert unicodedata.category(ch) == "Cn" and kept
        assert all(unicodedata.category(c) == "Cn" for c in kept)
    with open(uncased_vocab, encoding="utf-8") as f:
        assert not any(unicodedata.category(c) == "Cn" for c in set(f.read()))
    texts = [f"x{ch}y" for ch in differ]
    assert tok.tokenize_ids(texts).to_list() == [[tok.unk_id]] * len(differ)
    _check_parity(tok, ref, texts)


def test_invalid_utf8_is_dropped_like_bert(uncased):
    tok, _ = uncased
    raw = [b"abc\xff\xfedef", b"caf\xc3", b"\xed\xa0\x80x", b"\xc0\xafa", b"ab\xe2\x82cd"]
    want = tok.tokenize_ids([b.decode("utf-8", "ignore") for b in raw]).to_list()  # BERT's convert_to_unicode
    assert tok.tokenize_ids(tf.constant(raw)).to_list() == want


def test_hf_departures_from_google_are_pinned(pair):
    """HF's legacy tokenizer drops Cn/Co chars and NFC-normalises; we follow Google master."""
    tok, ref = pair
    for text in ["xx\ue001yy", "ab\u0379"]:  # private use, unassigned: Google keeps -> [UNK]
        assert tok.tokenize_ids([text]).to_list()[0] == [tok.unk_id]
        assert ref._tokenize(text, split_special_tokens=True) != ["[UNK]"]
    if not ref.basic_tokenizer.do_lower_case:  # NFC only matters when accents are not stripped
        text = "e\u0301"
        assert tok.tokenize(text) == _google_tokens(ref, text) == ["e", "##\u0301"]
        assert ref._tokenize(text, split_special_tokens=True) == ["é"]


# ---------------------------------------------------------------------------------------------
# Packing.

IDS = types.SimpleNamespace(cls_id=101, sep_id=102, pad_id=0)


def _ragged(rows):
    return tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)


def _np(packed):
    return {k: v.numpy() for k, v in packed.items()}


def test_pack_single():
    got = _np(pack_inputs(IDS, _ragged([[5, 6, 7], [8], []]), None, 4))
    np.testing.assert_array_equal(got["token_ids"], [[101, 5, 6, 102], [101, 8, 102, 0], [101, 102, 0, 0]])
    np.testing.assert_array_equal(got["segment_ids"], np.zeros([3, 4]))
    np.testing.assert_array_equal(got["padding_mask"], [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]])
    assert all(v.dtype == np.int32 for v in got.values())


def test_pack_pair_truncates_longest_first():
    a = [[1, 2, 3, 4, 5], [1, 2, 3, 4], [1, 2, 3], [1], [1, 2, 3, 4, 5, 6, 7, 8, 9]]
    b = [[6, 7], [5, 6, 7, 8, 9, 10], [4, 5, 6], [2, 3], []]
    got = _np(pack_inputs(IDS, _ragged(a), _ragged(b), 8))  # 5 tokens of budget
    np.testing.assert_array_equal(got["token_ids"], [
        [101, 1, 2, 3, 102, 6, 7, 102],      # A longer: A shrinks to 5 - 2
        [101, 1, 2, 3, 102, 5, 6, 102],      # B longer: both shrink, A keeps ceil(5 / 2)
        [101, 1, 2, 3, 102, 4, 5, 102],      # equal: B loses first
        [101, 1, 102, 2, 3, 102, 0, 0],      # fits: padded
        [101, 1, 2, 3, 4, 5, 102, 102],      # B empty
    ])
    np.testing.assert_array_equal(got["segment_ids"], [
        [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 1]])
    np.testing.assert_array_equal(got["padding_mask"], [[1] * 8] * 3 + [[1] * 6 + [0, 0], [1] * 8])


def _bert_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert run_classifier._truncate_seq_pair, verbatim logic."""
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def test_pack_pair_matches_bert_truncation_on_a_grid():
    lengths = [(la, lb) for la in range(9) for lb in range(9)]
    a = [list(range(1, la + 1)) for la, _ in lengths]
    b = [list(range(50, 50 + lb)) for _, lb in lengths]
    for max_seq_length in range(3, 14):
        got = pack_inputs(IDS, _ragged(a), _ragged(b), max_seq_length)["token_ids"].numpy()
        for row, ta, tb in zip(got, a, b):
            ta, tb = list(ta), list(tb)
            _bert_truncate_seq_pair(ta, tb, max_seq_length - 3)
            want = [101] + ta + [102] + tb + [102]
            assert list(row) == want + [0] * (max_seq_length - len(want)), (max_seq_length, ta, tb)


def test_pack_rejects_no_room():
    with pytest.raises(ValueError):
        pack_inputs(IDS, _ragged([[1]]), _ragged([[2]]), 2)


def test_pack_in_tf_function_and_saved_model(uncased, tmp_path):
    tok, _ = uncased
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    packed = tf.function(lambda a, b: pack_inputs(tok, a, b, 9), input_signature=[spec, spec])
    a, b = _ragged([[1, 2, 3, 4, 5], [7]]), _ragged([[6, 7], [8, 9]])
    for key, value in packed(a, b).items():
        np.testing.assert_array_equal(value, pack_inputs(tok, a, b, 9)[key])
        assert value.shape.as_list() == [2, 9]

    # Raw strings in, packed ids out, through a SavedModel: the vocab table must be tracked.
    module = tf.Module()
    module.tokenizer = tok
    module.encode = tf.function(
        lambda x: pack_inputs(tok, tok.tokenize_ids(x), None, 12),
        input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "model"))
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    texts = ["Héllo, wörld! ΟΔΟΣ", "中文 \U00010570"]
    want = encode_texts(tok, texts, None, 12)
    for key, value in loaded.encode(tf.constant(texts)).items():
        np.testing.assert_array_equal(value.numpy(), want[key])


def test_encode_texts(uncased):
    tok, _ = uncased
    a, b = TRICKY[:7], TRICKY[7:14]
    got = encode_texts(tok, a, b, 32, batch_size=3)
    want = _np(pack_inputs(tok, tok.tokenize_ids(a), tok.tokenize_ids(b), 32))
    for key in want:
        assert got[key].dtype == np.int32 and got[key].shape == (7, 32)
        np.testing.assert_array_equal(got[key], want[key])
    single = encode_texts(tok, ["hello world"], None, 6)
    np.testing.assert_array_equal(single["token_ids"], [[101, 7592, 2088, 102, 0, 0]])
    assert encode_texts(tok, [], None, 6)["token_ids"].shape == (0, 6)
    with pytest.raises(ValueError):
        encode_texts(tok, ["a", "b"], ["c"], 6)


# ---------------------------------------------------------------------------------------------
# Vocab errors.

@pytest.mark.parametrize("content, message", [
    (None, "not found"),
    (b"", "empty"),
    (b"[PAD]\n[UNK]\n\xff\xfe\n", "not UTF-8"),
    ("[PAD]\n[UNK]\nhello\n[SEP]\n".encode(), "[CLS] [MASK]"),
])
def test_read_vocab_errors(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError, match="vocab") as info:
        read_vocab(str(path))
    assert str(path) in str(info.value) and message in str(info.value)
    with pytest.raises(InputError):
        WordPieceTokenizer(str(path))


def test_read_vocab_ok(uncased_vocab):
    vocab = read_vocab(uncased_vocab)
    assert len(vocab) == 30522 and vocab[:1] == ["[PAD]"] and vocab[101:104] == ["[CLS]", "[SEP]", "[MASK]"]

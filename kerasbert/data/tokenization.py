"""BERT WordPiece tokenization as TensorFlow ops.

Reproduces google-research/bert's `tokenization.FullTokenizer` id for id, as TF ops, so that one
code path serves eager feature building (Python lists in) and exported SavedModels (raw strings
in). BERT's pipeline, per text:

  1. clean: drop U+0000, U+FFFD and control chars (Cc, Cf) except \\t \\n \\r;
     map \\t \\n \\r and Zs spaces to " "
  2. put spaces around CJK ideographs (BERT's `_is_chinese_char` ranges: not Hangul, not kana)
  3. split on whitespace; uncased only: str.lower(), NFD, drop Mn (accents)
  4. split on punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and Unicode P*), a token per char
  5. greedy longest-match-first WordPiece with "##" continuations; a word over 100 chars, or
     one without a full match, becomes a single [UNK]

Why not tf_text.BertTokenizer or keras-hub's tokenizer: they lower-case with NFKC case folding
(BERT does not: "™" becomes "t ##m", Hangul [UNK]), and their character classes come from RE2's
Unicode tables, an older Unicode version than the Python `unicodedata` that BERT runs on. So every
character class here is spelled out from the running Python's `unicodedata`, and ICU's
tf.strings.lower gets two corrections (see `_lower_rules`).

Residual difference (pinned in tests/data/test_tokenization.py): tf_text's NFD (a newer ICU)
decomposes ~20 code points that Python 3.11's Unicode 14 has not assigned yet (Todhri, Gurung
Khema, ...) into other unassigned ones. Words holding them become [UNK] either way, unless the
vocab lists such code points (the official vocabs do not).

HuggingFace's slow BertTokenizer departs from google-research/bert master in two ways that we do
not follow: it drops every category C* char (Google: only Cc and Cf, so here unassigned and
private-use chars become [UNK]), and it NFC-normalises (matters for decomposed text such as
"e\\u0301" in cased mode).
"""

import functools
import sys
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert import storage
from kerasbert.errors import InputError, at

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")

# BERT's `_is_chinese_char`: CJK Unified Ideographs (+ extensions) and compatibility ideographs.
_CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def read_vocab(vocab_file):
    """Reads a BERT vocab file (one token per line, id = line number) into a list of tokens."""
    where = at(vocab_file)
    try:
        with storage.open_file(vocab_file) as f:  # a run's encoder/ may be on gs://
            tokens = [line.strip() for line in f]  # .strip() like BERT's load_vocab
    except FileNotFoundError:
        raise InputError(f"{where}vocab file not found") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{where}vocab file is not UTF-8 ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise InputError(f"{where}cannot read vocab file: {e.strerror}") from None
    if not tokens:
        raise InputError(f"{where}vocab file is empty")
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise InputError(f"{where}vocab lacks the special tokens {' '.join(missing)}")
    return tokens


# ----------------------------------------------------------------------------------------------
# Character classes from Python's unicodedata, as RE2 bracket expressions.

def regex_class(codepoints):
    """Sorted code points -> '[\\x{a}-\\x{b}...]', one range per run of consecutive ones."""
    parts, start, prev = [], None, None
    for cp in list(codepoints) + [None]:
        if start is not None and (cp is None or cp != prev + 1):
            parts.append(f"\\x{{{start:X}}}" + (f"-\\x{{{prev:X}}}" if prev > start else ""))
            start = None
        if start is None:
            start = cp
        prev = cp
    return "[" + "".join(parts) + "]"


def _is_punctuation(ch):
    cp = ord(ch)  # BERT counts all non-alphanumeric ASCII as punctuation, e.g. "$" "^" "`"
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(ch).startswith("P"))


@functools.lru_cache(maxsize=None)
def _patterns():
    """(regexes of the pipeline, lower-casing fixups); built once per process, ~1-2 s."""
    drop, space, mn, punct, split, assigned = [], [], [], [], [], []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cn", "Co", "Cs"):  # no properties; surrogates cannot even occur in UTF-8
            continue
        assigned.append(ch)
        if ch in "\t\n\r" or cat == "Zs":
            space.append(cp)
        elif cp in (0, 0xFFFD) or cat in ("Cc", "Cf"):
            drop.append(cp)
        if cat == "Mn":
            mn.append(cp)
        if _is_punctuation(ch):
            punct.append(cp)
        if ch.isspace():  # what str.split() splits on; after cleaning only " " U+2028 U+2029 remain
            split.append(cp)
    punct = regex_class(punct)
    sigma_not_after_cased, sigma_final, lower_fixups = _lower_rules(assigned)
    regexes = dict(
        drop=regex_class(drop), space=regex_class(space), mn=regex_class(mn), punct=punct,
        cjk="[" + "".join(f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in _CJK_RANGES) + "]",
        split=f"{regex_class(split)}+|{punct}",
        sigma_not_after_cased=sigma_not_after_cased, sigma_final=sigma_final)
    return regexes, lower_fixups


def _lower_rules(assigned):
    """What tf.strings.lower (ICU) needs to equal Python's str.lower, given the assigned chars.

    ICU's case tables are an older Unicode version than Python's, which shows twice:
      * capitals new in Unicode 14 (~40) stay as they are: returns a code point map for them.
      * The final-sigma rule (Σ -> ς at the end of a word, else σ) skips "case-ignorable" chars
        and looks for "cased" ones, two properties that grew since. So Σ is lower-cased before
        ICU sees it, by regexes over Python's own properties (probed through str.lower, as
        unicodedata does not expose them): Σ is final iff the nearest non-ignorable char before
        it is cased and the nearest one after it is not.
    """
    probe = [c for c in assigned if c != "\n"]  # "\n" separates probes, neither cased nor ignorable
    after_cased = "\n".join(f"A{c}Σ" for c in probe).lower().split("\n")  # ς: c ignorable/cased
    after_other = "\n".join(f"1{c}Σ" for c in probe).lower().split("\n")  # ς: c cased, not ign.
    ignorable = [ord(c) for c, x, y in zip(probe, after_cased, after_other) if x[-1] == "ς" != y[-1]]
    cased = [ord(c) for c, y in zip(probe, after_other) if y[-1] == "ς"]
    ign, other = regex_class(ignorable), "[^" + regex_class(sorted(ignorable + cased))[1:]
    lowered = [c for c in assigned if c.lower() != c]
    tf_lowered = tf.strings.lower(lowered, encoding="utf-8").numpy()
    # (ord() would raise on a multi-char lower-casing; the only one, "İ", ICU gets right.)
    fixups = {ord(c): ord(c.lower()) for c, t in zip(lowered, tf_lowered) if t.decode() != c.lower()}
    return (f"((?:^|{other}){ign}*)Σ",  # Σ not after a cased char -> σ
            f"Σ({ign}*(?:{other}|$))",  # of the rest: Σ not before a cased char -> ς; others -> σ
            fixups)


class WordPieceTokenizer(tf.Module):
    """BERT's FullTokenizer as TF ops. A tf.Module, so that a SavedModel tracks its tables."""

    def __init__(self, vocab_file, do_lower_case=True, max_chars_per_word=100):
        super().__init__(name="wordpiece_tokenizer")
        self.vocab_file = str(vocab_file)
        self.do_lower_case = bool(do_lower_case)
        self.max_chars_per_word = int(max_chars_per_word)
        self.vocab = read_vocab(self.vocab_file)
        self.vocab_size = len(self.vocab)
        ids = {t: i for i, t in enumerate(self.vocab)}  # a repeated token keeps its last id, as in BERT
        self.cls_id, self.sep_id, self.pad_id, self.unk_id, self.mask_id = map(ids.get, SPECIAL_TOKENS)
        self._regex, fixups = _patterns()
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(list(ids), list(ids.values()), tf.string, tf.int64), -1)
        if self.do_lower_case:  # ([-1] -> -1: a non-empty table when there is nothing to fix)
            self._lower_table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                list(fixups) or [-1], list(fixups.values()) or [-1], tf.int32, tf.int32), -1)
        # Words over max_chars_per_word chars become "[UNK]" before they get here, so the byte
        # limit (4 bytes per char at most) never triggers on its own.
        self._wordpiece = tf_text.WordpieceTokenizer(
            self._table, suffix_indicator="##", max_bytes_per_word=4 * self.max_chars_per_word,
            token_out_type=tf.int64, unknown_token="[UNK]", split_unknown_characters=False)

    def _lower(self, text):
        """Python's str.lower on UTF-8 strings, see `_lower_rules`."""
        text = tf.strings.regex_replace(text, self._regex["sigma_not_after_cased"], r"\1σ")
        text = tf.strings.regex_replace(text, self._regex["sigma_final"], r"ς\1")
        text = tf.strings.regex_replace(text, "Σ", "σ")
        cps = tf.strings.unicode_decode(text, "UTF-8")
        fixed = self._lower_table.lookup(cps.flat_values)
        cps = cps.with_flat_values(tf.where(fixed >= 0, fixed, cps.flat_values))
        return tf.strings.lower(tf.strings.unicode_encode(cps, "UTF-8"), encoding="utf-8")

    def words(self, texts):
        """Steps 1-4: [batch] strings -> ragged [batch, (words)] strings."""
        p = self._regex
        # Invalid UTF-8 bytes are dropped, like BERT's convert_to_unicode(bytes) does.
        x = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="ignore")
        x = tf.strings.regex_replace(x, p["drop"], "")
        x = tf.strings.regex_replace(x, p["space"], " ")
        x = tf.strings.regex_replace(x, p["cjk"], r" \0 ")
        if self.do_lower_case:
            # BERT lower-cases word by word; doing the whole text is the same, since the only
            # context-dependent rule (final sigma) treats a space like the end of the text.
            x = self._lower(x)
            x = tf.strings.regex_replace(tf_text.normalize_utf8(x, "NFD"), p["mn"], "")
        return tf_text.regex_split(x, p["split"], p["punct"])

    def tokenize_ids(self, texts):
        """[batch] strings (tensor or list) -> int32 ragged [batch, (pieces)] of vocab ids."""
        return self._tokenize_ids(tf.convert_to_tensor(texts, tf.string))

    # A tf.function even when called eagerly: the regexes then compile once, not on every call.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def _tokenize_ids(self, texts):
        words = self.words(texts)
        too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > self.max_chars_per_word
        words = words.with_flat_values(tf.where(too_long, "[UNK]", words.flat_values))
        pieces = self._wordpiece.tokenize(words)  # [batch, (words), (pieces)]
        return tf.cast(pieces.merge_dims(1, 2), tf.int32)

    def tokenize(self, text):
        """The word-piece strings of one Python string."""
        return self.ids_to_tokens(self.tokenize_ids([text])[0].numpy())

    def ids_to_tokens(self, ids):
        return [self.vocab[int(i)] for i in ids]


def pack_inputs(tokenizer, ids_a, ids_b, max_seq_length):
    """[CLS] A [SEP] (B [SEP]) -> dense int32 [batch, max_seq_length] "token_ids",
    "segment_ids" (1 for B and its [SEP]) and "padding_mask" (1 for real tokens).

    Pairs are truncated like BERT's _truncate_seq_pair: while too long, drop the last token of A
    if len(A) > len(B), else of B. In closed form, with a budget of m = max_seq_length - 3: if
    len(A) >= len(B), B keeps min(len(B), m // 2) and A fills the rest; else A keeps
    min(len(A), m - m // 2) and B fills the rest.
    """
    if max_seq_length < (2 if ids_b is None else 3):
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for the special tokens")
    ids_a = tf.cast(ids_a, tf.int32)
    cls = tf.fill([ids_a.nrows(), 1], tokenizer.cls_id)
    sep = tf.fill([ids_a.nrows(), 1], tokenizer.sep_id)
    if ids_b is None:
        a = ids_a[:, : max_seq_length - 2]
        token_ids = tf.concat([cls, a, sep], axis=1)
        segment_ids = tf.zeros_like(token_ids)
    else:
        ids_b = tf.cast(ids_b, tf.int32)
        m = max_seq_length - 3
        len_a, len_b = ids_a.row_lengths(), ids_b.row_lengths()
        a_longer = len_a >= len_b
        keep_a = tf.where(a_longer, tf.minimum(len_a, m - tf.minimum(len_b, m // 2)),
                          tf.minimum(len_a, m - m // 2))
        keep_b = tf.minimum(len_b, m - keep_a)
        a = tf.ragged.boolean_mask(ids_a, tf.ragged.range(len_a) < keep_a[:, None])
        b = tf.ragged.boolean_mask(ids_b, tf.ragged.range(len_b) < keep_b[:, None])
        token_ids = tf.concat([cls, a, sep, b, sep], axis=1)
        segment_ids = tf.concat([tf.zeros_like(cls), tf.zeros_like(a), tf.zeros_like(sep),
                                 tf.ones_like(b), tf.ones_like(sep)], axis=1)
    shape = [None, max_seq_length]
    return {
        "token_ids": token_ids.to_tensor(tokenizer.pad_id, shape=shape),
        "segment_ids": segment_ids.to_tensor(0, shape=shape),
        "padding_mask": tf.ones_like(token_ids).to_tensor(0, shape=shape),
    }


def encode_texts(tokenizer, texts_a, texts_b, max_seq_length, batch_size=1024):
    """Eager convenience: lists of texts -> dict of numpy int32 [n, max_seq_length] arrays."""
    if texts_b is not None and len(texts_b) != len(texts_a):
        raise ValueError(f"texts_a has {len(texts_a)} texts but texts_b has {len(texts_b)}")
    keys = ("token_ids", "segment_ids", "padding_mask")
    chunks = {k: [np.zeros([0, max_seq_length], np.int32)] for k in keys}
    for i in range(0, len(texts_a), batch_size):
        ids_a = tokenizer.tokenize_ids(list(texts_a[i: i + batch_size]))
        ids_b = None if texts_b is None else tokenizer.tokenize_ids(list(texts_b[i: i + batch_size]))
        for k, v in pack_inputs(tokenizer, ids_a, ids_b, max_seq_length).items():
            chunks[k].append(v.numpy())
    return {k: np.concatenate(v).astype(np.int32) for k, v in chunks.items()}

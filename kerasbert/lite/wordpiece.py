"""BERT's WordPiece tokenization in plain Python, for serving without TensorFlow.

The same steps as kerasbert/data/tokenization.py (google-research/bert's FullTokenizer),
written with `str` methods and `unicodedata` instead of TF ops:
clean (drop U+0000, U+FFFD, Cc and Cf but \\t \\n \\r; whitespace and Zs become " "), spaces
around CJK ideographs, split on whitespace, uncased: lower() + NFD without Mn, a token per
punctuation character, then greedy longest-match-first WordPiece with "##" continuations
(a word over 100 characters, or one with no full match, is one [UNK]). Tested id for id
against the TF tokenizer on the same vocabulary.
"""

import string
import unicodedata

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# Steps 1-4 for ASCII text in one str.translate: controls dropped (all of them are Cc), \t \n
# \r made spaces, spaces put around each punctuation mark (ASCII's are exactly
# string.punctuation); lower() and NFD need no Unicode tables there. Most text is ASCII.
_ASCII_STEPS = str.maketrans({**{chr(c): None for c in (*range(32), 127) if c not in (9, 10, 13)},
                              "\t": " ", "\n": " ", "\r": " ",
                              **{p: f" {p} " for p in string.punctuation}})


def _is_cjk(cp):
    return any(low <= cp <= high for low, high in _CJK_RANGES)


def _is_punctuation(ch):
    cp = ord(ch)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(ch).startswith("P"))


def _clean(text):
    out = []
    for ch in text:
        if ch in "\x00\ufffd":
            continue
        category = unicodedata.category(ch)
        if ch in "\t\n\r" or ch == " " or category == "Zs":
            out.append(" ")
        elif category in ("Cc", "Cf"):
            continue
        elif _is_cjk(ord(ch)):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    return "".join(out)


def read_vocab(path):
    """The vocabulary file's tokens, id = line number (lines stripped, as BERT reads them)."""
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f]


class WordPiece:
    """`ids(text)`: the vocabulary ids of one text's word pieces."""

    def __init__(self, vocab, do_lower_case=True, max_chars_per_word=100):
        self.ids_of = {token: i for i, token in enumerate(vocab)}  # a repeat keeps its last id
        self.do_lower_case = do_lower_case
        self.max_chars_per_word = max_chars_per_word
        self.cls_id, self.sep_id, self.pad_id, self.unk_id, self.mask_id = (
            self.ids_of.get(t) for t in SPECIAL_TOKENS)
        self._cache = {}  # word -> its piece ids; words repeat a lot in any corpus

    def words(self, text):
        """Steps 1-4: the text's words and punctuation marks."""
        if text.isascii():
            text = text.translate(_ASCII_STEPS)
            return (text.lower() if self.do_lower_case else text).split()
        words = []
        for word in _clean(text).split():
            if self.do_lower_case:
                word = "".join(ch for ch in unicodedata.normalize("NFD", word.lower())
                               if unicodedata.category(ch) != "Mn")
            piece = []
            for ch in word:
                if _is_punctuation(ch):
                    if piece:
                        words.append("".join(piece))
                        piece = []
                    words.append(ch)
                else:
                    piece.append(ch)
            if piece:
                words.append("".join(piece))
        return words

    def _word_ids(self, word):
        if len(word) > self.max_chars_per_word:
            return [self.unk_id]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.ids_of.get(piece)
                if found is not None:
                    break
                end -= 1
            else:
                return [self.unk_id]
            ids.append(found)
            start = end
        return ids

    def ids(self, text):
        out = []
        for word in self.words(text):
            cached = self._cache.get(word)
            if cached is None:
                if len(self._cache) >= 200_000:  # a long-running server: bounded
                    self._cache.clear()
                cached = self._cache[word] = self._word_ids(word)
            out.extend(cached)
        return out

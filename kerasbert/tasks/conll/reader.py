"""CoNLL-2003 files as Sentences: columns, IOB1 or IOB2 tags (kept as IOB2, `fix_scheme`),
`-DOCSTART-` documents; an error in a file is an InputError naming the file and line."""

import dataclasses
import logging
import re
from typing import Sequence

from kerasbert.errors import InputError, at
from kerasbert.io_utils import iter_utf8_lines
from kerasbert.tasks.base import Example

log = logging.getLogger(__name__)

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")
# tensorflow_datasets' conll2003 `ner` ClassLabel names, in its id order
# (tensorflow_datasets/core/dataset_builders/conll/conll_dataset_builder_utils.py NER_TAGS).
TFDS_NER_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
TFDS_SPLITS = {"train": "train", "valid": "dev", "test": "test"}
SCHEMES = ("auto", "iob1", "iob2")
DOCSTART = "-DOCSTART-"
_FIELDS = re.compile(r"[ \t]+")  # columns are space-separated; a word never holds a space
DOCUMENT_BREAK = ()  # what _parse_columns yields for a -DOCSTART- line


@dataclasses.dataclass(frozen=True)
class Sentence(Example):
    """One sentence: `words`, IOB2 tags in `label` (a tuple, None if unknown), and the file
    line of its first word (`line`) for messages. `text_a` is the words joined by spaces.
    `document`: the number of its `-DOCSTART-` document in the file (0, 1, ...; consecutive
    sentences with the same number share a document, what --document_context reads); None
    for a sentence of no document (it gets no context)."""

    words: tuple[str, ...] = ()
    line: int = 0
    document: int | None = None


# ---- reading ---------------------------------------------------------------------------------


def _read_lines(path: str):
    return iter_utf8_lines(path, "CoNLL")  # streamed: one line in memory at a time


def _parse_columns(path: str, lines):
    """Yields (line number, fields) of word lines, (line number, None) at blank lines and
    (line number, DOCUMENT_BREAK) at -DOCSTART- lines (both end a sentence).
    Every word line has as many columns as the first (conlleval refuses a file that mixes
    them): another count is an InputError (a one-column line is left to the caller)."""
    first = None  # (columns, line number) of the first word line
    for number, line in enumerate(lines, start=1):
        line = line.strip(" \t\r\n")
        fields = _FIELDS.split(line) if line else []
        if not fields or fields[0] == DOCSTART:
            yield number, DOCUMENT_BREAK if fields else None
            continue
        if len(fields) > 1:
            first = first or (len(fields), number)
            if len(fields) != first[0]:
                raise InputError(
                    f"{at(path, number)}{len(fields)} columns, but line {first[1]} has "
                    f"{first[0]}; every line of the file has the same columns (`word POS "
                    f"chunk NER`, the tag last): {line!r}")
        yield number, fields


def read_columns(path: str):
    """`_parse_columns` of a whole file, streamed (prediction files are read so too)."""
    return _parse_columns(path, _read_lines(path))


def iter_document_sentences(path: str, labels: Sequence[str] = LABELS):
    """The (document, words, tags, line numbers) of a CoNLL file one sentence at a time,
    tags as written; a bad line is an InputError when it is reached. `document` counts the
    -DOCSTART- lines that follow a sentence (0 up to the first such line)."""
    words, tags, lines = [], [], []
    document, in_document = 0, False  # in_document: a sentence of `document` was seen
    for number, fields in _parse_columns(path, _read_lines(path)):
        if not fields:
            if words:
                yield document, words, tags, lines
                words, tags, lines = [], [], []
                in_document = True
            if fields == DOCUMENT_BREAK and in_document:
                document, in_document = document + 1, False
            continue
        if len(fields) < 2:
            raise InputError(
                f"{at(path, number)}expected a word and its NER tag (`word POS chunk NER`, the "
                f"tag last), found one column: {fields[0]!r}")
        if fields[-1] not in labels:
            raise InputError(
                f"{at(path, number)}{fields[-1]!r} is not a CoNLL-2003 NER tag; expected one of "
                f"{', '.join(labels)}")
        words.append(fields[0])
        tags.append(fields[-1])
        lines.append(number)
    if words:  # the last sentence may lack its trailing blank line
        yield document, words, tags, lines


def iter_sentences(path: str, labels: Sequence[str] = LABELS):
    """The (words, tags, line numbers) of a CoNLL file one sentence at a time, tags as
    written; a bad line is an InputError when it is reached."""
    for _, words, tags, lines in iter_document_sentences(path, labels):
        yield words, tags, lines


def read_sentences(path: str, labels: Sequence[str] = LABELS):
    """Reads a CoNLL file into a list of (words, tags, line numbers), tags as written."""
    return list(iter_sentences(path, labels))


def _entity_starts(tags):
    """Indices where an I- tag starts an entity, and where a B- tag follows O / another type.

    The first kind exists only in IOB1 (or is an error in IOB2); the second only in IOB2 (in
    IOB1, B- appears only between two adjacent entities of the same type).
    """
    i_starts, b_starts = [], []
    previous = "O"
    for i, tag in enumerate(tags):
        same_type = previous != "O" and previous[2:] == tag[2:]
        if tag.startswith("I-") and not same_type:
            i_starts.append(i)
        elif tag.startswith("B-") and not same_type:
            b_starts.append(i)
        previous = tag
    return i_starts, b_starts


class SchemeCheck:
    """The tag scheme of sentences seen one at a time (see fix_scheme for the rules):
    `add` each sentence's tags, then `finish` (the verdict needs every sentence)."""

    def __init__(self, where: str, scheme: str = "auto"):
        if scheme not in SCHEMES:
            raise InputError(f"tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
        self.where, self.scheme, self.found = where, scheme, None
        self.i_count, self.first_i, self.first_b = 0, None, None  # (line, tag) of the first

    def add(self, tags, lines) -> list[int]:
        """Records one sentence; returns the indices of its I- tags that start an entity
        (the ones IOB2 spells B-)."""
        i, b = _entity_starts(tags)
        self.i_count += len(i)
        if i and self.first_i is None:
            self.first_i = lines[i[0]], tags[i[0]]
        if b and self.first_b is None:
            self.first_b = lines[b[0]], tags[b[0]]
        return i

    def finish(self) -> str:
        """Returns "IOB1" or "IOB2"; an InputError where a declared scheme is contradicted."""
        where = self.where
        if self.scheme == "iob2" and self.first_i:
            line, tag = self.first_i
            raise InputError(f"{at(where, line)}{tag} starts an entity, which IOB2 does not "
                             f"allow (it would be B-{tag[2:]}); is the file IOB1?")
        if self.scheme == "iob1" and self.first_b:
            line, tag = self.first_b
            raise InputError(f"{at(where, line)}{tag} starts an entity after O or another type, "
                             f"which IOB1 does not allow; is the file IOB2?")
        found = "IOB1" if self.first_i and not self.first_b else "IOB2"
        if found == "IOB2" and self.first_i:
            log.warning("%s%d I- tag(s) start an entity in IOB2 data (first at line %d); read "
                        "as B- tags, as conlleval does", at(where), self.i_count,
                        self.first_i[0])
        log.info("%stag scheme %s%s", at(where), found,
                 ", converted to IOB2" if found == "IOB1" else "")
        self.found = found
        return found


def _as_iob2(tags, i_starts):
    for k in i_starts:  # in both schemes, an I-X that starts an entity is B-X in IOB2
        tags[k] = "B-" + tags[k][2:]


def fix_scheme(sentences, where: str, scheme: str = "auto") -> str:
    """Detects the tag scheme of `sentences` (see read_sentences) and rewrites them to IOB2.

    IOB1 (the original CoNLL-2003 release): I-X throughout, B-X only for an entity right after
    another X. IOB2 (most copies today, incl. the usual train/valid/test.txt): every entity
    starts with B-. "auto" reads IOB1 when some I- tag starts an entity and no B- tag starts
    one after O or another type (which IOB1 never does); otherwise IOB2.
    In both, an I-X that starts an entity becomes B-X, which is how conlleval reads it anyway.
    Auto-detected IOB2 data with such I- tags is repaired with one counted warning; a declared
    scheme ("iob1" / "iob2") that the data contradicts is an InputError at the first bad line.
    Returns "IOB1" or "IOB2", the scheme found.
    """
    check = SchemeCheck(where, scheme)
    starts = [check.add(tags, lines) for _, tags, lines in sentences]
    found = check.finish()
    for (_, tags, _), i_starts in zip(sentences, starts):
        _as_iob2(tags, i_starts)
    return found


def iter_conll_file(path: str, split: str, check: SchemeCheck):
    """The Sentences of one CoNLL-2003 file one at a time, tags rewritten to IOB2 as they
    are read (the rewrite does not depend on the scheme), each added to `check`; the errors
    of read_conll_file as their lines are reached, except the scheme's, which need the whole
    file: call `check.finish()` after the last sentence. What --stream_train_data reads."""
    n = -1
    for n, (document, words, tags, lines) in enumerate(iter_document_sentences(path)):
        _as_iob2(tags, check.add(tags, lines))
        yield Sentence(guid=f"{split}-{n}", text_a=" ".join(words), label=tuple(tags),
                       words=tuple(words), line=lines[0], document=document)
    if n < 0:
        raise InputError(f"{at(path)}no sentences (expected `word POS chunk NER` lines)")


def read_conll_file(path: str, split: str = "train", scheme: str = "auto"):
    """Reads one CoNLL-2003 file. Returns (list of Sentence with IOB2 tags, scheme found)."""
    check = SchemeCheck(path, scheme)
    sentences = list(iter_conll_file(path, split, check))
    return sentences, check.finish()

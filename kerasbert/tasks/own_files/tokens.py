"""token_classification: a tag per word (NER, POS, ...) with any tag set, from CoNLL-style
column files (one word a line, a blank line between sentences; the tag in the last column
or --label_column_index) or JSON Lines with `tokens` and `tags` arrays. Everything after
reading (word-piece alignment, windows, seqeval's entity metrics, the served tags) is the
CoNLL-2003 task's."""

import os

from kerasbert.errors import InputError, at
from kerasbert.tasks.base import bundled_sample
from kerasbert.tasks.conll.reader import DOCUMENT_BREAK, SchemeCheck, Sentence, read_columns
from kerasbert.tasks.conll.task import ConllTask
from kerasbert.tasks.own_files.files import OwnFiles
from kerasbert.tasks.own_files.labels import LabelTypes, as_name, label_names
from kerasbert.tasks.own_files.table import json_lines

JSON_EXTENSIONS = (".jsonl", ".json")


class TokenTask(OwnFiles, ConllTask):
    """A tag per word from the user's files; CoNLL-2003's features, metrics and serving."""

    name = "token_classification"
    description = "a tag per word (NER, ...), from CoNLL-style column files or JSON Lines"
    extensions = (".jsonl", ".json", ".txt", ".conll", ".tsv")
    option_names = ("document_context", "label_column_index", "data_dir", "train_file",
                    "validation_file", "predict_file", "test_file", "label_list")
    scored_test_splits = ("test",)  # a test file with tags is scored too
    label_list = None
    decides_labels = True

    def __init__(self):
        super().__init__()
        self.label_column_index = None
        self.files = {}

    def __repr__(self):
        return "TokenTask()"

    def _check_split(self, split):
        if split not in ("train", *self.dev_splits, *self.test_splits):
            raise InputError(f"{self.name}: unknown split {split!r}")

    def configure(self, document_context=None, label_column_index=None, **options):
        options = self.configure_files(options)
        self.label_column_index = label_column_index
        if self.files.get("label_list"):
            self.label_list = label_names(self.files["label_list"])
        return super().configure(document_context=document_context, **options)

    def check_config(self, config) -> None:
        OwnFiles.check_config(self, config)
        ConllTask.check_config(self, config)

    def sample_dir(self) -> str:
        return bundled_sample(self.name)

    @property
    def can_stream(self) -> bool:
        return False  # read whole (the CoNLL-2003 streaming reader knows only its own tags)

    def read_tfds(self, split, data_dir=None):
        raise InputError(f"--use_tfds: the {self.name} task reads your files")

    # ---- reading ----

    def read_split_file(self, path: str, split: str) -> list[Sentence]:
        labelled = split not in self.test_splits
        if os.path.splitext(path)[1].lower() in JSON_EXTENSIONS:
            sentences = list(_json_sentences(path, labelled))
        else:
            sentences = list(_column_sentences(path, self.label_column_index))
        if not sentences:
            raise InputError(f"{at(path)}empty file: expected sentences")
        tagged = [s for s in sentences if s[1] is not None]
        if tagged and len(tagged) != len(sentences):
            line = next(lines[0] for _, tags, lines, _ in sentences if tags is None)
            raise InputError(f"{at(path, line)}a sentence without tags in a file whose other "
                             "sentences have them")
        if labelled and not tagged:
            raise InputError(f"{at(path)}no tags (the {split} split needs them: `tags` arrays "
                             "or a tag column)")
        check = SchemeCheck(path, self.scheme)
        types = LabelTypes(path)
        result = []
        for n, (words, tags, lines, document) in enumerate(sentences):
            if tags is not None:
                for tag, line in zip(tags, lines):
                    types.add(tag, line)
                tags = [as_name(tag) for tag in tags]
                for k in check.add(tags, lines):  # IOB1's entity-starting I-X is B-X
                    tags[k] = "B-" + tags[k][2:]
            result.append(Sentence(guid=f"{split}-{n}", text_a=" ".join(words),
                                   label=None if tags is None else tuple(tags),
                                   words=tuple(words), line=lines[0], document=document))
        if tagged:
            self.schemes_found[split] = check.finish()
        return result

    def labels_of(self, sentences, path):
        return [(tag, s.line) for s in sentences if s.label is not None for tag in s.label]


def _json_sentences(path, labelled):
    """(words, tags or None, line numbers, None) per line of a JSON Lines file."""
    for number, row in json_lines(path):
        if not isinstance(row, dict) or "tokens" not in row:
            has = ", ".join(map(repr, row)) if isinstance(row, dict) else type(row).__name__
            raise InputError(f"{at(path, number)}expected a `tokens` array (and `tags`); the "
                             f"line has: {has}")
        words, tags = row["tokens"], row.get("tags")
        if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
            raise InputError(f"{at(path, number)}`tokens` must be an array of non-empty strings")
        if tags is not None and (not isinstance(tags, list) or len(tags) != len(words)):
            raise InputError(f"{at(path, number)}`tags` must be an array with one tag per "
                             f"token ({len(words)} tokens)")
        if not words:
            continue
        yield words, tags, [number] * len(words), None


def _column_sentences(path, label_index):
    """(words, tags, line numbers, document) per sentence of a CoNLL-style column file;
    a one-column file (words only) gives tags None."""
    words, tags, lines, document, in_document = [], [], [], 0, False
    for number, fields in read_columns(path):
        if not fields:
            if words:
                yield words, (tags if all(t is not None for t in tags) else None), lines, document
                words, tags, lines, in_document = [], [], [], True
            if fields == DOCUMENT_BREAK and in_document:
                document, in_document = document + 1, False
            continue
        index = len(fields) - 1 if label_index is None else label_index
        if label_index is not None and label_index >= len(fields):
            raise InputError(f"{at(path, number)}--label_column_index={label_index}, but the "
                             f"line has {len(fields)} columns (0 to {len(fields) - 1})")
        words.append(fields[0])
        tags.append(fields[index] if len(fields) > 1 else None)
        lines.append(number)
    if words:
        yield words, (tags if all(t is not None for t in tags) else None), lines, document


TASK = TokenTask()

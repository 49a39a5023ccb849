"""A kerasbert LiteRT export, served from raw text without TensorFlow.

    from kerasbert.lite import LiteModel
    model = LiteModel("exports/sst2-lite/1")          # model.tflite, vocab.txt, serving.json
    model.predict("a gripping film")                  # {"label": "1", "probabilities": {...}}
    model.predict(["a gripping film", "dull"])        # a list of such dicts
    mrpc.predict(("A man runs.", "A person moves."))  # pair tasks: (a, b) tuples
    ner.predict("John lives in Berlin .")             # {"words": [...], "tags": ["B-PER", ...]}
    squad.predict(("Who?", "Ada wrote it."))          # {"answer": "Ada", "score", "start", "end"}
    model.serve(["a gripping film", "dull"])          # a server's batch: serving_default's arrays

`predict` takes and gives what `kerasbert.load(run_dir).predict` does (FineTunedModel, the
same run in TensorFlow); `serve(text_a, text_b=None)` takes columns (questions and contexts
for SQuAD) and gives the SavedModel's serving_default outputs as arrays.

What `python -m kerasbert.export.litert` writes: the run's encoder and head as a TFLite
flatbuffer (token ids in, the head's outputs out), its vocabulary, and serving.json (the
task's kind, labels, max_seq_length, casing). This process imports numpy, the LiteRT
interpreter (`pip install ai-edge-litert`) and kerasbert/lite/ only: no TensorFlow, so it
starts in a fraction of a second and holds a fraction of the memory a SavedModel needs.
Answers are those of the SavedModel's serving_default (tested to 1e-5): WordPiece here is
kerasbert's own, in plain Python (wordpiece.py); each batch is padded to its longest row.
Tagging runs tag whitespace words as the SavedModel does (kerasbert/tasks/conll/serving.py):
each word word-pieced on its own, long sentences cut into the run's overlapping windows of
whole words (kerasbert/word_windows.py), each word read at its first piece in the window
where it has the most context. Span (SQuAD) runs answer a question about a context as the
SavedModel does, windows and n-best decoding included (spans.py).
"""

import json
import os

import numpy as np

from kerasbert import host
from kerasbert.lite import spans
from kerasbert.lite.wordpiece import WordPiece, read_vocab
from kerasbert.word_windows import best_windows, windows

MODEL_FILE = "model.tflite"
VOCAB_FILE = "vocab.txt"
SERVING_FILE = "serving.json"
KINDS = ("classification", "regression", "tagging", "span")  # what a LiteRT export serves
INPUTS = ("token_ids", "segment_ids", "padding_mask")


class LiteError(ValueError):
    """A LiteRT export that cannot be served, or a request that does not fit it."""


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise LiteError("serving a LiteRT export needs the interpreter: "
                        "pip install ai-edge-litert") from None
    return Interpreter


def pack(wordpiece, ids_a, ids_b, max_seq_length):
    """[CLS] A [SEP] (B [SEP]), truncated as BERT's _truncate_seq_pair truncates (the longer
    of A and B loses its last piece until the pair fits): (token_ids, segment_ids)."""
    if ids_b is None:
        a = ids_a[: max_seq_length - 2]
        return [wordpiece.cls_id, *a, wordpiece.sep_id], [0] * (len(a) + 2)
    a, b = list(ids_a), list(ids_b)
    while len(a) + len(b) > max_seq_length - 3:
        (a if len(a) > len(b) else b).pop()
    return ([wordpiece.cls_id, *a, wordpiece.sep_id, *b, wordpiece.sep_id],
            [0] * (len(a) + 2) + [1] * (len(b) + 1))


class LiteModel:
    """A LiteRT export: `predict` answers as FineTunedModel.predict does, `serve` as the
    SavedModel's serving_default. `num_threads`: the interpreter's threads (default: one
    per usable core, as TensorFlow and PyTorch use)."""

    def __init__(self, path, num_threads=None):
        serving_file = os.path.join(path, SERVING_FILE)
        if not os.path.isfile(serving_file):
            raise LiteError(f"{serving_file}: missing; --export_dir of "
                            "`python -m kerasbert.export.litert` holds one folder per version")
        with open(serving_file, encoding="utf-8") as f:
            self.serving = json.load(f)
        if self.serving.get("kind") not in KINDS:
            raise LiteError(f"{serving_file}: kind {self.serving.get('kind')!r}: a LiteRT "
                            f"export serves {', '.join(KINDS)}")
        if str(self.serving.get("document_context", "0")) != "0":
            raise LiteError(f"{serving_file}: a --document_context run; LiteRT serves "
                            "sentences alone only")
        self.task = self.serving["task"]
        self.kind = self.serving["kind"]
        self.sentence_pair = bool(self.serving["sentence_pair"])
        self.max_seq_length = int(self.serving["max_seq_length"])
        self.labels = self.serving.get("labels")
        self.vocab = read_vocab(os.path.join(path, VOCAB_FILE))
        self.wordpiece = WordPiece(self.vocab, do_lower_case=self.serving["do_lower_case"])
        if self.kind == "span":  # how the run cut and decoded SQuAD (kerasbert/lite/spans.py)
            self.squad_options = self.serving["squad_options"]
            self.version_2 = bool(self.serving["version_2"])
            self.threshold = float(self.serving["null_score_diff_threshold"])
        if num_threads is None:
            num_threads = host.usable_cores()
        interpreter = _interpreter_class()(model_path=os.path.join(path, MODEL_FILE),
                                           num_threads=num_threads)
        self._run = interpreter.get_signature_runner("serving_default")

    def _arrays(self, rows):
        """{input: int32 [rows, longest row]} from (token ids, segment ids) rows."""
        width = max((len(ids) for ids, _ in rows), default=2)
        arrays = {name: np.zeros((len(rows), width), np.int32) for name in INPUTS}
        arrays["token_ids"][:] = self.wordpiece.pad_id
        for i, (ids, segments) in enumerate(rows):
            arrays["token_ids"][i, :len(ids)] = ids
            arrays["segment_ids"][i, :len(ids)] = segments
            arrays["padding_mask"][i, :len(ids)] = 1
        return arrays

    def encode_words(self, texts):
        """Tagging: ({input: int32 [windows, longest]}, words per text, (window, position)
        of each word's first piece where it is read)."""
        capacity = self.max_seq_length - 2
        rows, words_of, reads = [], [], []
        for text in texts:
            words = text.split()
            pieces = []
            for word in words:
                ids = self.wordpiece.ids(word)
                # As the graph: [UNK] for a word without pieces, the first piece only for
                # one longer than a window.
                pieces.append([self.wordpiece.unk_id] if not ids else
                              ids[:1] if len(ids) > capacity else ids)
            lengths = [len(p) for p in pieces]
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
            spans = windows(lengths, capacity)  # no words: one window, [CLS] [SEP]
            owner = best_windows(lengths, spans)
            flat = [i for p in pieces for i in p]
            first_row = len(rows)
            for start, end in spans:
                ids = [self.wordpiece.cls_id, *flat[offsets[start]:offsets[end]],
                       self.wordpiece.sep_id]
                rows.append((ids, [0] * len(ids)))
            reads.append([(first_row + w, 1 + offsets[k] - offsets[spans[w][0]])
                          for k, w in enumerate(owner)])
            words_of.append(words)
        return self._arrays(rows), words_of, reads

    def _check(self, text_a, text_b):
        """One clear error for a request that does not fit the export."""
        if isinstance(text_a, str) or isinstance(text_b, str):
            raise LiteError("serve takes lists of texts, not one string (predict takes one)")
        if self.kind == "tagging":
            if text_b is not None:
                raise LiteError(f"{self.task} tags single texts: serve(texts)")
            return
        if self.kind == "span" and text_b is None:
            raise LiteError(f"{self.task} answers questions about contexts: "
                            "serve(questions, contexts)")
        if self.kind != "span" and self.sentence_pair != (text_b is not None):
            raise LiteError(f"{self.task} takes " + ("text pairs: serve(text_a, text_b)"
                                                     if self.sentence_pair else
                                                     "single texts: serve(texts)"))
        if text_b is not None and len(text_b) != len(text_a):
            raise LiteError(f"text_a has {len(text_a)} texts but text_b has {len(text_b)}")

    def encode(self, text_a, text_b=None):
        """{input: int32 [batch, longest row]} of the texts (pairs; for span runs the
        questions and contexts, a row per window)."""
        self._check(text_a, text_b)
        if self.kind == "span":
            return self._arrays([row for question in self._cut(text_a, text_b)
                                 for row in question.rows])
        if self.kind == "tagging":
            return self.encode_words(text_a)[0]
        return self._arrays([pack(self.wordpiece, self.wordpiece.ids(a),
                                  None if text_b is None else self.wordpiece.ids(text_b[i]),
                                  self.max_seq_length) for i, a in enumerate(text_a)])

    @property
    def input_names(self):
        """What one example holds, in order (as FineTunedModel.input_names)."""
        if self.kind == "tagging":
            return ("text",)
        if self.kind == "span":
            return ("question", "context")
        return ("text_a", "text_b") if self.sentence_pair else ("text_a",)

    def predict(self, texts):
        """Answers for one example or a list of them, as `kerasbert.load(run).predict`: a
        text (a str), or for pair tasks an (a, b) tuple and for SQuAD (question, context).
        Per example a dict: classification {"label", "probabilities": {label: p}},
        regression {"score"}, tagging {"words", "tags"}, span {"answer", "score", "start",
        "end"} (v2 also "null_odds"). One example in, one dict out."""
        names = self.input_names
        single = isinstance(texts, str) or (
            len(names) > 1 and isinstance(texts, tuple) and len(texts) == len(names)
            and isinstance(texts[0], str))
        examples = [texts] if single else list(texts)
        if not examples:
            return []
        columns = [[] for _ in names]
        for i, example in enumerate(examples):
            parts = (example,) if isinstance(example, str) else tuple(example)
            if len(parts) != len(names) or (len(names) == 1 and not isinstance(example, str)):
                raise LiteError(f"predict: example {i} is {example!r}; the {self.task} model "
                                f"takes {' and '.join(names)} per example")
            for column, part in zip(columns, parts):
                column.append(part)
        outputs = self.serve(*columns)
        answers = [self._one(outputs, i) for i in range(len(examples))]
        return answers[0] if single else answers

    def _one(self, outputs, i):
        """Example i of serve's outputs as FineTunedModel.predict gives it."""
        if self.kind == "classification":
            return {"label": outputs["label"][i],
                    "probabilities": {str(label): float(p) for label, p
                                      in zip(self.labels, outputs["probabilities"][i])}}
        if self.kind == "tagging":
            return {"words": outputs["words"][i], "tags": outputs["tags"][i]}
        if self.kind == "span":
            return {"answer": outputs["answer"][i], "score": float(outputs["score"][i]),
                    "start": int(outputs["start"][i]), "end": int(outputs["end"][i]),
                    **({"null_odds": float(outputs["null_odds"][i])} if self.version_2
                       else {})}
        return {"score": float(outputs["score"][i])}

    def serve(self, text_a, text_b=None):
        """A batch as columns (lists of texts; SQuAD: questions, contexts), answered as the
        SavedModel's serving_default answers: classification {"probabilities": float32
        [n, K], "label": [n] str}; regression {"score": float32 [n]}; tagging (whitespace
        words) {"tags": [n] lists of tags, "words": [n] lists of words}; span {"answer": [n]
        str ("" for none), "score": float32 [n], "start"/"end": int32 [n] character offsets
        in the context (end exclusive, -1 for ""), v2 also "null_odds"}."""
        self._check(text_a, text_b)
        if len(text_a) == 0:
            raise LiteError("serve: no texts")
        if self.kind == "tagging":
            return self._tag(text_a)
        if self.kind == "span":
            return self._answer(text_a, text_b)
        outputs = self._run(**self.encode(text_a, text_b))["outputs"].astype(np.float32)
        if self.kind == "regression":
            return {"score": outputs[:, 0]}
        shifted = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        return {"probabilities": shifted / shifted.sum(axis=-1, keepdims=True),
                "label": [self.labels[i] for i in outputs.argmax(axis=-1)]}

    def _tag(self, texts):
        arrays, words, reads = self.encode_words(texts)
        logits = self._run(**arrays)["outputs"]
        tags = [[self.labels[int(logits[row, position].argmax())] for row, position in read]
                for read in reads]
        return {"tags": tags, "words": words}

    def _cut(self, questions, contexts):
        o = self.squad_options
        return [spans.cut(self.wordpiece, q, c, self.max_seq_length, o["doc_stride"],
                          o["max_query_length"]) for q, c in zip(questions, contexts)]

    def _answer(self, questions, contexts):
        cut = self._cut(questions, contexts)
        rows = [row for question in cut for row in question.rows]
        logits = self._run(**self._arrays(rows))["outputs"] if rows else None
        answers, first = [], 0
        for question in cut:
            answers.append(spans.answer(
                question, None if logits is None else logits[first: first + len(question.rows)],
                self.vocab, self.wordpiece.words, self.squad_options["n_best_size"],
                self.squad_options["max_answer_length"], self.version_2, self.threshold))
            first += len(question.rows)
        out = {"answer": [a["answer"] for a in answers],
               "score": np.array([a["score"] for a in answers], np.float32),
               "start": np.array([a["start"] for a in answers], np.int32),
               "end": np.array([a["end"] for a in answers], np.int32)}
        if self.version_2:
            out["null_odds"] = np.array([a["null_odds"] for a in answers], np.float32)
        return out

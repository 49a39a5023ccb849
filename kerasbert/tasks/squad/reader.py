"""SQuAD's official JSON files (and TFDS's squad/v1.1, squad/v2.0) as SquadExamples.

An error in a file is an InputError naming the file, the line and the JSON path.
"""

import dataclasses
import json

from kerasbert.errors import InputError, at
from kerasbert.io_utils import read_utf8_text
from kerasbert.tasks.base import Example


@dataclasses.dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset of the answer in the context


@dataclasses.dataclass(frozen=True)
class SquadExample(Example):
    """One question. text_a is the question, text_b the context (as every Example)."""

    qas_id: str = ""
    answers: tuple[Answer, ...] = ()
    is_impossible: bool = False
    plausible_answers: tuple[Answer, ...] = ()  # v2 only; read and kept, not trained on
    title: str = ""

    @property
    def question(self) -> str:
        return self.text_a

    @property
    def context(self) -> str:
        return self.text_b


# ---- reading the official JSON ---------------------------------------------------------------

def read_squad_file(path: str, version_2: bool, split: str = "dev") -> list[SquadExample]:
    """Reads an official SQuAD JSON file ({"version", "data": [articles]}).

    InputError (naming the file, the line and the JSON path, e.g. data[3].paragraphs[0].qas[2])
    for: unreadable or malformed JSON, a missing or mistyped key (data, paragraphs, context,
    qas, id, question, answers, text, answer_start), an empty id or context, a duplicate id,
    an answer_start outside its context, an empty answer text, an answerable question with
    no answers, an unanswerable one (is_impossible) that lists answers, and is_impossible
    questions read as SQuAD v1.1. Counted warnings instead (the data stays usable): answers
    whose text is not found at answer_start (see `build_features`). A missing title is "".
    The official files are one JSON line, hence the JSON path in every message.
    """
    text = _read_text(path)
    try:
        root = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{at(path, e.lineno)}malformed JSON: {e.msg} (column {e.colno})") from None
    where = _Where(path, text)
    data = _get(root, "data", list, where, ())
    examples, seen = [], {}
    for ai, article in enumerate(data):
        apath = ("data", ai)
        _check(isinstance(article, dict), where, apath, "an article must be a JSON object")
        title = article.get("title", "")
        title = title if isinstance(title, str) else str(title)
        for pi, paragraph in enumerate(_get(article, "paragraphs", list, where, apath)):
            ppath = apath + ("paragraphs", pi)
            _check(isinstance(paragraph, dict), where, ppath, "a paragraph must be a JSON object")
            context = _get(paragraph, "context", str, where, ppath)
            _check(context.strip(), where, ppath, "empty context")
            for qi, qa in enumerate(_get(paragraph, "qas", list, where, ppath)):
                qpath = ppath + ("qas", qi)
                _check(isinstance(qa, dict), where, qpath, "a question must be a JSON object")
                example = _read_question(qa, context, title, split, version_2, where, qpath)
                if example.qas_id in seen:
                    where.fail(qpath, f"duplicate id {example.qas_id!r} (first at "
                                      f"{_json_path(seen[example.qas_id])})")
                seen[example.qas_id] = qpath
                examples.append(example)
    if not examples:
        raise InputError(f"{at(path)}no questions in the {split} split")
    return examples


def _read_question(qa, context, title, split, version_2, where, qpath) -> SquadExample:
    qid = _get(qa, "id", str, where, qpath)
    _check(qid, where, qpath, "empty id")
    question = _get(qa, "question", str, where, qpath)
    impossible = qa.get("is_impossible", False)
    _check(isinstance(impossible, bool), where, qpath, "is_impossible must be true or false")
    if impossible and not version_2:
        where.fail(qpath, f"question {qid!r} is unanswerable (is_impossible), which SQuAD v1.1 "
                          "has not; read this file with --task=squad_v2")
    answers = _read_answers(qa, "answers", context, where, qpath, required=not impossible)
    plausible = _read_answers(qa, "plausible_answers", context, where, qpath, required=False)
    if impossible and answers:
        where.fail(qpath, f"question {qid!r} is_impossible but lists answers")
    if not impossible and not answers:
        where.fail(qpath, f"question {qid!r} has no answers" + (
            " (mark unanswerable questions with \"is_impossible\": true)" if version_2 else ""))
    return SquadExample(guid=f"{split}-{qid}", text_a=question, text_b=context,
                        label=answers[0].text if answers else "", qas_id=qid,
                        answers=answers, is_impossible=impossible,
                        plausible_answers=plausible, title=title)


def _read_answers(qa, key, context, where, qpath, required) -> tuple[Answer, ...]:
    if key not in qa and not required:
        return ()
    answers = []
    for k, answer in enumerate(_get(qa, key, list, where, qpath)):
        apath = qpath + (key, k)
        _check(isinstance(answer, dict), where, apath, "an answer must be a JSON object")
        text = _get(answer, "text", str, where, apath)
        start = _get(answer, "answer_start", int, where, apath)
        _check(text, where, apath, "empty answer text")
        _check(0 <= start < len(context), where, apath,
               f"answer_start {start} is outside its context ({len(context)} characters)")
        answers.append(Answer(text, start))
    return tuple(answers)


def _read_text(path):
    return read_utf8_text(path, "SQuAD")


class _Where:
    """Turns a JSON path into 'file:line: data[i]...: ' for messages (parsed again, slowly,
    only when there is something to report: the official files are a single line)."""

    def __init__(self, path, text):
        self.path, self.text = path, text

    def fail(self, json_path, message):
        raise InputError(f"{at(self.path, _line_of(self.text, json_path))}"
                         f"{_json_path(json_path) or 'top level'}: {message}")


def _check(ok, where, json_path, message):
    if not ok:
        where.fail(json_path, message)


def _get(obj, key, kind, where, json_path):
    if not isinstance(obj, dict) or key not in obj:
        where.fail(json_path, f"missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {list: "a list", str: "a string", int: "an integer"}
        where.fail(json_path, f"{key!r} must be {names[kind]}, not {type(value).__name__}")
    return value


def _json_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


class _Located(dict):
    position = 0  # offset of the object's "{" in the text


def _line_of(text, json_path) -> int:
    """Line of the innermost JSON object on `json_path` (1 when it cannot be found)."""
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, *args):
        obj, end = json.decoder.JSONObject(s_and_end, *args)
        located = _Located(obj)
        located.position = s_and_end[1] - 1
        return located, end

    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # the pure-Python scanner calls it
    position, node = 0, decoder.decode(text)
    for part in json_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        position = getattr(node, "position", position)
    return text.count("\n", 0, position) + 1


# ---- tensorflow_datasets ----------------------------------------------------------------------

def read_tfds_split(file_version: str, split: str, data_dir: str | None,
                    file_name: str) -> list[SquadExample]:
    """Reads `squad/<file_version>` from a prepared TFDS folder (no downloads); `file_name`
    is the official file named when it is not prepared.

    Our dev split is TFDS's validation split. Fields: id, title, context, question,
    answers{text, answer_start}; v2 also is_impossible and plausible_answers.
    """
    import tensorflow_datasets as tfds  # heavy; only when asked for

    name, tfds_split = f"squad/{file_version}", "validation" if split == "dev" else split
    try:
        dataset = tfds.load(name, split=tfds_split, data_dir=data_dir, download=False)
    except Exception as e:  # TFDS raises assorted types for "not prepared"
        raise InputError(
            f"TFDS {name} ({tfds_split}) is not prepared in "
            f"{data_dir or 'the default TFDS folder'}: prepare it on a machine with network "
            f"access (tfds build squad --config={file_version}) and copy the folder, or "
            f"pass --data_dir with the official {file_name} ({e})") from None
    examples, seen = [], set()
    for row in tfds.as_numpy(dataset):
        qid = _text(row["id"])
        context = _text(row["context"])
        impossible = bool(row.get("is_impossible", False))
        answers = _tfds_answers(row.get("answers"), context, name, qid)
        plausible = _tfds_answers(row.get("plausible_answers"), context, name, qid)
        if qid in seen:
            raise InputError(f"TFDS {name} ({tfds_split}): duplicate id {qid!r}")
        if not impossible and not answers:
            raise InputError(f"TFDS {name} ({tfds_split}): question {qid!r} has no answers")
        seen.add(qid)
        examples.append(SquadExample(
            guid=f"{split}-{qid}", text_a=_text(row["question"]), text_b=context,
            label=answers[0].text if answers else "", qas_id=qid, answers=answers,
            is_impossible=impossible, plausible_answers=plausible,
            title=_text(row.get("title", b""))))
    if not examples:
        raise InputError(f"TFDS {name} ({tfds_split}): no examples")
    return examples


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _tfds_answers(answers, context, name, qid) -> tuple[Answer, ...]:
    if answers is None:
        return ()
    out = []
    for text, start in zip(answers["text"], answers["answer_start"]):
        text, start = _text(text), int(start)
        if not text or not 0 <= start < len(context):
            raise InputError(f"TFDS {name}: question {qid!r} has an answer outside its context "
                             f"(answer_start {start}, text {text!r})")
        out.append(Answer(text, start))
    return tuple(out)

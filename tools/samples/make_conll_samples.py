"""Writes the bundled CoNLL-2003 sample (kerasbert/data/samples/conll2003/{train,valid,test}.txt).

Every sentence is composed here from news-like templates and name lists (no Reuters / CoNLL
text), with a fixed seed, in the shared task's layout: `word POS chunk NER` lines, IOB2 NER
tags, a blank line between sentences and `-DOCSTART-` between documents. POS and chunk tags
come from a small word list and a few rules: plausible, not gold (the reader ignores them).
Each split has a few long results lines that need windows at max_seq_length 64, and names
that split into many word pieces (e.g. "Schwarzenkopfberger").

    python -m tools.samples.make_conll_samples [--out kerasbert/data/samples/conll2003]

The committed files must equal this script's output (tests/tasks/test_conll.py checks).
"""

import argparse
import os
import random

from tools.samples import DATA_DIR

SEED = 20240607
SIZES = {"train": 200, "valid": 60, "test": 30}  # sentences per split
LONG = {"train": 4, "valid": 2, "test": 2}  # of which long results lines
DOC_SIZE = 10  # sentences per -DOCSTART- document

FIRST = ["Maria", "James", "Aiko", "Tomasz", "Fatima", "Olga", "Luis", "Ingrid", "Kwame",
         "Priya", "Henrik", "Sofia", "Mateo", "Yusuf", "Elena", "Dmitri", "Amara", "Lars",
         "Nadia", "Samuel", "Keiko", "Rafael", "Greta", "Omar"]
LAST = ["Lindqvist", "Okafor", "Brennan", "Kowalczyk", "Haverford", "Moreau", "Tanaka",
        "Petrosyan", "Abernathy", "Vasquez", "Whitcombe", "Delacroix", "Nakamura",
        "Castellanos", "Fitzgerald", "Ivanova", "Brightwater", "Mendel", "Osei", "Rask",
        # many word pieces each
        "Schwarzenkopfberger", "Wojciechowski", "Papadopoulou", "Krzyzanowski",
        "Vanderslootenberg", "Abdulrahmanov"]
ORGS = ["Northwind Mining", "Helix Telecom", "Bluewater Shipping", "Crestline Bank",
        "Meridian Airlines", "Sunvale Motors", "Atlas Insurance Group", "Redpine Energy",
        "Union of Harbour Workers", "Kestrel Pharmaceuticals", "Orchard Foods",
        "Silverline Railways", "Granite Cement", "Copperfield Holdings"]
CLUBS = ["Greyfield United", "Riverton Rovers", "Eastbrook Athletic", "Port Alden",
         "Millbrook City", "Harrowgate Town", "Stonebridge Wanderers", "Lakeshore Albion"]
PLACES = ["Lisbon", "Nairobi", "Oslo", "Montevideo", "Osaka", "Warsaw", "Toronto", "Cairo",
          "Perth", "Valparaiso", "New Zealand", "South Africa", "Rio de Janeiro", "Hong Kong",
          "Kuala Lumpur", "Buenos Aires", "Helsinki", "Accra", "Quebec", "Tbilisi"]
NATIONS = ["Brazilian", "Norwegian", "Japanese", "Polish", "Kenyan", "Canadian", "Egyptian",
           "Chilean", "Finnish", "Georgian", "Portuguese", "Ghanaian"]
EVENTS = ["Harbour Regatta", "Northern Open", "Winter Cup", "Coastal Marathon",
          "Continental Shield", "Summer Games"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Slots: {PER} {ORG} {CLUB} {LOC} {NAT} {EVENT} {DAY} {NUM} {SCORE} {DATE}.
TEMPLATES = [
    "{PER} , the {NAT} finance minister , said on {DAY} that {ORG} would cut {NUM} jobs in {LOC} .",
    "Shares in {ORG} rose {NUM} percent in {LOC} after the company reported higher profits .",
    "{CLUB} beat {CLUB} {SCORE} on {DAY} to move top of the league .",
    "Police in {LOC} said {PER} was arrested on {DAY} .",
    "{NAT} officials met representatives of {ORG} in {LOC} to discuss the new trade agreement .",
    "{PER} told reporters that talks with {ORG} would resume next week .",
    "The {NAT} government said on {DAY} it had approved a loan from {ORG} .",
    "{PER} scored twice as {CLUB} won {SCORE} at home to {CLUB} .",
    "{LOC} {DATE}",
    "{PER} of {LOC} won the {EVENT} on {DAY} .",
    "{ORG} said it expected to sign the contract with {ORG} before the end of the year .",
    "Floods in {LOC} forced {NUM} people from their homes , the {NAT} news agency said .",
    "{PER} , who joined {ORG} last year , will lead the team at the {EVENT} .",
    "{CLUB} manager {PER} said his players were tired after the trip to {LOC} .",
    "{NAT} striker {PER} is expected to miss the game against {CLUB} .",
    "The {EVENT} will be held in {LOC} for the first time .",
    "Analysts said {ORG} could report a loss of {NUM} million dollars .",
    "{PER} and {PER} will meet in the final of the {EVENT} in {LOC} .",
    "A spokesman for {ORG} declined to comment on the report .",
    "{LOC} has asked {LOC} to extradite {PER} .",
]
RESULT = "{PER} ( {LOC} ) {NUM}"  # one entry of a long results line

POS = {
    "the": "DT", "The": "DT", "a": "DT", "A": "DT", "his": "PRP$", "their": "PRP$",
    "it": "PRP", "who": "WP", "that": "IN", "of": "IN", "in": "IN", "In": "IN", "on": "IN",
    "from": "IN", "with": "IN", "at": "IN", "after": "IN", "for": "IN", "against": "IN",
    "before": "IN", "as": "IN", "to": "TO", "and": "CC", "said": "VBD", "would": "MD",
    "will": "MD", "could": "MD", "cut": "VB", "rose": "VBD", "reported": "VBD", "beat": "VBD",
    "move": "VB", "was": "VBD", "arrested": "VBN", "met": "VBD", "discuss": "VB",
    "told": "VBD", "resume": "VB", "had": "VBD", "approved": "VBN", "scored": "VBD",
    "won": "VBD", "expected": "VBN", "sign": "VB", "forced": "VBD", "joined": "VBD",
    "lead": "VB", "were": "VBD", "is": "VBZ", "miss": "VB", "be": "VB", "held": "VBN",
    "report": "VB", "meet": "VB", "declined": "VBD", "comment": "VB", "has": "VBZ",
    "asked": "VBN", "extradite": "VB", "twice": "RB", "next": "JJ", "new": "JJ",
    "higher": "JJR", "top": "JJ", "last": "JJ", "first": "JJ", "tired": "JJ",
    "percent": "NN", "jobs": "NNS", "profits": "NNS", "people": "NNS", "homes": "NNS",
    "players": "NNS", "dollars": "NNS", "representatives": "NNS", "officials": "NNS",
    "talks": "NNS", "reporters": "NNS", "Shares": "NNS", "Floods": "NNS", "Police": "NNS",
    "Analysts": "NNS", "million": "CD",
}
CHUNK = {"DT": "NP", "PRP$": "NP", "PRP": "NP", "JJ": "NP", "JJR": "NP", "NN": "NP",
         "NNS": "NP", "NNP": "NP", "NNPS": "NP", "CD": "NP", "WP": "NP", "IN": "PP",
         "TO": "VP", "MD": "VP", "VB": "VP", "VBD": "VP", "VBN": "VP", "VBZ": "VP",
         "RB": "ADVP", "CC": "O"}


def pos_of(word, tag):
    if tag.endswith("MISC") and word in NATIONS:
        return "JJ"
    if tag != "O":
        return "NNP"
    if word in POS:
        return POS[word]
    if word[0].isdigit():
        return "CD"
    if not word[0].isalnum():
        return word if word in ",.():" else ":"
    return "NNP" if word[0].isupper() else "NN"


def chunks(pos_tags):
    """B-/I- chunk tags from POS runs; a preposition always opens a new PP."""
    out, previous = [], "O"
    for pos in pos_tags:
        kind = CHUNK.get(pos, "O")
        if kind == "O":
            out.append("O")
        elif kind == previous and pos != "IN":
            out.append("I-" + kind)
        else:
            out.append("B-" + kind)
        previous = kind
    return out


def entity(words, kind):
    return [(w, ("B-" if i == 0 else "I-") + kind) for i, w in enumerate(words.split())]


def fill(rng, template):
    """A template -> list of (word, NER tag)."""
    out = []
    for token in template.split():
        if token == "{PER}":
            name = rng.choice(LAST) if rng.random() < 0.25 else f"{rng.choice(FIRST)} {rng.choice(LAST)}"
            out += entity(name, "PER")
        elif token in ("{ORG}", "{CLUB}"):
            out += entity(rng.choice(ORGS if token == "{ORG}" else CLUBS), "ORG")
        elif token == "{LOC}":
            out += entity(rng.choice(PLACES), "LOC")
        elif token == "{NAT}":
            out += entity(rng.choice(NATIONS), "MISC")
        elif token == "{EVENT}":
            out += entity(rng.choice(EVENTS), "MISC")
        elif token == "{DAY}":
            out.append((rng.choice(DAYS), "O"))
        elif token == "{NUM}":
            out.append((str(rng.choice([rng.randint(2, 99), rng.randint(100, 4000)])), "O"))
        elif token == "{SCORE}":
            out.append((f"{rng.randint(1, 5)}-{rng.randint(0, 3)}", "O"))
        elif token == "{DATE}":
            out.append((f"{rng.randint(1995, 2003)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "O"))
        else:
            out.append((token, "O"))
    if template == "{LOC} {DATE}":  # datelines are upper-case, as in news wires
        out = [(w.upper(), t) for w, t in out]
    return out


def long_line(rng):
    """A results line of 12 entries (about 70 words, well over 62 word pieces)."""
    words = [("Results", "O"), ("of", "O"), ("the", "O")] + entity(rng.choice(EVENTS), "MISC") + [(":", "O")]
    for i in range(12):
        words += fill(rng, RESULT) + [("," if i < 11 else ".", "O")]
    return words


def split_sentences(rng):
    seen, out = set(), {}
    for split, n in SIZES.items():
        sentences = [long_line(rng) for _ in range(LONG[split])]
        while len(sentences) < n:
            sentence = fill(rng, rng.choice(TEMPLATES))
            key = tuple(w for w, _ in sentence)
            if key not in seen:
                seen.add(key)
                sentences.append(sentence)
        rng.shuffle(sentences)
        out[split] = sentences
    return out


def render(sentences):
    lines = []
    for i, sentence in enumerate(sentences):
        if i % DOC_SIZE == 0:
            lines += ["-DOCSTART- -X- -X- O", ""]
        pos = [pos_of(w, t) for w, t in sentence]
        for (word, tag), p, c in zip(sentence, pos, chunks(pos)):
            lines.append(f"{word} {p} {c} {tag}")
        lines.append("")
    return "\n".join(lines) + "\n"


def make_samples():
    """{file name: text} of the three splits."""
    rng = random.Random(SEED)
    return {f"{split}.txt": render(s) for split, s in split_sentences(rng).items()}


def write_all(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, text in make_samples().items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(DATA_DIR, "samples", "conll2003"))
    write_all(parser.parse_args(argv).out)


if __name__ == "__main__":
    main()

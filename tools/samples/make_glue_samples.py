"""Writes the bundled GLUE samples (kerasbert/data/samples/glue/<TASK>/*.tsv).

Every sentence is composed here from templates and word lists (no GLUE text), with a fixed
seed, in each task's official file layout. The signal is deliberately clear so that a small
pre-trained encoder learns it from ~160 examples: sentiment words (SST-2), scrambled word
order (CoLA), shared facts (MRPC, QQP), graded overlap (STS-B), negation / added detail /
generalisation (MNLI), answer type (QNLI), facts stated or changed (RTE), number and gender
agreement of the resolved pronoun (WNLI). Pair tasks are built in groups that share their
first sentence (one hypothesis per label, as MNLI and WNLI are), so labels are balanced and
the first sentence alone never gives the answer away.

    python -m tools.samples.make_glue_samples [--out kerasbert/data/samples/glue]

The committed files must equal this script's output (tests/tasks/test_glue.py checks).
"""

import argparse
import os
import random

from tools.samples import DATA_DIR

SEED = 20240601
# Rows per split: train / dev / test (pair tasks: groups of 2, MNLI groups of 3).
N_TRAIN, N_DEV, N_TEST = 160, 48, 16


def pick(rng, *lists):
    return [rng.choice(xs) for xs in lists]


def cap(s):
    return s[0].upper() + s[1:]


def unique_groups(rng, make, n, seen):
    """n groups from make(rng, i), none repeating a key already seen (across splits)."""
    groups, tries = [], 0
    while len(groups) < n:
        tries += 1
        if tries > 100 * n:
            raise RuntimeError("word lists too small for the requested sample size")
        group = make(rng, len(groups))
        # Pair groups share their first text, which must not recur (not even in another
        # split); single rows are keyed by all their texts.
        key = group[0][1] if len(group) > 1 else group[0][1:]
        if key not in seen:
            seen.add(key)
            groups.append(group)
    return groups


def split_groups(rng, make, sizes, group_size=2):
    """{split: rows} where each row is (label, text_a, text_b, ...), groups kept together."""
    seen, out = set(), {}
    for split, n in sizes.items():
        groups = unique_groups(rng, make, n // group_size, seen)
        rows = [row for g in groups for row in g]
        rng.shuffle(rows)
        out[split] = rows
    return out


# ---- SST-2: lower-cased, tokenised phrases ending in a space, as the real file ------------

POS = ["wonderful", "charming", "moving", "delightful", "brilliant", "funny", "heartfelt",
       "gorgeous", "clever", "warm", "thrilling", "beautiful", "smart", "touching", "lovely",
       "inventive", "witty", "gripping"]
NEG = ["dull", "tedious", "clumsy", "boring", "lifeless", "confused", "shallow", "predictable",
       "tiresome", "messy", "bland", "awkward", "flat", "pointless", "grating", "hollow",
       "sloppy", "forgettable"]
FILM_SUBJ = ["the film", "this movie", "the story", "the script", "the cast", "the direction",
             "the soundtrack", "the final act", "the dialogue", "the picture", "the ending",
             "the lead performance", "the plot", "the camera work"]
FILM_NOUN = ["film", "movie", "story", "comedy", "drama", "picture", "thriller", "ride",
             "romance", "documentary", "adventure", "mystery"]
ADV = ["very", "remarkably", "quite", "genuinely", "consistently", "surprisingly", "utterly"]
SST_TEMPLATES = [
    "{s} is {adv} {a} .",
    "a {a} and {b} {n} .",
    "{s} feels {a} from start to finish .",
    "one of the most {a} {ns} of the year .",
    "it 's {a} , {b} and {c} .",
    "{s} is {o} at times , but overall it 's {a} .",
    "a {adv} {a} {n} that never lets up .",
    "{s} turns out to be {a} and {b} .",
    "what a {a} {n} .",
    "i found {s} {adv} {a} .",
]


def sst2(rng):
    def make(rng, i):
        label = i % 2
        good, bad = (POS, NEG) if label else (NEG, POS)
        a, b, c = rng.sample(good, 3)
        s, n, adv, o, t = pick(rng, FILM_SUBJ, FILM_NOUN, ADV, bad, SST_TEMPLATES)
        text = t.format(s=s, n=n, ns=plural(n), adv=adv, a=a, b=b, c=c, o=o)
        return [(str(label), fix_articles(text) + " ")]

    rows = split_groups(rng, make, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST}, 1)
    header = ["sentence", "label"]
    return {
        "train.tsv": [header] + [[t, lab] for lab, t in rows["train"]],
        "dev.tsv": [header] + [[t, lab] for lab, t in rows["dev"]],
        "test.tsv": test_rows(["sentence"], [[t] for _, t in rows["test"]]),
    }


def test_rows(columns, rows):
    """A test file: an `index` column first, then the given columns, no labels."""
    return [["index", *columns]] + [[str(i)] + r for i, r in enumerate(rows)]


def fix_articles(text):
    """a/an by the next word's first letter (good enough for these word lists)."""
    words = text.split(" ")
    for i, w in enumerate(words[:-1]):
        if w.lower() in ("a", "an"):
            an = words[i + 1][:1].lower() in tuple("aeiou")
            words[i] = ("an" if an else "a") if w.islower() else ("An" if an else "A")
    return " ".join(words)


def plural(noun):
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


# ---- CoLA: grammatical sentences vs scrambled / broken ones, no header -------------------

SUBJ_SG = ["The dog", "My sister", "The committee", "A tall man", "The new manager", "Her cousin",
           "The old farmer", "Our teacher", "The young pilot", "The baker", "His uncle", "The nurse"]
SUBJ_PL = ["The children", "Our neighbours", "The students", "Most of the guests", "The workers",
           "Both of my brothers", "The players", "The tourists"]
VERBS = [("chased", "chase"), ("painted", "paint"), ("fixed", "fix"), ("read", "read"),
         ("bought", "buy"), ("cleaned", "clean"), ("visited", "visit"), ("found", "find"),
         ("opened", "open"), ("carried", "carry"), ("sold", "sell"), ("watched", "watch")]
OBJECTS = ["the old fence", "a letter", "the red car", "the kitchen", "the museum", "a small box",
           "the garden gate", "three books", "the broken chair", "a new bicycle", "the window",
           "the map"]
ADJUNCTS = ["yesterday", "on Monday", "in the morning", "very carefully", "after lunch",
            "last week", "without any help", "before the storm", "with great care", "twice"]
AUX = ["will", "can", "should", "might", "must", "would"]


def cola(rng):
    def good(rng):
        subj = rng.choice(SUBJ_SG + SUBJ_PL)
        (past, base), obj, adj = pick(rng, VERBS, OBJECTS, ADJUNCTS)
        form = rng.randrange(4)
        if form == 0:
            return f"{subj} {past} {obj} {adj}."
        if form == 1:
            return f"{subj} {rng.choice(AUX)} {base} {obj} {adj}."
        if form == 2:
            return f"{cap(adj)}, {subj[0].lower() + subj[1:]} {past} {obj}."
        return f"{subj} {past} {obj} and then went home."

    def bad(rng):
        (past, base), obj, adj = pick(rng, VERBS, OBJECTS, ADJUNCTS)
        form = rng.randrange(4)
        if form == 0:  # scrambled word order
            original = f"{rng.choice(SUBJ_SG).lower()} {past} {obj} {adj}".split()
            words = list(original)
            while words == original:
                rng.shuffle(words)
            return cap(" ".join(words)) + "."
        if form == 1:  # verb pushed to the end, article doubled
            return f"{rng.choice(SUBJ_SG)} the {obj.split()[-1]} {adj} {past}."
        if form == 2:  # agreement: plural subject with "is/was" + bare verb
            return f"{rng.choice(SUBJ_PL)} was {base} {obj} {adj}."
        return f"{rng.choice(SUBJ_SG)} {rng.choice(AUX)} to {past} {obj} {adj}."  # modal + to + past

    def make(rng, i):
        label = i % 2
        return [(str(label), good(rng) if label else bad(rng))]

    rows = split_groups(rng, make, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST}, 1)
    sources = ["kb01", "kb02", "kb03", "kb04"]

    def labelled(rows):
        return [[rng.choice(sources), lab, "" if lab == "1" else "*", t] for lab, t in rows]

    return {
        "train.tsv": labelled(rows["train"]),
        "dev.tsv": labelled(rows["dev"]),
        "test.tsv": test_rows(["sentence"], [[t] for _, t in rows["test"]]),
    }


# ---- MRPC: two reports of the same event vs. of two events of the same organisation ------

AGENTS = ["Harlow Industries", "Brightwater Bank", "Norvale Airlines", "the city council",
          "Kestrel Motors", "the health ministry", "Pinecrest Foods", "Alder Energy",
          "Meridian Software", "the state university", "Calloway Shipping", "the transit authority"]
EVENTS = [  # past tense, participle, objects
    ("cut", "cut", ["jobs", "positions"]),
    ("hired", "hired", ["workers", "employees"]),
    ("opened", "opened", ["stores", "shops"]),
    ("closed", "closed", ["branches", "local offices"]),
    ("sold", "sold", ["buses", "coaches"]),
    ("recalled", "recalled", ["vehicles", "cars"]),
    ("bought", "bought", ["trucks", "lorries"]),
    ("approved", "approved", ["projects", "proposals"]),
]
NUMBERS = ["45", "120", "350", "600", "1,200", "2,400", "18", "75", "900", "3,000"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MRPC_PHRASES = [
    "{A} {v} {n} {o} on {d}, officials said.",
    "On {d}, {a} {v} {n} {o}.",
    "{A} said it had {p} {n} {o} on {d}.",
    "Officials at {a} confirmed that {n} {o} were {p} on {d}.",
    '{A} called the move "necessary" and said it {v} {n} {o} on {d}.',
    "In a statement on {d}, {a} said {n} {o} had been {p}.",
]


def mrpc_text(rng, event, avoid=None):
    a, (v, p, objs), n, d, o = event
    phrases = [t for t in MRPC_PHRASES if t != avoid]
    t = rng.choice(phrases)
    return t, t.format(A=cap(a), a=a, v=v, p=p, n=n, o=objs[o], d=d)


def mrpc_event(rng, agent=None):
    a, e, n, d = pick(rng, AGENTS, EVENTS, NUMBERS, DAYS)
    return (agent or a, e, n, d, rng.randrange(2))


def pair_make_mrpc(rng, i):
    event = mrpc_event(rng)
    t1, s1 = mrpc_text(rng, event)
    _, s2 = mrpc_text(rng, event[:4] + (1 - event[4],), avoid=t1)  # same facts, other words
    other = mrpc_event(rng, agent=event[0])
    while other[1] == event[1] or other[2] == event[2]:
        other = mrpc_event(rng, agent=event[0])
    _, s3 = mrpc_text(rng, other, avoid=t1)
    return [("1", s1, s2), ("0", s1, s3)]


def mrpc(rng):
    rows = split_groups(rng, pair_make_mrpc, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST})
    ids = {}

    def sid(text):  # one id per distinct sentence, like the real corpus
        if text not in ids:
            ids[text] = str(rng.randrange(100000, 4000000))
        return ids[text]

    header = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    return {
        "train.tsv": [header] + [[lab, sid(a), sid(b), a, b] for lab, a, b in rows["train"]],
        "dev.tsv": [header] + [[lab, sid(a), sid(b), a, b] for lab, a, b in rows["dev"]],
        "test.tsv": test_rows(["#1 ID", "#2 ID", "#1 String", "#2 String"],
                              [[sid(a), sid(b), a, b] for _, a, b in rows["test"]]),
        "bom": True,  # the official MRPC train/dev files start with a UTF-8 BOM
    }


# ---- QQP: two phrasings of one question vs. questions that differ in intent or topic -----

TOPICS = ["Python", "chess", "photography", "cooking", "swimming", "drawing", "yoga",
          "gardening", "Spanish", "French", "calligraphy", "knitting", "the piano", "the guitar",
          "statistics", "woodworking"]
INTENTS = [
    ["How do I learn {t}?", "What is the best way to learn {t}?",
     "How can I get started with {t}?", "What should a beginner do to learn {t}?"],
    ["How can I get better at {t} quickly?", "What is the fastest way to improve at {t}?",
     "How do I improve at {t} in a short time?"],
    ["Is {t} worth learning?", "Is it worth spending time on {t}?",
     "Should I bother learning {t}?"],
    ["Why is {t} so hard?", "What makes {t} so difficult?", "Why do people find {t} difficult?"],
    ["What are the best books about {t}?", "Which books should I read on {t}?",
     "Can you recommend good books for {t}?"],
    ["Am I too old to start {t}?", "Is it too late for an adult to begin {t}?",
     "Can someone start {t} in their forties?"],
    ["Can I make money with {t}?", "How do people earn money from {t}?",
     "Is it possible to earn a living from {t}?"],
]


def pair_make_qqp(rng, i):
    t, k = rng.choice(TOPICS), rng.randrange(len(INTENTS))
    q1, q2 = (p.format(t=t) for p in rng.sample(INTENTS[k], 2))
    if rng.random() < 0.6:  # same topic, another intent
        k2 = rng.choice([j for j in range(len(INTENTS)) if j != k])
        q3 = rng.choice(INTENTS[k2]).format(t=t)
    else:  # same intent, another topic
        q3 = rng.choice(INTENTS[k]).format(t=rng.choice([x for x in TOPICS if x != t]))
    return [("1", q1, q2), ("0", q1, q3)]


def qqp(rng):
    rows = split_groups(rng, pair_make_qqp, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST})
    qids = {}

    def qid(text):  # one id per distinct question, like the real corpus
        return qids.setdefault(text, str(len(qids) + 1))

    header = ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
    next_id = iter(range(10000, 100000, 7))

    def labelled(rows):
        return [[str(next(next_id)), qid(a), qid(b), a, b, lab] for lab, a, b in rows]

    return {
        "train.tsv": [header] + labelled(rows["train"]),
        "dev.tsv": [header] + labelled(rows["dev"]),
        "test.tsv": [["id", "question1", "question2"]]
        + [[str(i), a, b] for i, (_, a, b) in enumerate(rows["test"])],
    }


# ---- STS-B: captions with graded overlap, score in [0, 5] -------------------------------

STS_SUBJ = {"man": ["man", "guy"], "woman": ["woman", "lady"], "boy": ["boy", "young boy"],
            "girl": ["girl", "little girl"], "chef": ["chef", "cook"], "child": ["child", "kid"],
            "musician": ["musician", "performer"], "old man": ["old man", "elderly man"]}
STS_ACTS = {
    ("is playing", "plays"): ["a guitar", "the piano", "a flute", "the drums", "a violin"],
    ("is cutting", "is slicing"): ["an onion", "a tomato", "some bread", "a carrot", "a melon"],
    ("is riding", "rides"): ["a horse", "a bicycle", "a motorcycle", "a skateboard", "a camel"],
    ("is reading", "reads"): ["a book", "a newspaper", "a letter", "a map", "a magazine"],
    ("is eating", "eats"): ["an apple", "a sandwich", "some noodles", "a banana", "a pizza"],
    ("is washing", "is cleaning"): ["a car", "the dishes", "a window", "a dog", "the floor"],
}
STS_PLACES = ["in the park", "on a stage", "in a kitchen", "on the beach", "at night",
              "in the rain", "next to a river", "in a small room"]
# (centre score, how the second caption is built)
STS_LEVELS = [(4.8, "paraphrase"), (3.8, "detail"), (2.6, "subject"), (1.6, "action"),
              (0.4, "unrelated")]


def sts_caption(subj, verb, obj, place=""):
    return fix_articles(f"A {subj} {verb} {obj}{' ' + place if place else ''}.")


def stsb_make(rng, i):
    center, how = STS_LEVELS[i % len(STS_LEVELS)]
    subj = rng.choice(sorted(STS_SUBJ))
    act = rng.choice(sorted(STS_ACTS))
    obj = rng.choice(STS_ACTS[act])
    s1 = sts_caption(subj, act[0], obj)
    other_subj = rng.choice([s for s in sorted(STS_SUBJ) if s != subj])
    other_act = rng.choice([a for a in sorted(STS_ACTS) if a != act])
    if how == "paraphrase":
        s2 = sts_caption(STS_SUBJ[subj][1], act[1], obj)
    elif how == "detail":
        s2 = sts_caption(subj, act[0], obj, rng.choice(STS_PLACES))
    elif how == "subject":
        s2 = sts_caption(other_subj, act[0], obj)
    elif how == "action":
        s2 = sts_caption(subj, other_act[0], rng.choice(STS_ACTS[other_act]))
    else:
        s2 = sts_caption(other_subj, other_act[0], rng.choice(STS_ACTS[other_act]),
                         rng.choice(STS_PLACES))
    score = min(5.0, max(0.0, center + rng.uniform(-0.3, 0.3)))
    return [(f"{score:.3f}", s1, s2)]


def stsb(rng):
    rows = split_groups(rng, stsb_make, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST}, 1)
    meta = ["main-captions", "samples", "2024", None, "none", "none"]

    def table(rows, labelled):
        out = []
        for i, (score, a, b) in enumerate(rows):
            row = [str(i)] + meta[:3] + [f"{i:04d}"] + meta[4:] + [a, b]
            out.append(row + [score] if labelled else row)
        return out

    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2"]
    return {
        "train.tsv": [header + ["score"]] + table(rows["train"], True),
        "dev.tsv": [header + ["score"]] + table(rows["dev"], True),
        "test.tsv": [header] + table(rows["test"], False),
    }


# ---- MNLI: one premise, three hypotheses (generalisation / negation / added detail) ------

MNLI_VOCAB = {
    "matched": dict(
        genres=["fiction", "government", "slate", "telephone", "travel"],
        people=["the manager", "my aunt", "the young pilot", "a local farmer", "the tour guide",
                "our teacher", "the museum director", "his landlord", "the senator"],
        places=["market", "station", "library", "harbour", "town hall", "hotel", "gallery"],
    ),
    "mismatched": dict(
        genres=["facetoface", "letters", "nineeleven", "oup", "verbatim"],
        people=["the firefighter", "my grandfather", "the editor", "a retired judge",
                "the volunteer", "her roommate", "the bus driver", "the professor"],
        places=["stadium", "bakery", "courthouse", "airport", "farm", "embassy", "chapel"],
    ),
}
MNLI_ACTS = [("bought", "buy", "a new coat"), ("painted", "paint", "the front door"),
             ("repaired", "repair", "an old radio"), ("sold", "sell", "two paintings"),
             ("cooked", "cook", "a large dinner"), ("photographed", "photograph", "the bridge"),
             ("found", "find", "a lost wallet"), ("signed", "sign", "the contract")]
MNLI_WHEN = ["on Sunday", "last spring", "in the evening", "before noon", "during the festival"]
REASONS = ["it was on sale", "a friend had asked for it", "the weather was good",
           "there was nothing else to do", "it had been a long week"]
COMPANIONS = ["two colleagues", "an old friend", "the neighbours", "a group of students"]


def mnli_make(vocab):
    def make(rng, i):
        person, place, (past, base, obj), when = pick(
            rng, vocab["people"], vocab["places"], MNLI_ACTS, MNLI_WHEN)
        P = cap(person)
        premise = f"{P} {past} {obj} at the {place} {when}."
        ent = rng.choice([f"{P} was at the {place} {when}.", f"Someone {past} {obj}.",
                          f"{P} {past} something at the {place}."])
        con = rng.choice([f"{P} never went to the {place}.", f"Nobody {past} {obj}.",
                          f"{P} did not {base} anything {when}."])
        neu = rng.choice([f"{P} {past} {obj} because {rng.choice(REASONS)}.",
                          f"{P} was at the {place} for the first time.",
                          f"{P} {past} {obj} with {rng.choice(COMPANIONS)}."])
        genre = rng.choice(vocab["genres"])
        return [("entailment", premise, ent, genre), ("contradiction", premise, con, genre),
                ("neutral", premise, neu, genre)]
    return make


def parses(s):
    """Stand-ins for the parse columns (the readers ignore them): one flat bracket each."""
    tokens = s[:-1] + " ."
    return f"( {tokens} )", f"(ROOT (S {tokens}))"


def mnli(rng):
    matched = split_groups(rng, mnli_make(MNLI_VOCAB["matched"]),
                           {"train": 162, "dev_matched": N_DEV, "test_matched": 18}, 3)
    mismatched = split_groups(rng, mnli_make(MNLI_VOCAB["mismatched"]),
                              {"dev_mismatched": N_DEV, "test_mismatched": 18}, 3)
    splits = {**matched, **mismatched}
    prompt_ids = {}
    head = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
            "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
            "sentence2"]

    def row(i, label, a, b, genre):
        if a not in prompt_ids:
            prompt_ids[a] = str(rng.randrange(10000, 140000))
        pid = prompt_ids[a]
        (bp1, p1), (bp2, p2) = parses(a), parses(b)
        return [str(i), pid, pid + label[0], genre, bp1, bp2, p1, p2, a, b]

    def annotators(label):  # dev has five annotator labels; the gold one is the majority
        labels = [label] * 5
        if rng.random() < 0.3:
            labels[rng.randrange(1, 5)] = rng.choice(
                [x for x in ("contradiction", "entailment", "neutral") if x != label])
        return labels

    out = {"train.tsv": [head + ["label1", "gold_label"]]
           + [row(i, *r) + [r[0], r[0]] for i, r in enumerate(splits["train"])]}
    for dev in ("dev_matched", "dev_mismatched"):
        out[f"{dev}.tsv"] = [head + [f"label{k}" for k in range(1, 6)] + ["gold_label"]] + [
            row(i, *r) + annotators(r[0]) + [r[0]] for i, r in enumerate(splits[dev])]
    for test in ("test_matched", "test_mismatched"):
        out[f"{test}.tsv"] = [head] + [row(i, *r) for i, r in enumerate(splits[test])]
    return out


# ---- QNLI: does the sentence answer the question? ---------------------------------------

TOWNS = ["Brenwick", "Castelmoor", "Dunvale", "Eastholm", "Farrowby", "Glenmark", "Hollin Bay",
         "Ivesford", "Kellstone", "Larkhaven", "Marlow Cross", "Northwyn", "Oakhurst",
         "Pellingham", "Redcliffe", "Stanbridge", "Thornbury", "Westmere"]
RIVERS = ["Avel", "Corran", "Dee", "Isling", "Merrow", "Tamsin"]
FEATURES = ["woollen mills", "spring fair", "stone bridge", "clock tower", "cheese market",
            "rowing club", "old castle", "botanical garden"]
MAYORS = ["Helen Ashby", "Tomas Verne", "Priya Nair", "Owen Hale", "Grace Lindqvist"]
# (question, answering sentence); a non-answer is another family's sentence about the town.
QNLI_FAMILIES = [
    (["When was {T} founded?", "In what year was {T} founded?"],
     "{T} was founded in {year} by a group of wool merchants."),
    (["How many people live in {T}?", "What is the population of {T}?"],
     "About {num} people live in {T}, according to the most recent census."),
    (["Which river flows through {T}?", "What river runs through {T}?"],
     "The {river} River flows through the centre of {T}."),
    (["What is {T} best known for?", "What is {T} famous for?"],
     "Visitors to {T} mostly come for its {feature}."),
    (["Who is the mayor of {T}?", "Who currently leads the council of {T}?"],
     "The mayor of {T} is {mayor}, who was elected in {year2}."),
    (["How far is {T} from the coast?", "What is the distance from {T} to the sea?"],
     "{T} lies roughly {km} kilometres inland from the coast."),
]


def qnli_make(rng, i):
    town = rng.choice(TOWNS)
    k, other = rng.sample(range(len(QNLI_FAMILIES)), 2)
    facts = dict(T=town, year=rng.randrange(1150, 1890), num=f"{rng.randrange(2, 90)},000",
                 river=rng.choice(RIVERS), feature=rng.choice(FEATURES),
                 mayor=rng.choice(MAYORS), year2=rng.randrange(2015, 2024),
                 km=rng.randrange(5, 200))
    question = rng.choice(QNLI_FAMILIES[k][0]).format(**facts)
    return [("entailment", question, QNLI_FAMILIES[k][1].format(**facts)),
            ("not_entailment", question, QNLI_FAMILIES[other][1].format(**facts))]


# ---- RTE: a hypothesis the text states vs. one it changes or does not support -----------

FIRMS = ["Norvik", "Caldera Labs", "Bluefin Logistics", "Ostrava Steel", "Quillon Media",
         "Sandpiper Foods", "Tellmark", "Verity Insurance", "Windrow Farms", "Yardley Rail"]
CITIES = ["Lisbon", "Oslo", "Dublin", "Porto", "Krakow", "Lyon", "Valencia", "Gothenburg"]
INDUSTRIES = ["shipping", "software", "steel", "media", "food", "insurance", "rail", "farming"]
PLANS = [("open", "a factory", "offices"), ("build", "a warehouse", "a depot"),
         ("hire", "200 engineers", "new staff"), ("sell", "its truck fleet", "old equipment")]
PEOPLE = ["Marta Ruiz", "Jonas Berg", "Aisha Khan", "Liam Doyle", "Chen Wei", "Sofia Rossi"]
PRIZES = ["Halden Prize", "national book award", "gold medal", "design award"]
WORKS = ["a first novel", "research on bridges", "a short film", "a series of photographs"]


def rte_make(rng, i):
    if rng.random() < 0.5:
        firm, city, industry, (verb, obj, obj2), year = pick(
            rng, FIRMS, CITIES, INDUSTRIES, PLANS, range(2024, 2030))
        other_city = rng.choice([c for c in CITIES if c != city])
        text = fix_articles(f"{firm}, a {industry} company based in {city}, announced on "
                            f"Tuesday that it plans to {verb} {obj} in {year}.")
        yes = [f"{firm} is based in {city}.", f"{firm} plans to {verb} {obj}.",
               fix_articles(f"{firm} is a {industry} company.")]
        no = [f"{firm} is based in {other_city}.", f"{firm} has no plans to {verb} {obj}.",
              f"{firm} plans to {verb} {obj} in {other_city}.",
              f"{rng.choice([f for f in FIRMS if f != firm])} plans to {verb} {obj2}."]
    else:
        person, city, prize, work, year = pick(rng, PEOPLE, CITIES, PRIZES, WORKS,
                                               range(1990, 2023))
        other_city = rng.choice([c for c in CITIES if c != city])
        text = f"{person}, who was born in {city}, won the {prize} in {year} for {work}."
        yes = [f"{person} won the {prize}.", f"{person} was born in {city}.",
               f"{person} received an award for {work}."]
        no = [f"{person} was born in {other_city}.", f"{person} lost the {prize}.",
              f"{person} won the {prize} in {year + rng.randrange(1, 9)}.",
              f"{person} never won any award."]
    return [("entailment", text, rng.choice(yes)), ("not_entailment", text, rng.choice(no))]


# ---- WNLI: resolve a pronoun; the wrong referent breaks number or gender agreement -------

WN_PL = ["the dogs", "the children", "the workers", "the soldiers", "the students", "the boys",
         "the tourists", "the nurses"]
WN_SG = ["the cat", "the teacher", "the guard", "the old man", "the horse", "the driver",
         "the waiter", "the captain"]
WN_VERBS = ["chased", "thanked", "followed", "ignored", "watched", "avoided", "helped", "called"]
WN_ADJ = ["hungry", "tired", "afraid", "angry", "curious", "late", "lost", "cold"]
WN_HER = ["Anna", "Maria", "Julia", "Sarah", "Emma", "Laura"]
WN_HIM = ["Tom", "Peter", "David", "Mark", "James", "Paul"]
WN_NEEDS = ["needed advice", "had lost the keys", "wanted to apologise", "was feeling unwell",
            "had good news"]


def wnli_make(rng, i):
    verb, adj = rng.choice(WN_VERBS), rng.choice(WN_ADJ)
    kind = rng.randrange(3)
    if kind < 2:  # number: "they were" must be the plural noun, "it was" the singular one
        pl, sg = rng.choice(WN_PL), rng.choice(WN_SG)
        first, second = (pl, sg) if rng.random() < 0.5 else (sg, pl)
        right, wrong, pron, be = (pl, sg, "they", "were") if kind == 0 else (sg, pl, "it", "was")
        if right == sg and sg in ("the teacher", "the old man", "the guard", "the driver",
                                  "the waiter", "the captain"):
            pron = rng.choice(["he", "she"])
        text = f"{cap(first)} {verb} {second} because {pron} {be} {adj}."
        return [("1", text, f"{cap(right)} {be} {adj}."), ("0", text, f"{cap(wrong)} {be} {adj}.")]
    # gender: "she" is the woman, "he" the man
    her, him, need = rng.choice(WN_HER), rng.choice(WN_HIM), rng.choice(WN_NEEDS)
    first, second = (her, him) if rng.random() < 0.5 else (him, her)
    right, pron = (her, "she") if rng.random() < 0.5 else (him, "he")
    wrong = him if right == her else her
    text = f"{first} {verb} {second} because {pron} {need}."
    return [("1", text, f"{right} {need}."), ("0", text, f"{wrong} {need}.")]


def nli_task(make, test_header=("index", "sentence1", "sentence2"),
             header=("index", "sentence1", "sentence2", "label")):
    def build(rng):
        rows = split_groups(rng, make, {"train": N_TRAIN, "dev": N_DEV, "test": N_TEST})
        labelled = lambda rows: [list(header)] + [
            [str(i), a, b, lab] for i, (lab, a, b) in enumerate(rows)]
        return {"train.tsv": labelled(rows["train"]), "dev.tsv": labelled(rows["dev"]),
                "test.tsv": test_rows(list(test_header[1:]), [[a, b] for _, a, b in rows["test"]])}
    return build


TASKS = {  # official folder -> builder
    "CoLA": cola,
    "SST-2": sst2,
    "MRPC": mrpc,
    "STS-B": stsb,
    "QQP": qqp,
    "MNLI": mnli,
    "QNLI": nli_task(qnli_make, ("index", "question", "sentence"),
                     ("index", "question", "sentence", "label")),
    "RTE": nli_task(rte_make),
    "WNLI": nli_task(wnli_make),
}


def write_all(out_dir):
    for k, (folder, build) in enumerate(TASKS.items()):
        files = build(random.Random(SEED + k))
        bom = files.pop("bom", False)
        os.makedirs(os.path.join(out_dir, folder), exist_ok=True)
        for name, rows in files.items():
            text = "".join("\t".join(r) + "\n" for r in rows)
            if bom and name != "test.tsv":
                text = "\ufeff" + text
            for r in rows:
                assert all("\t" not in c and "\n" not in c for c in r), r
            with open(os.path.join(out_dir, folder, name), "w", encoding="utf-8", newline="\n") as f:
                f.write(text)


def main(argv=None):
    default = os.path.join(DATA_DIR, "samples", "glue")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=default, help="output folder (default: %(default)s)")
    write_all(parser.parse_args(argv).out)


if __name__ == "__main__":
    main()

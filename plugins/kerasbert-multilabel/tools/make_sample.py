"""Writes the bundled topic_tags sample (kerasbert_multilabel/data/{train,dev,test}.tsv).

    python plugins/kerasbert-multilabel/tools/make_sample.py

Deterministic (a fixed seed): running it again rewrites the same files. Each text joins
zero to three clauses about a topic (food, money, music, sports, weather) and up to two
neutral clauses; a text's labels are exactly the topics of its clauses, so they are
learnable from words. The words are in kerasbert's small sample vocabulary and in BERT's
uncased one, so a random-init model reads them whole either way. The test split has no
labels column, like GLUE's test files.
"""

import os
import random

SEED = 17
SIZES = {"train": 320, "dev": 80, "test": 60}
LABELS = ("food", "money", "music", "sports", "weather")

PEOPLE = ["maria", "paul", "peter", "emma", "laura", "david", "jonas", "the teacher",
          "the student", "my aunt", "the farmer", "a young woman", "the boy", "the girl",
          "our neighbour", "the pilot", "my friend"]
DAYS = ["on monday", "on tuesday", "on friday", "on sunday", "last week", "yesterday",
        "in the morning", "during the festival", "before noon"]

CLAUSES = {
    "food": ["{p} cooked noodles {d}", "{p} bought fresh bread at the bakery",
             "the chef made a tomato salad", "{p} had cheese and apples for lunch",
             "the kitchen smelled of pizza", "{p} baked a cake {d}",
             "{p} ate a sandwich with onion", "the cafe served melon and milk"],
    "money": ["the bank reported higher profits", "{p} asked the bank for a loan",
              "shares rose ten percent {d}", "{p} lost money on the shares",
              "the company earned a million dollars", "{p} paid the insurance {d}",
              "the finance minister announced a sale of shares", "{p} saved money for a trip"],
    "music": ["{p} played the guitar {d}", "{p} sings a song in the chapel",
              "the musician tuned the violin", "{p} learned new chords on the piano",
              "the band played drums and flute", "{p} bought an acoustic guitar",
              "{p} wrote a song {d}", "the piano sounded lovely in the hall"],
    "sports": ["{p} played tennis {d}", "the team scored a late goal",
               "the players won the league", "{p} watched the football games",
               "the coaches praised the basketball team", "{p} went swimming {d}",
               "{p} practised a backhand volley", "the rowing team won a medal"],
    "weather": ["the rain did not stop {d}", "snow covered the hill {d}",
                "a storm hit the coast", "the wind was cold and strong",
                "the summer was dry and warm", "floods closed the roads",
                "heavy snow fell in winter", "the sky cleared after the storm"],
}
NEUTRAL = ["{p} went to the library {d}", "{p} found a lost wallet",
           "{p} read a book on the sofa", "{p} painted the garden fence",
           "{p} visited the museum {d}", "{p} repaired the door",
           "the bus was late {d}", "{p} cleaned the bedroom",
           "{p} took the ferry across the harbour", "{p} wrote a letter to a cousin"]
# How many topics a text has: none (some texts have no label), mostly one or two.
TOPIC_COUNTS = [0] * 1 + [1] * 5 + [2] * 3 + [3] * 1


def fill(template, rng):
    return template.format(p=rng.choice(PEOPLE), d=rng.choice(DAYS))


def make_row(rng):
    topics = sorted(rng.sample(LABELS, rng.choice(TOPIC_COUNTS)))
    clauses = [fill(rng.choice(CLAUSES[t]), rng) for t in topics]
    neutral = rng.choice([0, 0, 1, 1, 2]) if topics else rng.choice([1, 2])
    clauses += [fill(c, rng) for c in rng.sample(NEUTRAL, neutral)]
    rng.shuffle(clauses)
    joiner = rng.choice([", ", " and ", " while ", ". "])
    return joiner.join(c[0].upper() + c[1:] if joiner == ". " or i == 0 else c
                       for i, c in enumerate(clauses)) + ".", topics


def main():
    rng = random.Random(SEED)
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "kerasbert_multilabel", "data")
    os.makedirs(folder, exist_ok=True)
    index = 0
    for split, size in SIZES.items():
        header = "id\ttext" + ("" if split == "test" else "\tlabels")
        lines = [header]
        for _ in range(size):
            text, topics = make_row(rng)
            lines.append(f"{index}\t{text}" + ("" if split == "test" else "\t" + ",".join(topics)))
            index += 1
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{split}: {size} rows")


if __name__ == "__main__":
    main()

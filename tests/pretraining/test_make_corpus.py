"""tools/samples/make_pretraining_corpus.py --source=wordnet: WordNet database lines become
"lemma: definition." and example sentences, documents break at a lexicographer file and
every 20 synsets, and a folder without the database files is refused before the output
exists."""

import os

import pytest

from tools.samples import make_pretraining_corpus as corpus

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"


def synset(offset, lexfile, words, gloss, pos="n"):
    fields = " ".join(f"{w} 0" for w in words)
    return (f"{offset:08d} {lexfile:02d} {pos} {len(words):02x} {fields} 001 @ 00001740 n "
            f"0000 | {gloss}  \n")


def write_database(folder, noun_lines, adj_lines=()):
    folder.mkdir(exist_ok=True)
    (folder / "data.noun").write_text(HEADER + "".join(noun_lines), encoding="utf-8")
    (folder / "data.adj").write_text(HEADER + "".join(adj_lines), encoding="utf-8")
    for name in ("data.verb", "data.adv"):
        (folder / name).write_text(HEADER, encoding="utf-8")
    return folder


def read_documents(path):
    text = path.read_text(encoding="utf-8")
    return [block.split("\n") for block in text.strip("\n").split("\n\n")]


def test_glosses_become_sentences_and_documents_break_at_lexicographer_files(tmp_path):
    nouns = [
        synset(100, 3, ["physical_entity"], "an entity that has physical existence"),
        synset(200, 3, ["whole", "unit"], 'an assemblage of parts; "how big is that part '
               'compared to the whole?"; "the team is a unit"'),
        synset(300, 5, ["dog", "domestic_dog"], 'a member of the genus Canis; "the dog barked '
               'all night"; "ok then"'),  # a two-word example is dropped
    ]
    adjectives = [synset(400, 0, ["long(a)"], "primarily temporal sense", pos="a")]
    folder = write_database(tmp_path / "wn", nouns, adjectives)
    output = tmp_path / "corpus.txt"

    corpus.main([f"--output={output}", "--source=wordnet", f"--wordnet_dir={folder}"])

    assert read_documents(output) == [
        ["physical entity: an entity that has physical existence.",
         "whole: an assemblage of parts.",
         "how big is that part compared to the whole?",
         "the team is a unit."],
        ["dog: a member of the genus Canis.", "the dog barked all night."],
        ["long: primarily temporal sense."],
    ]


def test_a_document_holds_at_most_twenty_synsets(tmp_path):
    nouns = [synset(i, 3, [f"word{i}"], f"gloss number {i}") for i in range(1, 46)]
    output = tmp_path / "corpus.txt"

    corpus.main([f"--output={output}", "--source=wordnet",
                 f"--wordnet_dir={write_database(tmp_path / 'wn', nouns)}"])

    assert [len(d) for d in read_documents(output)] == [20, 20, 5]


def test_missing_database_files_are_refused_before_the_output_exists(tmp_path, capsys):
    output = tmp_path / "corpus.txt"
    with pytest.raises(SystemExit) as exit_info:
        corpus.main([f"--output={output}", "--source=wordnet", f"--wordnet_dir={tmp_path}"])
    assert exit_info.value.code == 2
    assert f"--wordnet_dir={tmp_path}: no data.noun, data.verb, data.adj, data.adv" in \
        capsys.readouterr().err
    assert not output.exists() and os.listdir(tmp_path) == []


def write_sst2(folder, rows, dev_rows=()):
    folder.mkdir()
    (folder / "train.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows),
        encoding="utf-8")
    (folder / "dev.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{text}\t1\n" for text in dev_rows), encoding="utf-8")
    return folder


def test_task_text_adds_the_training_phrases_without_labels_in_documents_of_ten_lines(tmp_path):
    phrases = [f"a moving film number {i} " for i in range(23)]
    sst2 = write_sst2(tmp_path / "SST-2", [(p, i % 2) for i, p in enumerate(phrases)],
                      dev_rows=["the dev sentence stays unseen"])
    nouns = [synset(i, 3, [f"word{i}"], f"gloss number {i}") for i in range(1, 46)]
    output = tmp_path / "corpus.txt"

    corpus.main([f"--output={output}", "--source=wordnet",
                 f"--wordnet_dir={write_database(tmp_path / 'wn', nouns)}",
                 f"--task_text=sst2={sst2}"])

    documents = read_documents(output)
    from_task = [d for d in documents if d[0].startswith("a moving film")]
    assert sorted(len(d) for d in from_task) == [3, 10, 10]
    assert sorted(line for d in from_task for line in d) == sorted(p.strip() for p in phrases)
    assert sorted(len(d) for d in documents if d not in from_task) == [5, 20, 20]
    assert "unseen" not in output.read_text(encoding="utf-8")
    # the two sources are mixed (one fixed order), not one written after the other
    assert [d in from_task for d in documents] != sorted(d in from_task for d in documents)
    again = tmp_path / "again.txt"
    corpus.main([f"--output={again}", "--source=wordnet",
                 f"--wordnet_dir={tmp_path / 'wn'}", f"--task_text=sst2={sst2}"])
    assert again.read_text(encoding="utf-8") == output.read_text(encoding="utf-8")


@pytest.mark.parametrize("spec, message", [
    ("sst2", "--task_text=sst2: expected TASK=DIR"),
    ("nope={tmp}", "--task_text=nope: unknown task; available: "),
    ("sst2={tmp}/missing", "--task_text=sst2={tmp}/missing: {tmp}/missing/train.tsv: no such"),
])
def test_a_bad_task_text_is_one_line_before_the_output_exists(tmp_path, capsys, spec, message):
    output = tmp_path / "corpus.txt"
    with pytest.raises(SystemExit) as exit_info:
        corpus.main([f"--output={output}", f"--task_text={spec.format(tmp=tmp_path)}"])
    assert exit_info.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err
    assert not output.exists()


def test_a_bad_row_of_the_task_file_names_its_line_before_the_output_exists(tmp_path, capsys):
    sst2 = write_sst2(tmp_path / "SST-2", [("fine", 0), ("broken row without a label", None)])
    (sst2 / "train.tsv").write_text("sentence\tlabel\nfine\t0\nno label here\n",
                                    encoding="utf-8")
    output = tmp_path / "corpus.txt"
    with pytest.raises(SystemExit):
        corpus.main([f"--output={output}", f"--task_text=sst2={sst2}"])
    assert f"{sst2}/train.tsv:3" in capsys.readouterr().err
    assert not output.exists()

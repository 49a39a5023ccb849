"""Pre-training data: masking proportions, NSP pairs, the TFRecord files."""

import json
import random
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.pretraining import data

MASK, VOCAB_SIZE = 4, 1000
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu"]


def test_masking_proportions_over_many_draws():
    # 15% of the tokens are predicted; of those 80% [MASK], 10% random, 10% unchanged.
    options = data.DataOptions(max_seq_length=128, max_predictions_per_seq=128)
    rng = random.Random(0)
    predicted = total = masked = kept = replaced = 0
    for _ in range(400):
        tokens = [rng.randrange(100, VOCAB_SIZE) for _ in range(100)]
        out, positions, labels = data.mask_tokens(tokens, [True] * 100, [True] * 100,
                                                  options, VOCAB_SIZE, MASK, rng)
        assert positions == sorted(set(positions))
        assert labels == [tokens[i] for i in positions]
        # Positions that are not predicted never change.
        assert all(out[i] == tokens[i] for i in set(range(100)) - set(positions))
        total += 100
        predicted += len(positions)
        for i in positions:
            if out[i] == MASK:
                masked += 1
            elif out[i] == tokens[i]:
                kept += 1  # includes the rare random draw of the same token (p ~ 1/1000)
            else:
                replaced += 1
    assert predicted == 400 * 15
    # 6000 draws: the binomial standard deviation of a 10% share is ~0.4%.
    assert masked / predicted == pytest.approx(0.8, abs=0.015)
    assert kept / predicted == pytest.approx(0.1, abs=0.012)
    assert replaced / predicted == pytest.approx(0.1, abs=0.012)


def test_masking_respects_special_tokens_and_the_prediction_cap():
    options = data.DataOptions(max_seq_length=64, max_predictions_per_seq=5)
    rng = random.Random(1)
    tokens = [2] + list(range(100, 140)) + [3]
    maskable = [False] + [True] * 40 + [False]
    for _ in range(50):
        _, positions, _ = data.mask_tokens(tokens, maskable, [True] * 42, options,
                                           VOCAB_SIZE, MASK, rng)
        assert len(positions) == 5 and 0 not in positions and 41 not in positions


def test_whole_word_masking_masks_every_piece_of_a_word():
    options = data.DataOptions(max_seq_length=64, max_predictions_per_seq=64,
                               masked_lm_prob=0.3, whole_word_masking=True)
    rng = random.Random(2)
    # Words of 1-3 pieces: word k's pieces all carry label k.
    word_of, starts = [], []
    for k in range(30):
        n = 1 + k % 3
        word_of += [k] * n
        starts += [True] + [False] * (n - 1)
    tokens = [200 + k for k in word_of]
    for _ in range(50):
        _, positions, _ = data.mask_tokens(tokens, [True] * len(tokens), starts, options,
                                           VOCAB_SIZE, MASK, rng)
        chosen = {word_of[i] for i in positions}
        assert sorted(positions) == [i for i, k in enumerate(word_of) if k in chosen]


def _documents(n_docs=6, n_sentences=8, length=5):
    # Token ids encode their document (d * 1000) and sentence (s * 10).
    return [[[d * 1000 + s * 10 + t for t in range(length)] for s in range(n_sentences)]
            for d in range(1, n_docs + 1)]


def test_nsp_pairs_never_mix_documents():
    documents = _documents()
    options = data.DataOptions(max_seq_length=40, short_seq_prob=0.2)
    rng = random.Random(3)
    random_next = true_next = 0
    for _ in range(30):
        for index, document in enumerate(documents):
            for a, b, is_random in data.sentence_pairs(documents, index, options, rng):
                doc_a = {t // 1000 for t in a}
                doc_b = {t // 1000 for t in b}
                assert doc_a == {index + 1}
                assert len(doc_b) == 1
                if is_random:
                    random_next += 1
                    assert doc_b != doc_a  # from another document
                else:
                    true_next += 1
                    assert doc_b == doc_a
                    # B continues A: its first sentence follows A's last one.
                    assert (b[0] % 1000) // 10 == (a[-1] % 1000) // 10 + 1
    assert random_next / (random_next + true_next) == pytest.approx(0.5, abs=0.1)


def test_without_nsp_every_b_is_the_true_continuation():
    documents = _documents()
    options = data.DataOptions(max_seq_length=40, next_sentence_prob=0.0)
    rng = random.Random(4)
    pairs = [p for i in range(len(documents))
             for p in data.sentence_pairs(documents, i, options, rng)]
    assert pairs and not any(is_random for _, _, is_random in pairs)


def _write_corpus(path, n_docs=12):
    words = WORDS
    rng = random.Random(5)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_docs):
            for _ in range(6):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + " .\n")
            f.write("\n")
    return path


def _vocab(path):
    words = WORDS
    path.write_text("\n".join([*data.SPECIAL_TOKENS, ".", *words]) + "\n")
    return str(path)


def test_tfrecords_hold_bert_features(tmp_path):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    tokenizer = WordPieceTokenizer(_vocab(tmp_path / "vocab.txt"), do_lower_case=True)
    options = data.DataOptions(max_seq_length=32, max_predictions_per_seq=6, dupe_factor=2,
                               num_shards=2, heldout_fraction=0.5, documents_per_chunk=4)
    config = data.create_pretraining_data([corpus], str(tmp_path / "out"), tokenizer, options)
    assert json.loads((tmp_path / "out" / data.DATA_CONFIG).read_text()) == config
    shards = data.shard_names(str(tmp_path / "out"), 2)
    ds = data.make_dataset(shards, 32, 6, batch_size=1000, training=False)
    assert ds.options().autotune.enabled is False  # see pipeline.without_autotuning
    batch = next(iter(ds))
    n = config["train_instances"]
    assert batch["input_ids"].shape == (n, 32) and batch["masked_lm_ids"].shape == (n, 6)
    ids, mask = batch["input_ids"].numpy(), batch["input_mask"].numpy()
    for row in range(n):
        length = mask[row].sum()
        assert ids[row, 0] == tokenizer.cls_id and ids[row, length - 1] == tokenizer.sep_id
        assert (ids[row, length:] == tokenizer.pad_id).all()
        weights = batch["masked_lm_weights"].numpy()[row]
        positions = batch["masked_lm_positions"].numpy()[row][weights > 0]
        assert 0 < len(positions) <= 6 and (positions < length).all()
    assert config["heldout_instances"] > 0
    assert config["train_documents"] + config["heldout_documents"] == 12
    assert set(np.unique(batch["next_sentence_labels"].numpy())) == {0, 1}
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_vocabulary_learned_from_the_corpus(tmp_path):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    size = data.learn_vocab([corpus], 100, True, str(tmp_path / "vocab.txt"))
    vocab = (tmp_path / "vocab.txt").read_text().split("\n")[:-1]
    assert len(vocab) == size and vocab[:5] == list(data.SPECIAL_TOKENS)
    assert {"gamma", "delta", "."} <= set(vocab)
    # The corpus tokenizes without [UNK] on its own vocabulary.
    tokenizer = WordPieceTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    assert tokenizer.unk_id not in tokenizer.tokenize_ids(["alpha mu theta ."])[0].numpy()


def test_options_are_checked():
    with pytest.raises(InputError, match="--max_seq_length"):
        data.DataOptions(max_seq_length=4).check()
    with pytest.raises(InputError, match="--next_sentence_prob"):
        data.DataOptions(next_sentence_prob=1.5).check()


@pytest.mark.large
def test_cli_learns_a_vocabulary_and_writes_shards(tmp_path):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kerasbert.pretraining.create_data", f"--input_file={corpus}",
           f"--output_dir={out}", "--vocab_size=50", "--max_seq_length=32", "--dupe_factor=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (out / "vocab.txt").exists() and (out / "train-00000-of-00001.tfrecord").exists()
    bad = subprocess.run(cmd[:4] + [f"--output_dir={tmp_path / 'x'}", "--max_seq_length=4"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "--max_seq_length" in bad.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()


def test_missing_input_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="--input_file"):
        data.expand_files(str(tmp_path / "nothing*.txt"))

"""The bad-input cases of the reliability issue that other test files do not cover: each
fails with one InputError naming the file and line (or the flag), and writes nothing half.

Covered elsewhere: bad rows, labels outside the label set, non-UTF-8 bytes, empty and
header-only files (tests/tasks/*), SQuAD answers outside their context
(tests/tasks/test_squad.py), CoNLL tag errors (tests/tasks/test_conll.py), checkpoint shapes
(tests/model/test_encoders.py), contradictory flags (tests/test_config.py,
tests/test_main.py), the CLI's one line and exit 2 (tests/test_main.py).
"""

import errno
import io
import os
import subprocess
import sys

import pytest

import kerasbert
from kerasbert import io_utils, plugins, run_folder, storage
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.export.saved_model import check_export_dir
from kerasbert.model import encoders
from kerasbert.tasks import conll, glue, squad, swag

SAMPLES = os.path.join(os.path.dirname(kerasbert.__file__), "data", "samples")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kerasbert.__file__)))


def _cut(source, target, line, keep):
    """Copies `source` up to `keep` characters into its `line` (1-based), as a copy cut
    short by a crash or a full disk would end."""
    with open(source, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    with open(target, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines[: line - 1] + [lines[line - 1][:keep]]))
    return str(target)


@pytest.mark.parametrize("task, name, line, keep, message", [
    (glue.TASKS["sst2"], "glue/SST-2/train.tsv", 3, 10, "expected 2 tab-separated columns"),
    (swag.SwagTask(), "swag/train.csv", 3, 30, "expected 12 comma-separated fields"),
    (conll.ConllTask(), "conll2003/train.txt", 4, 8, "expected a word and its NER tag"),
    (squad.TASKS["squad_v1"], "squad/dev-v1.1.json", 6, 5, "malformed JSON"),
])
def test_truncated_files(tmp_path, task, name, line, keep, message):
    folder = tmp_path / "data"
    folder.mkdir()
    path = _cut(os.path.join(SAMPLES, name), folder / os.path.basename(name), line, keep)
    split = {"train.tsv": "train", "train.csv": "train", "train.txt": "train"}.get(
        os.path.basename(name), "dev")
    with pytest.raises(InputError) as info:
        task.read_examples(str(folder), split)
    text = str(info.value)
    assert text.startswith(f"{path}:") and message in text and "\n" not in text


@pytest.mark.parametrize("task, name, text, message", [
    (glue.TASKS["rte"], "dev.tsv", "index,sentence1,sentence2,label\n0,P.,H.,entailment\n",
     "missing column"),
    (swag.SwagTask(), "val.csv", ("sent1\tsent2\tending0\tending1\tending2\tending3\tlabel\n"
     "A.\tB\tc.\td.\te.\tf.\t0\n"), "missing column"),
    (conll.ConllTask(), "train.txt", "EU,NNP,B-NP,B-ORG\nrejects,VBZ,B-VP,O\n",
     "expected a word and its NER tag"),
])
def test_wrong_delimiters(tmp_path, task, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=rf"^{tmp_path / name}:1: .*{message}"):
        task.read_examples(str(tmp_path), name.rsplit(".", 1)[0])


@pytest.mark.parametrize("label", ["1.0", "positive", " 1", ""])
def test_mixed_label_types(tmp_path, label):
    (tmp_path / "train.tsv").write_text(f"sentence\tlabel\ngood .\t1\nbad .\t{label}\n")
    with pytest.raises(InputError, match=rf"train\.tsv:3: .*'{label}'"):
        glue.TASKS["sst2"].read_examples(str(tmp_path), "train")


@pytest.mark.parametrize("task, name, split", [
    (glue.TASKS["sst2"], "train.tsv", "train"),
    (conll.ConllTask(), "train.txt", "train"),
    (swag.SwagTask(), "train.csv", "train"),
    (squad.TASKS["squad_v1"], "dev-v1.1.json", "dev"),
])
def test_a_folder_where_a_file_is_expected_is_named_as_a_folder(tmp_path, task, name, split):
    (tmp_path / name).mkdir()  # not `no such file ...; <folder> has: ..., train.tsv`
    with pytest.raises(InputError) as info:
        task.read_examples(str(tmp_path), split)
    assert str(info.value) == f"{tmp_path / name}: is a folder, not a file"
    with pytest.raises(InputError, match=rf"^--train_file={tmp_path}: is a folder, not a file$"):
        RunConfig(task="sst2", output_dir=str(tmp_path / "run"), train_file=str(tmp_path))
    (tmp_path / name).rmdir()  # a missing file still lists what the folder holds
    (tmp_path / "other.txt").write_text("")
    with pytest.raises(InputError, match=rf"{name}: no such file.*; {tmp_path} has: other\.txt$"):
        task.read_examples(str(tmp_path), split)


def test_vocabulary_larger_than_the_checkpoint(tmp_path):
    loaded = encoders.random_encoder("2/32/2")
    vocab = tmp_path / "vocab.txt"
    with open(loaded.vocab_file, encoding="utf-8") as f:
        words = f.read().splitlines()
    vocab.write_text("\n".join(words + [f"extra{i}" for i in range(100)]), encoding="utf-8")
    config = RunConfig(task="sst2", output_dir=str(tmp_path / "run"), max_seq_length=32)
    with pytest.raises(InputError, match=r"--vocab_file=.*vocab\.txt: 30622 tokens, but the "
                                         r"encoder's embedding table has only 30522 rows"):
        run_lib.check_encoder_fits(config, loaded.backbone, WordPieceTokenizer(str(vocab)))


def test_output_dir_that_cannot_be_written(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    config = RunConfig(task="sst2", output_dir=str(blocker / "run"))
    with pytest.raises(InputError, match=rf"--output_dir={blocker / 'run'}: cannot write there"):
        run_folder.prepare(config)


def test_export_dir_that_cannot_be_made_is_found_without_making_anything(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for export_dir, reason in ((blocker, "cannot create it (File exists)"),
                               (blocker / "serving", "cannot create it (Not a directory)")):
        with pytest.raises(InputError) as info:
            check_export_dir(str(export_dir))
        assert str(info.value) == f"--export_dir={export_dir}: {reason}"
    check_export_dir(str(tmp_path / "new" / "serving"))  # can be made: fine, and not made
    assert sorted(os.listdir(tmp_path)) == ["a_file"]
    with pytest.raises(InputError, match=rf"^--feature_cache_dir={blocker}: cannot create it"):
        run_lib.resolve(RunConfig(task="sst2", output_dir=str(tmp_path / "run"),
                                  feature_cache_dir=str(blocker)), plugins.registry())
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(InputError, match=r"locked/serving: cannot create it \(Permission"):
            check_export_dir(str(locked / "serving"))


def _without_log_level(env):
    """The environment with kerasbert's own TF_CPP_MIN_LOG_LEVEL (conftest sets one)."""
    return {k: v for k, v in env.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def test_cli_export_dir_that_cannot_be_made_fails_before_training(tmp_path):
    """The issue's case: --export_dir=<a regular file> gave the right line only after
    training, with checkpoints/, encoder/, history.csv ... left in --output_dir."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=mrpc", "--init_checkpoint=random",
         "--model_size=2/32/2", "--max_seq_length=32", f"--export_dir={blocker}",
         f"--output_dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300,
        check=False, cwd=ROOT, env={**_without_log_level(os.environ), "PYTHONPATH": ROOT})
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [  # and TF's start-up lines are gone
        f"kerasbert: error: --export_dir={blocker}: cannot create it (File exists)"]
    assert result.stdout == "" and not (tmp_path / "run").exists()


class _FullDisk(io.StringIO):
    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_is_one_line_and_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "out" / "metrics.json"
    opened = []

    def full_disk_open(path, mode="r", *args, **kwargs):
        if "w" not in mode or path.endswith(".write_test"):  # reading works, and the probe
            return open(path, mode, *args, **kwargs)       # of an empty folder (0 bytes)
        opened.append(path)
        return _FullDisk()

    monkeypatch.setattr(storage, "open", full_disk_open, raising=False)  # every write
    with pytest.raises(InputError) as info:
        io_utils.atomic_write_json(str(target), {"accuracy": 1.0})
    monkeypatch.undo()
    assert str(info.value) == f"{target}: cannot write: No space left on device"
    assert opened and os.listdir(target.parent) == []  # no partial or temporary file

    # A whole run: the first write (run_config.json) fails cleanly, nothing else is written.
    monkeypatch.setattr(storage, "open", full_disk_open, raising=False)  # every write
    out = tmp_path / "run"
    with pytest.raises(InputError, match=r"run_config\.json: cannot write: No space left"):
        run_lib.execute(RunConfig(task="sst2", output_dir=str(out), init_checkpoint="random",
                                   model_size="2/32/2", max_seq_length=32,
                                   max_train_examples=8, max_eval_examples=8))
    assert not out.exists()  # the folder it made for the run is gone again


def test_tagging_loss_is_refused_where_it_cannot_apply(tmp_path):
    registry = plugins.registry()
    with pytest.raises(InputError, match=r"^--tagging_loss=token_mean: the sst2 task is not a "
                                         r"tagging task"):
        run_lib.resolve(RunConfig(task="sst2", output_dir=str(tmp_path / "run"),
                                  tagging_loss="token_mean"), registry)
    config = RunConfig(task="conll2003", output_dir=str(tmp_path / "run"),
                       init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
                       head="tagger_crf", tagging_loss="token_mean")
    with pytest.raises(InputError, match=r"^--tagging_loss=token_mean: the head tagger_crf "
                                         r"brings its own loss"):
        run_lib.execute(config, registry)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("head, flag, layers", [
    ("feature_bilstm", "feature_bilstm_layers", "concat_last_four"),
    ("bilstm_crf", "bilstm_crf_layers", "sum_last_four"),
])
def test_layer_choice_deeper_than_the_encoder_is_one_line_naming_its_flag(tmp_path, head, flag,
                                                                         layers):
    """The last four layers of a 2-layer encoder: refused as the head is built, in one line
    naming the head's own flag (raised inside the head's call, Keras wrapped it in a
    multi-line report of its own), and no run folder made."""
    out = tmp_path / "run"
    config = RunConfig(task="conll2003", head=head, init_checkpoint="random",
                       model_size="2/32/2", max_seq_length=32, max_train_examples=8,
                       head_options={flag: layers}, output_dir=str(out))
    with pytest.raises(InputError) as info:
        run_lib.execute(config)
    assert str(info.value) == (f"--{flag}={layers} needs an encoder with at least 4 "
                               "transformer layers; this one has 2")
    assert not out.exists()

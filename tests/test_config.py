import copy
import dataclasses
import json

import pytest

from kerasbert import flags as kb_flags
from kerasbert.config import RunConfig
from kerasbert.errors import InputError


def _config(tmp_path, **overrides):
    values = dict(task="mrpc", output_dir=str(tmp_path / "run"))
    values.update(overrides)
    return RunConfig(**values)


@pytest.mark.parametrize("flag, value, message", [
    ("train_batch_size", 0, "--train_batch_size=0: must be a positive integer"),
    ("eval_batch_size", -1, "--eval_batch_size=-1: must be a positive integer"),
    ("num_train_epochs", -1.0, "--num_train_epochs=-1.0: must not be negative"),
    ("learning_rate", 0.0, "--learning_rate=0.0: must be positive"),
    ("head_learning_rate", -1e-3, "--head_learning_rate=-0.001: must be positive"),
    ("warmup_proportion", 1.5, "--warmup_proportion=1.5: must be within"),
    ("max_seq_length", 2, "--max_seq_length=2: must be at least 3"),
    ("dropout", 1.0, "--dropout=1.0: must be within"),
    ("max_train_examples", 0, "--max_train_examples=0: must be a positive integer"),
    ("length_group_batches", 0, "--length_group_batches=0: must be a positive integer"),
])
def test_bad_flag_values_name_the_flag(tmp_path, flag, value, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace(".", r"\.")):
        _config(tmp_path, **{flag: value})


def test_contradictory_flags_are_rejected(tmp_path):
    with pytest.raises(InputError, match="nothing to do"):
        _config(tmp_path, do_train=False, do_eval=False, do_predict=False)
    with pytest.raises(InputError, match="--use_tfds"):
        _config(tmp_path, use_tfds=True, data_dir=str(tmp_path))
    with pytest.raises(InputError, match="--data_dir=.*no such folder"):
        _config(tmp_path, data_dir=str(tmp_path / "missing"))
    with pytest.raises(InputError, match="--head_learning_rate=0.001: is the fine-tune "
                       "phase's, but --num_train_epochs=0 has none"):
        _config(tmp_path, head_learning_rate=1e-3, frozen_epochs=1.0, num_train_epochs=0.0)


def test_config_is_frozen_and_round_trips_through_json(tmp_path):
    config = _config(tmp_path, learning_rate=3e-5, head_options={"cls_linear_use_pooler": False})
    with pytest.raises(Exception):
        config.task = "sst2"
    path = tmp_path / "run_config.json"
    config.save(str(path))
    assert RunConfig(**json.loads(path.read_text())) == config


def test_task_recipe_fills_only_missing_values(tmp_path):
    from kerasbert.tasks.base import Task

    class Recipe(Task):
        default_head = "cls_linear"
        default_learning_rate = 2e-5
        default_train_batch_size = 16
        default_num_train_epochs = 3.0

    resolved = _config(tmp_path, learning_rate=5e-5).resolved(Recipe())
    assert (resolved.head, resolved.learning_rate, resolved.train_batch_size,
            resolved.num_train_epochs) == ("cls_linear", 5e-5, 16, 3.0)
    assert _config(tmp_path, num_train_epochs=0.0).resolved(Recipe()).num_train_epochs == 0.0


def test_a_run_exports_after_its_training_files_are_gone(tmp_path):
    """Exporting reads run_config.json; the data it trained on may have been deleted."""
    from kerasbert.run_folder import RUN_CONFIG, read_run_config

    train, predict = tmp_path / "train.json", tmp_path / "dev.json"
    train.write_text("{}")
    predict.write_text("{}")
    run = tmp_path / "run"
    run.mkdir()
    RunConfig(task="squad_v1", output_dir=str(run), train_file=str(train),
              predict_file=str(predict), data_dir=str(tmp_path)).save(str(run / RUN_CONFIG))
    train.unlink()
    predict.unlink()
    config = read_run_config(str(run))
    assert config.task == "squad_v1" and config.train_file is None and config.data_dir is None
    with pytest.raises(InputError, match="--train_file=.*no such file"):
        RunConfig(task="squad_v1", output_dir=str(run), train_file=str(train))


FLAG_FIELDS = [f for f in dataclasses.fields(RunConfig) if f.name != "head_options"]


@pytest.mark.parametrize("field", FLAG_FIELDS, ids=lambda f: f.name)
def test_every_run_config_field_is_its_flag(field):
    """flags.py makes these flags from RunConfig's declarations; fails if the two drift apart."""
    flag = kb_flags.FLAGS[field.name]
    choices = field.metadata["choices"]
    assert kb_flags.FLAGS.find_module_defining_flag(field.name) == "kerasbert.flags"
    # A required field's flag defaults to None; the config then rejects a run without it.
    assert flag.default == (None if field.default is dataclasses.MISSING else field.default)
    assert getattr(flag.parser, "enum_values", None) == (list(choices) if choices else None)
    enum_prefix = f"<{'|'.join(choices)}>: " if choices else ""  # absl lists an enum's values
    assert flag.help == enum_prefix + field.metadata["help"]


def test_help_shows_the_declared_sentences():
    """What --helpfull prints for kerasbert's flags is the help declared in RunConfig."""
    shown = " ".join(kb_flags.FLAGS.module_help("kerasbert.flags").split())
    declared = {f.name: f.metadata["help"] for f in FLAG_FIELDS}
    for name in ("doc_stride", "seed"):
        assert f"--{name}: {declared[name]} (default: " in shown


def test_config_from_flags_and_declared_choices_are_checked(tmp_path):
    values = copy.deepcopy(kb_flags.FLAGS)
    values(["kerasbert", "--task=squad_v1", f"--output_dir={tmp_path}", "--doc_stride=64",
            "--mixed_precision=mixed_bfloat16", "--nodo_eval"])
    config = RunConfig.from_flags(values, {"cls_linear_use_pooler": False})
    assert (config.doc_stride, config.mixed_precision, config.do_eval, config.n_best_size) == (
        64, "mixed_bfloat16", False, 20)
    assert config.head_options == {"cls_linear_use_pooler": False}
    with pytest.raises(InputError, match="--stream_train_data=maybe: must be one of auto, true, "
                       "false"):
        _config(tmp_path, stream_train_data="maybe")

"""The command line a new user meets: --help, --helpfull, --config, progress lines in a log,
Ctrl-C, and hints that are true of the run (kerasbert/command.py, kerasbert/main.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from absl import flags

from kerasbert import command, config as config_lib
from kerasbert.training.progress import Progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The `kerasbert` console script (setup.cfg: kerasbert = kerasbert.main:run), as installed.
CONSOLE = [sys.executable, "-c",
           "import sys; sys.argv[0] = 'kerasbert'; from kerasbert.main import run; run()"]
TINY = ["--task=sst2", "--init_checkpoint=random", "--model_size=2/32/2",
        "--max_seq_length=32", "--train_batch_size=8"]


def cli(args, cwd=None, env=None, **kwargs):
    env = dict(os.environ, **(env or {}))
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, **kwargs)


def test_help_fits_one_screen_with_the_common_flags_grouped_and_their_defaults():
    result = cli([*CONSOLE, "--help"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 100
    assert lines[0] == "usage: kerasbert --task=TASK [--flag=value ...]"
    groups = [line[:-1] for line in lines if line in {g + ":" for g in config_lib.HELP_GROUPS}]
    assert groups == list(config_lib.HELP_GROUPS)
    shown = re.findall(r"^  --(\w+)", result.stdout, re.MULTILINE)
    assert 20 <= len(shown) <= 30
    for name in ("task", "data_dir", "train_file", "init_checkpoint", "num_train_epochs",
                 "learning_rate", "output_dir", "export_dir"):
        assert name in shown
    assert re.search(r"^  --seed=42 +\S", result.stdout, re.MULTILINE)  # defaults shown
    assert re.search(r"^  --model_size=tiny ", result.stdout, re.MULTILINE)
    assert "--helpfull" in result.stdout and "--config=FILE" in result.stdout
    assert "--flagfile=FILE" in result.stdout and "docs/guide/command-line.md" in result.stdout


def test_helpfull_lists_kerasbert_and_plugin_flags_not_other_libraries():
    result = cli([sys.executable, "-m", "kerasbert.main", "--helpfull"])
    assert result.returncode == 0, result.stderr
    for foreign in ("test_random_seed", "xml_output_file", "delta_threshold", "test_tmpdir",
                    "hbm_oom_exit", "run_with_pdb"):
        assert f"--{foreign}" not in result.stdout
    for own in ("--learning_rate", "--lora_rank", "--bilstm_crf_lstm_units",  # a head's
                "--mean_pool_dropout", "--config"):  # a plugin's; the command's own
        assert own in result.stdout


@pytest.mark.parametrize("args, main_flag", [
    (["kerasbert.main"], "--task"),
    (["kerasbert.landscape"], "--run_dir"),
    (["kerasbert.report"], "RUN_OR_SWEEP_DIR"),
    (["kerasbert.export.saved_model"], "--export_dir"),
    (["kerasbert.export.checkpoint"], "--format"),
    (["kerasbert.pretrain"], "--input_file"),
    (["kerasbert.pretraining.create_data"], "--input_file"),
    (["kerasbert.experiments"], "model_size"),
    (["kerasbert.experiments", "model_size"], "--sizes"),
    (["kerasbert.experiments", "findings"], "--runs"),
    (["kerasbert.experiments", "landscape_findings"], "--landscape_dirs"),
    (["kerasbert.experiments", "pretraining_ablation"], "--work_dir"),
    (["kerasbert.evaluate"], "squad_v1"),
])
def test_every_command_answers_help(args, main_flag, tmp_path):
    result = cli([sys.executable, "-m", *args, "--help"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert main_flag in result.stdout
    assert "Traceback" not in result.stderr
    assert os.listdir(tmp_path) == []


# --- --config ------------------------------------------------------------------------------

@pytest.fixture
def flag_values():
    """A command's flags, as kerasbert defines them, on a FlagValues of their own."""
    fv = flags.FlagValues()
    flags.DEFINE_string("task", None, "", flag_values=fv)
    flags.DEFINE_integer("seed", 42, "", flag_values=fv)
    flags.DEFINE_float("learning_rate", None, "", flag_values=fv)
    flags.DEFINE_boolean("do_predict", False, "", flag_values=fv)
    flags.DEFINE_list("learning_rates", None, "", flag_values=fv)
    flags.DEFINE_boolean("cls_linear_use_pooler", True, "", flag_values=fv)
    command.define_config_flag(fv)
    return fv


@pytest.mark.parametrize("suffix, text", [
    (".json", '{"task": "mrpc", "seed": 7, "learning_rate": 3e-5, "do_predict": true, '
              '"learning_rates": ["5e-5", "3e-5"], "head_options": '
              '{"cls_linear_use_pooler": false}}'),
    (".yaml", "task: mrpc\nseed: 7\nlearning_rate: 3.0e-5\ndo_predict: true\n"
              "learning_rates: [5e-5, 3e-5]\nhead_options:\n  cls_linear_use_pooler: false\n"),
])
def test_config_sets_flags_and_the_command_line_wins(flag_values, tmp_path, suffix, text):
    path = tmp_path / f"config{suffix}"
    path.write_text(text)
    rest = command.parse(["kerasbert", f"--config={path}", "--seed=3"], flag_values, "usage")
    assert rest == ["kerasbert"]
    assert flag_values.task == "mrpc" and flag_values.seed == 3  # the command line's
    assert flag_values.learning_rate == pytest.approx(3e-5) and flag_values.do_predict
    assert flag_values.learning_rates == ["5e-5", "3e-5"]
    assert flag_values.cls_linear_use_pooler is False  # run_config.json's head_options


@pytest.mark.parametrize("text, message", [
    ('{"task": "mrpc", "learnig_rate": 0.1}',
     "config.json: unknown key 'learnig_rate' (not a flag of this command; did you mean "
     "learning_rate?)"),
    ('{"seed": "abc"}', "config.json: seed: 'abc' is not a valid value"),
    ('{"seed": 1,\n "task": }', "config.json:2: not valid JSON"),
    ('[1, 2]', "config.json: a config is a mapping of flag names to values, not a list"),
])
def test_a_bad_config_is_one_line_naming_the_file_and_the_key(flag_values, tmp_path, capsys,
                                                              text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as done:
        command.parse(["kerasbert", f"--config={path}"], flag_values, "usage")
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kerasbert: error: ")
    assert message in err


def test_an_unknown_config_key_stops_the_run_before_anything_is_written(tmp_path):
    (tmp_path / "run.yaml").write_text("task: sst2\nnum_train_epoch: 1\n")
    result = cli([*CONSOLE, "--config=run.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("kerasbert: error: run.yaml: unknown key 'num_train_epoch' (not a "
                             "flag of this command; did you mean num_train_epochs?)\n")
    assert os.listdir(tmp_path) == ["run.yaml"]


# --- progress, hints, the resume command ---------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_lines_come_every_30_seconds_and_at_each_epochs_end():
    lines, clock = [], Clock()
    progress = Progress("finetune", 100, 32, lines.append, every=30.0, enabled=True, clock=clock)
    for step in range(1, 51):
        clock.now += 1.0  # a step a second
        progress.step(step, 0.5, epoch=1, epochs=2)
    progress.epoch_end(50, 1, 2)
    assert lines == [
        "kerasbert: finetune step 30/100 (epoch 1/2): 32.0 examples/s, ETA 1m10s, loss 0.5000",
        "kerasbert: finetune step 50/100 (epoch 1/2 done): 32.0 examples/s, ETA 0m50s, "
        "loss 0.5000"]


def test_progress_is_silent_on_a_terminal():
    lines = []
    progress = Progress("finetune", 10, 8, lines.append, every=0.0, enabled=False)
    progress.step(1, 0.5)
    progress.epoch_end(1, 1, 1)
    assert lines == []


def test_hints_are_true_of_the_run(tmp_path):
    from kerasbert import main

    base = dict(task="sst2", output_dir=str(tmp_path / "run"))
    on_sample = main.next_steps(config_lib.RunConfig(**base))
    assert any("--data_dir=" in line for line in on_sample)
    data = tmp_path / "glue"
    data.mkdir()
    own_data = main.next_steps(config_lib.RunConfig(**base, data_dir=str(data)))
    assert not any("--data_dir=" in line for line in own_data)
    eval_only = main.next_steps(config_lib.RunConfig(**base, data_dir=str(data),
                                                     do_train=False))
    assert not any("--init_checkpoint" in line for line in eval_only)


def test_the_resume_command_names_a_dated_output_dir():
    from kerasbert import main

    args = ["--task=sst2", "--train_file=my data.tsv"]
    assert (main.resume_command(args, prog="python -m kerasbert.main")
            == "python -m kerasbert.main --task=sst2 '--train_file=my data.tsv'")
    assert (main.resume_command(args, "kerasbert_runs/sst2-20261206-2300", prog="kerasbert")
            == "kerasbert --task=sst2 '--train_file=my data.tsv' "
            "--output_dir=kerasbert_runs/sst2-20261206-2300")


# --- real runs -----------------------------------------------------------------------------

@pytest.mark.large
def test_a_piped_run_prints_progress_and_its_config_repeats_it(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "task: sst2\ninit_checkpoint: random\nmodel_size: 2/32/2\nmax_seq_length: 32\n"
        "train_batch_size: 8\nmax_train_examples: 32\nnum_train_epochs: 2\nseed: 5\n")
    result = cli([*CONSOLE, "--config=run.yaml", "--seed=9", "--output_dir=first"],
                 cwd=tmp_path, env={"KERASBERT_PROGRESS_SECONDS": "0"})
    assert result.returncode == 0, result.stderr
    progress = re.findall(r"^kerasbert: finetune step (\d+)/8 \(epoch (\d)/2( done)?\): "
                          r"[\d.]+ examples/s, ETA \d+m\d\ds, loss \d\.\d{4}$",
                          result.stdout, re.MULTILINE)
    assert [(int(s), int(e), bool(d)) for s, e, d in progress] == (
        [(s, 1, False) for s in range(1, 5)] + [(4, 1, True)]
        + [(s, 2, False) for s in range(5, 9)] + [(8, 2, True)])
    first = json.loads((tmp_path / "first" / "run_config.json").read_text())
    assert first["seed"] == 9 and first["max_train_examples"] == 32  # command line, file
    # The run's own run_config.json is a config: the same run again, in another folder.
    result = cli([*CONSOLE, "--config=first/run_config.json", "--output_dir=again"],
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    again = json.loads((tmp_path / "again" / "run_config.json").read_text())
    assert {**again, "output_dir": "first"} == first
    assert (json.loads((tmp_path / "again" / "metrics.json").read_text())
            == json.loads((tmp_path / "first" / "metrics.json").read_text()))
    assert not re.search(r"step \d+/\d+ \(epoch \d/2\):", result.stdout)  # 30 s apart
    assert "resuming" not in result.stdout


@pytest.mark.large
def test_ctrl_c_names_the_checkpoint_and_the_command_that_resumes(tmp_path):
    # Long enough that the run is still training when the signal comes, even when this
    # test's polling is starved by a busy machine (6 epochs once finished first on CI).
    args = [*CONSOLE, *TINY, "--num_train_epochs=30", "--save_checkpoints_steps=5"]
    process = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("kerasbert_runs/*/checkpoints/checkpoint")):
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    line = err.strip().splitlines()[-1]
    (folder,) = tmp_path.glob("kerasbert_runs/*")
    match = re.fullmatch(r"kerasbert: interrupted; last checkpoint (\S+); resume with: (.+)",
                         line)
    assert match, err
    assert match.group(1).startswith(f"kerasbert_runs/{folder.name}/checkpoints/ckpt-")
    # The dated folder is named, so the same command resumes instead of starting anew.
    resume = match.group(2)
    assert resume == " ".join(["kerasbert", *args[3:], f"--output_dir=kerasbert_runs/{folder.name}"])
    result = cli([*CONSOLE, *resume.split()[1:]], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "kerasbert: resuming at phase 1" in result.stdout
    assert (folder / "metrics.json").exists()
    assert [p.name for p in (tmp_path / "kerasbert_runs").iterdir()] == [folder.name]

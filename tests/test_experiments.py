"""`python -m kerasbert.experiments`: the list names every built-in experiment, a name runs
its module's `run(argv)`, and an unknown name or bad input is one line, exit 2."""

import importlib
import subprocess
import sys

from kerasbert.experiments import __main__ as cli
from kerasbert.experiments import builtin

COMMAND = [sys.executable, "-m", "kerasbert.experiments"]


def test_list_names_every_builtin_experiment():
    done = subprocess.run([*COMMAND, "--list"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert set(listed) >= {spec.name for spec in builtin.EXPERIMENTS}
    for spec in builtin.EXPERIMENTS:
        assert spec.description and spec.reproduces, spec.name
        assert spec.reproduces in done.stdout


def test_every_builtin_experiment_has_a_run():
    for spec in builtin.EXPERIMENTS:
        assert callable(importlib.import_module(spec.module).run), spec.module


def test_an_unknown_experiment_is_one_line_and_exit_2(capsys):
    assert cli.main(["kerasbert.experiments", "no_such_experiment"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("kerasbert: error: unknown experiment 'no_such_experiment'")
    assert "strategies" in err  # the names to choose from


def test_no_name_prints_the_usage_and_exits_2(capsys):
    assert cli.main(["kerasbert.experiments"]) == 2
    assert "usage: python -m kerasbert.experiments --list" in capsys.readouterr().out


def test_the_sweep_experiment_needs_its_grid_and_says_so_in_one_line(tmp_path):
    done = subprocess.run([*COMMAND, "lr_sweep", "--task=rte", f"--output_dir={tmp_path / 's'}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    said = [line for line in done.stderr.splitlines() if line.startswith("kerasbert")]
    assert "Traceback" not in done.stderr and said == [
        "kerasbert: error: --learning_rates: a sweep needs its grid: --learning_rates (the "
        "paper's 5e-5,4e-5,3e-5,2e-5), --num_restarts or --seeds"]
    assert not (tmp_path / "s").exists()


def test_an_experiments_help_is_its_docstring_and_its_own_flags():
    done = subprocess.run([*COMMAND, "strategies", "--help"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("Fine-tune only vs frozen only vs stack-and-finetune")
    assert "--strategies:" in done.stdout and "--peft_learning_rate:" in done.stdout
    assert "--helpfull" in done.stdout

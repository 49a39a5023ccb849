"""The docs cannot drift from the code: the generated reference pages are current, every flag
of kerasbert.main is in them, and the README's commands are the ones CI runs."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from kerasbert import docs_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


# Collecting the other commands' flags starts one process per command (about a minute).
SLOW_PAGES = {"reference/other-commands.md"}


@pytest.mark.parametrize("page", [
    pytest.param(page, marks=pytest.mark.large) if page in SLOW_PAGES else page
    for page in sorted(docs_reference.PAGES)])
def test_checked_in_page_equals_the_generated_one(page):
    make = docs_reference.PAGES[page]
    generated = make(ROOT) if make in docs_reference.TAKES_ROOT else make()
    assert _read("docs", page) == generated, (
        f"docs/{page} is stale: run python -m kerasbert.docs_reference")


def test_every_flag_of_kerasbert_main_is_in_the_flags_reference():
    # In a fresh process: the flags kerasbert.main defines, and the built-in heads' flags,
    # as absl records them (their defining module is a kerasbert one).
    script = (
        "import kerasbert.main\n"
        "from absl import flags\n"
        "from kerasbert.heads import builtin\n"
        "builtin.kerasbert_define_flags(flag_values=flags.FLAGS)\n"
        "for module, defined in flags.FLAGS.flags_by_module_dict().items():\n"
        "    if module.startswith('kerasbert'):\n"
        "        print('\\n'.join(f.name for f in defined))\n")
    env = dict(os.environ, KERASBERT_DISABLE_PLUGIN_AUTOLOAD="1")
    names = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    # RunConfig's, the command line's own and a head's flags were all found
    assert "learning_rate" in names and "list_tasks" in names
    assert any(name.startswith("bimpm_") for name in names)
    reference = _read("docs", "reference", "flags.md")
    missing = [n for n in names if f"| `--{n}` |" not in reference]
    assert not missing, f"not in docs/reference/flags.md: {missing}"


def test_check_names_a_stale_page_and_fails(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(docs_reference, "PAGES", {
        page: make for page, make in docs_reference.PAGES.items() if page not in SLOW_PAGES})
    shutil.copy(os.path.join(ROOT, "CONTRIBUTING.md"), tmp_path)
    shutil.copytree(os.path.join(ROOT, "docs", "figures"), tmp_path / "docs" / "figures")
    assert docs_reference.main(["docs_reference", "--root", str(tmp_path)]) == 0
    assert docs_reference.main(["docs_reference", "--check", "--root", str(tmp_path)]) == 0
    flags_md = tmp_path / "docs" / "reference" / "flags.md"
    flags_md.write_text(flags_md.read_text().replace("`--learning_rate`", "`--lr`"))
    capsys.readouterr()
    assert docs_reference.main(["docs_reference", "--check", "--root", str(tmp_path)]) == 1
    assert "flags.md is stale" in capsys.readouterr().err


def test_ci_runs_the_readme_install_and_test_commands_verbatim():
    readme, ci = _read("README.md"), _read(".ci", "run").splitlines()
    install = next(line for line in readme.splitlines() if line.startswith("pip install --no-deps"))
    assert "pip install -e \".[test]\"" in install
    assert install in ci
    assert 'python -m pytest -q -m "not large" -n 2 --dist loadfile' in readme.splitlines()
    assert 'python -m pytest -q -m "not large" -n 2 --dist loadfile' in ci
    assert any(line.startswith("mkdocs build --strict") for line in ci)


def test_readme_is_a_short_guide_whose_links_resolve():
    readme = _read("README.md")
    assert len(readme.splitlines()) <= 300
    targets = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [t.partition("#")[0] for t in targets if not t.startswith(("http", "#"))]
    assert local, "the README links to the docs"
    missing = [t for t in local if not os.path.exists(os.path.join(ROOT, t))]
    assert not missing, f"README links to missing files: {missing}"

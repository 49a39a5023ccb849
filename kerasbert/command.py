"""How every kerasbert command reads its command line: absl flags, one way.

    command.run(entry, flag_values, usage=...)   # the process's exit status

- `--help` (-h, --helpshort): the command's short usage on stdout, exit 0.
- `--helpfull`: every flag of kerasbert and its plugins, not those of the libraries
  imported into absl's global FLAGS (absltest's --test_random_seed, TensorFlow's TPU tracer).
- `--config=FILE` (JSON or YAML): keys are flag names, flags given on the command line (or
  in absl's `--flagfile`) win; a run's run_config.json is a valid config.
- A bad flag or config key, and any `InputError`, is one line `kerasbert: error: ...`,
  exit 2 (errors.guarded); Ctrl-C is one line (what `on_interrupt` says), exit 130.
"""

import difflib
import json
import os
import re
import sys

from kerasbert.errors import InputError, guarded

HELP = ("--help", "-help", "-h", "-?", "--helpshort")
HELPFULL = ("--helpfull", "-helpfull")
INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
# Flags other libraries define in absl's global FLAGS when imported: not kerasbert's.
_LIBRARIES = ("absl", "tensorflow", "keras", "tf_keras", "keras_hub", "tensorboard", "jax",
              "ml_collections", "tensorflow_datasets", "tensorflow_text")
# run_config.json keys whose value is a dict of flags (the head's own flags).
NESTED = ("head_options",)
FOOTER = ("--config=FILE: flags from a JSON or YAML file (a run's run_config.json repeats "
          "the run);\n--flagfile=FILE: one --flag=value a line (absl). Flags on the command "
          "line win.\nDocs: docs/guide/command-line.md")


def prog_name(argv=None):
    """How the user started this command: `kerasbert` or `python -m kerasbert.<module>`."""
    argv = sys.argv if argv is None else argv
    orig = list(getattr(sys, "orig_argv", []))
    if "-m" in orig[:-1]:
        return f"python -m {orig[orig.index('-m') + 1]}"
    return os.path.basename(argv[0]) if argv else "kerasbert"


def own_modules(flag_values):
    """The modules that defined flag_values' flags, kerasbert's and its plugins' only."""
    return [module for module in flag_values.flags_by_module_dict()
            if module.split(".")[0] not in _LIBRARIES]


def full_help(flag_values):
    """--helpfull: every kerasbert (and plugin) flag, by the module that defines it."""
    parts = []
    for module in own_modules(flag_values):
        text = flag_values.module_help(module)
        if text:
            parts.append(text)
    return "\n\n".join(parts) + "\n\n" + FOOTER


def flag_line(flag, text, width=32):
    """`  --name=DEFAULT   text`: one line of a short usage."""
    default = flag.default_as_str if flag.default is not None else ""
    if isinstance(flag.default, bool):
        default = "true" if flag.default else "false"
    left = f"  --{flag.name}" + (f"={default.strip(chr(39))}" if default else "")
    if len(left) + 2 > width:
        return f"{left}  {text}"
    return f"{left:<{width}}{text}"


def module_usage(module_name, flag_values, doc=None):
    """A command's short usage: its docstring and its own module's flags."""
    doc = (doc if doc is not None else sys.modules[module_name].__doc__ or "").strip()
    # absl files a `python -m` module's flags under its path (sys.argv[0]), not __main__
    key = sys.argv[0] if module_name == "__main__" else module_name
    own = [f for f in flag_values.get_flags_for_module(key) if f.name != "config"]
    lines = [doc, ""] if doc else []
    for flag in own:
        lines.append(flag_line(flag, first_sentence(flag.help)))
    lines += ["", FOOTER, "--helpfull: every flag with its full help."]
    return "\n".join(lines)


def flags_usage(flag_values):
    """One `flag_line` per flag of a command's own FlagValues (--config aside)."""
    lines = []
    for name in sorted(flag_values):
        flag = flag_values[name]
        if name == "config" or flag.name != name:  # a short name: shown with its flag
            continue
        short = f" (-{flag.short_name})" if flag.short_name else ""
        lines.append(flag_line(flag, " ".join(flag.help.split()) + short))
    return "\n".join(lines)


def first_sentence(text, limit=72):
    text = " ".join((text or "").split())
    end = text.find(". ")
    text = text if end < 0 else text[:end + 1]
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


# --- Options declared argparse-style (a few experiments), parsed as absl flags ------------

def flags_of(parser):
    """A FlagValues with a flag per option of an argparse parser (its name, default, type,
    help; store_true: a boolean; nargs="+": a comma-separated list; required kept)."""
    import argparse

    from absl import flags

    fv = flags.FlagValues()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        name, text = action.dest, action.help or ""
        if isinstance(action, argparse._StoreTrueAction):
            flags.DEFINE_boolean(name, False, text, flag_values=fv)
        elif action.choices:
            flags.DEFINE_enum(name, action.default, list(action.choices), text, flag_values=fv)
        elif action.nargs in ("+", "*"):
            flags.DEFINE_list(name, action.default, text, flag_values=fv)
        else:
            define = {int: flags.DEFINE_integer, float: flags.DEFINE_float}.get(
                action.type, flags.DEFINE_string)
            define(name, action.default, text, flag_values=fv)
        if action.required:
            flags.mark_flag_as_required(name, flag_values=fv)
    return fv


def namespace(flag_values):
    """The parsed flags as attributes (what argparse's parse_args returns)."""
    import types

    return types.SimpleNamespace(**{name: flag_values[name].value for name in flag_values
                                    if flag_values[name].name == name and name != "config"})


def run_parser(parser, main, argv):
    """`main(namespace)` as a command whose options an argparse parser declares: parsed as
    every kerasbert command's flags (command.run), --help its description and options."""
    fv = flags_of(parser)

    def entry(args):
        if len(args) > 1:
            raise InputError(f"unexpected arguments: {' '.join(args[1:])} (a list flag takes "
                             "its values comma-separated, --flag=a,b)")
        return main(namespace(fv))

    prog, _, name = parser.prog.partition(" ")
    if prog.endswith(os.path.join("experiments", "__main__.py")):  # as the user typed it
        prog = "python -m kerasbert.experiments"
    prog = f"{prog} {name}".strip()
    usage = "\n".join([f"usage: {prog} [--flag=value ...]", parser.description or "",
                        "", flags_usage(fv)])
    return run(entry, fv, usage=usage, argv=list(argv))


def parse_with_flags(parser, argv):
    """argparse's parse_args(argv[1:]), parsed by absl (one way for every command)."""
    fv = flags_of(parser)
    rest = parse(list(argv), fv, lambda: flags_usage(fv))
    if len(rest) > 1:
        raise InputError(f"unexpected arguments: {' '.join(rest[1:])}")
    return namespace(fv)


# --- --config ----------------------------------------------------------------------------

def config_path(argv):
    """The value of --config in argv (last one wins, as absl does), or None."""
    found = None
    for i, arg in enumerate(argv):
        if arg.startswith("--config="):
            found = arg.split("=", 1)[1]
        elif arg == "--config" and i + 1 < len(argv):
            found = argv[i + 1]
    return found


def read_config(path):
    """{flag name: value} from a JSON or YAML file; an InputError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"--config={path}: {e.strerror or e}") from None
    if path.endswith((".yaml", ".yml")):
        import yaml

        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else path
            raise InputError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    else:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); a config "
                             "ending .yaml or .yml is read as YAML") from None
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise InputError(f"{path}: a config is a mapping of flag names to values, not a "
                         f"{type(values).__name__}")
    flat = {}
    for key, value in values.items():
        if key in NESTED and isinstance(value, dict):
            flat.update(value)
        else:
            flat[key] = value
    return flat


def apply_config(path, flag_values, given):
    """Sets the config's flags except those in `given` (set on the command line)."""
    for key, value in read_config(path).items():
        if key not in flag_values:
            close = difflib.get_close_matches(key, list(flag_values), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise InputError(f"{path}: unknown key '{key}' (not a flag of this command{hint})")
        if key in given or key in ("config", "flagfile"):
            continue
        flag = flag_values[key]
        try:
            if value is None:
                flag.value = None
            else:
                if isinstance(value, (list, tuple)) and not isinstance(flag.default, list):
                    value = ",".join(str(v) for v in value)
                flag.parse(value)
        except Exception as e:  # absl's IllegalFlagValueError, or a TypeError from a parser
            raise InputError(f"{path}: {key}: {value!r} is not a valid value ({e})") from None
    flag_values.validate_all_flags()


# --- The command -------------------------------------------------------------------------

def parse(argv, flag_values, usage):
    """absl's flag parsing with --help, --helpfull and --config: the unparsed arguments."""
    from absl import flags

    if any(arg in HELP for arg in argv[1:]):
        print(usage() if callable(usage) else usage)
        sys.exit(0)
    if any(arg in HELPFULL for arg in argv[1:]):
        print(full_help(flag_values))
        sys.exit(0)
    before = {name: flag_values[name].present for name in flag_values}
    try:
        rest = flag_values(argv)
        path = config_path(argv[1:]) or (flag_values["config"].value
                                         if "config" in flag_values else None)
        if path:
            given = {name for name in flag_values
                     if flag_values[name].present > before.get(name, 0)}
            apply_config(path, flag_values, given)
    except flags.Error as e:
        required = re.search(r"Flag --(\w+) must have a value other than None", str(e))
        print(f"kerasbert: error: --{required.group(1)}: required" if required
              else f"kerasbert: error: {e}", file=sys.stderr)
        sys.exit(2)
    except InputError as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        sys.exit(2)
    return rest


def define_config_flag(flag_values):
    from absl import flags

    if "config" not in flag_values:
        flags.DEFINE_string("config", None, "A JSON or YAML file of flag values (keys are flag "
                            "names; a run's run_config.json repeats it); flags on the command "
                            "line win.", flag_values=flag_values)


def run(entry, flag_values=None, usage=None, argv=None, on_interrupt=None, reraise=None):
    """Runs `entry(argv)` as a command (absl app) on `flag_values` (default: absl's global
    FLAGS) and returns the exit status (a caller passes it to sys.exit). `usage`: the
    --help text, or a function making it; `on_interrupt()`: the one line Ctrl-C prints."""
    from absl import app, flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    define_config_flag(flag_values)
    argv = list(sys.argv if argv is None else argv)
    if usage is None:
        usage = lambda: module_usage(entry.__module__, flag_values)  # noqa: E731
    if reraise is None:
        def reraise():
            return "verbose" in flag_values and bool(flag_values["verbose"].value)

    def flags_parser(args):
        rest = parse(args, flag_values, usage)
        if flag_values is not flags.FLAGS and not flags.FLAGS.is_parsed():
            flags.FLAGS.mark_as_parsed()  # absl's app reads its own flags from the global FLAGS
        return rest

    def body(args):
        from absl import logging

        if not flags.FLAGS["verbosity"].present:  # app.run raised it to INFO: keep it quiet
            logging.set_verbosity(logging.WARNING)  # (kerasbert's own lines go to stdout)
        try:
            return guarded(entry, reraise=reraise)(args)
        except KeyboardInterrupt:
            sys.stdout.flush()
            print(on_interrupt() if on_interrupt else "kerasbert: interrupted", file=sys.stderr,
                  flush=True)
            return INTERRUPTED

    try:
        app.run(body, argv=argv, flags_parser=flags_parser)
    except SystemExit as done:  # app.run ends the process; a caller in-process gets a status
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0

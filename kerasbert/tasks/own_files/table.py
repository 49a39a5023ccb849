"""A user's table file as rows of named fields: CSV, TSV or JSON Lines, told apart by the
file's extension. Every problem is an InputError naming the file (and line)."""

import csv
import json
import os

from kerasbert.errors import InputError, at
from kerasbert.io_utils import iter_utf8_lines

TABLE_EXTENSIONS = (".csv", ".tsv", ".jsonl", ".json")


def file_format(path: str) -> str:
    """"csv", "tsv" or "jsonl", from the extension; an InputError for any other."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in TABLE_EXTENSIONS:
        raise InputError(f"{at(path)}unknown file type {extension or '(no extension)'!r}: "
                         f"expected one of {', '.join(TABLE_EXTENSIONS)} (CSV, TSV, JSON Lines)")
    return {".json": "jsonl"}.get(extension, extension[1:])


def read_table(path: str):
    """(columns, rows): the header's column names and [(line number, {column: value})],
    every row checked to have the header's fields (CSV, TSV) or to be one JSON object
    (JSON Lines: `columns` are the keys of the first line). Empty files are refused."""
    kind = file_format(path)
    rows = _jsonl_rows(path) if kind == "jsonl" else _delimited_rows(path, kind)
    header = next(rows, None)
    if header is None:
        raise InputError(f"{at(path)}empty file: expected "
                         + ("a JSON object per line" if kind == "jsonl" else
                            "a header row and examples"))
    columns, first = header
    body = list(rows)
    if kind == "jsonl":
        body.insert(0, first)
    if not body:
        raise InputError(f"{at(path)}no examples (a header only)")
    return columns, body


def _delimited_rows(path, kind):
    """The header (columns, None), then (line, {column: value}) of each non-blank row."""
    delimiter = "\t" if kind == "tsv" else ","
    lines = iter_utf8_lines(path, kind.upper())
    # TSV: no quoting, as GLUE's files (a text's quotes stay literal); CSV: RFC 4180.
    reader = csv.reader(lines, delimiter=delimiter,
                        quoting=csv.QUOTE_NONE if kind == "tsv" else csv.QUOTE_MINIMAL)
    header = None
    try:
        for fields in reader:
            if not fields or fields == [""]:
                continue
            line = reader.line_num
            if header is None:
                if kind == "tsv" and len(fields) == 1 and "," in fields[0]:
                    raise InputError(f"{at(path, line)}no tab in the header: a .tsv file's "
                                     "columns are separated by tabs (is it a CSV? name it .csv)")
                header = [name.strip() for name in fields]
                yield header, None
                continue
            if len(fields) != len(header):
                raise InputError(
                    f"{at(path, line)}{len(fields)} fields, but the header has {len(header)} "
                    f"({', '.join(header)})"
                    + ("; a .tsv file's fields are separated by tabs" if kind == "tsv" else ""))
            yield line, dict(zip(header, fields))
    except csv.Error as e:
        raise InputError(f"{at(path, reader.line_num)}not valid {kind.upper()}: {e}") from None


def json_lines(path):
    """(line number, parsed value) of each non-blank line of a JSON Lines file; a line that
    is not JSON is the InputError naming it."""
    for number, line in enumerate(iter_utf8_lines(path, "JSON Lines"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{at(path, number)}not valid JSON ({e.msg}); a .jsonl file has "
                             "one JSON object per line") from None


def _jsonl_rows(path):
    """The first line's keys and row, then (line, object) of each further non-blank line."""
    first = True
    for number, value in json_lines(path):
        if not isinstance(value, dict):
            raise InputError(f"{at(path, number)}a {type(value).__name__}, not a JSON object "
                             "({\"column\": value, ...})")
        if first:
            first = False
            yield list(value), (number, value)
        else:
            yield number, value


def column(path: str, columns, name: str, flag: str, line: int | None = None) -> str:
    """`name` if the file has that column, else the InputError naming the flag and the
    columns the file has."""
    if name not in columns:
        raise InputError(f"{at(path, line)}no column {name!r} ({flag}); the file has: "
                         f"{', '.join(map(repr, columns))}")
    return name


def value(path: str, line: int, row, name: str):
    """A row's field `name` (JSON Lines rows may lack a key the first line has)."""
    if name not in row:
        raise InputError(f"{at(path, line)}no {name!r} field; the line has: "
                         f"{', '.join(map(repr, row))}")
    return row[name]

"""Reading a result file of any kind: checked before anything is drawn, judged or written.

A file that is not a result of this project, a schema version this code cannot read, an empty file,
or rows without the fields their kind needs are bad input: UsageError naming the file (one line,
exit 2). bench files come in every layout they were ever written in (records.bench); stress journals
line by line (records.journal); asv's results and its machine and benchmarks files (records.asv).
"""
from __future__ import annotations

import json
from pathlib import Path

from nccl_bench.core.errors import UsageError
import nccl_bench.records.asv as asv
import nccl_bench.records.bench_layouts as bench_layouts
import nccl_bench.records.stress_journal as journal
from nccl_bench.records.kinds import ASV_KINDS, KINDS, MAX_ROWS, REPORTED, SCHEMA_VERSION, check_rows
from nccl_bench.records.result import Result


MAX_BYTES = 1 << 30  # a result file: a soak's journal of millions of rounds is a few hundred MiB
# what one call reads together (a report's files, or its --compare files): as much as one file may hold, and as
# many rows; a stress journal counts by its rounds (kept slim), not by its bytes
MAX_BYTES_ALL = MAX_BYTES
MAX_ROWS_ALL = MAX_ROWS


def load(given: str, need_rows: bool = False, on_rounds=None) -> Result:
    """One file, whatever result kind it holds; `need_rows`: a file with no rows (where its kind has some)
    is bad input, as for a report. Bounded before it is parsed: its bytes, then (records.kinds) its rows.
    `on_rounds(n)`: how far a stress journal's reading is (records.stress_journal.read)."""
    return _load(given, need_rows, on_rounds)[0]


def _load(given: str, need_rows: bool, on_rounds) -> tuple[Result, int]:
    """load's Result, and the bytes it held whole (0 for a stress journal, read line by line)."""
    path = Path(given)
    if path.is_dir():
        raise UsageError(f"{given}: a folder, where a result file was expected")
    if not path.is_file():
        raise UsageError(f"{given}: no such file" if not path.exists() else f"{given}: not a file")
    constants: list[str] = []
    try:
        size = path.stat().st_size
        head = _journal_head(path, given, constants)
        if head is not None:  # a stress journal: read line by line
            if size > journal.MAX_BYTES:
                raise UsageError(f"{given}: {size} bytes, more than a stress journal holds "
                                 f"({journal.MAX_BYTES >> 30} GiB)")
            return journal.read(path, given, head, on_rounds), 0  # a journal with no round is always refused
        if size > MAX_BYTES:
            raise UsageError(f"{given}: {size} bytes, more than a result file holds ({MAX_BYTES >> 20} MiB)")
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark, as some editors save JSON, is no part of it
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{given}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise UsageError(f"{given}: empty file, not a result")
    first, _, rest = text.lstrip().partition("\n")
    head = _json(given, first, constants)
    doc = head if not rest.strip() else _json(given, text, constants)  # a one-line file is parsed once
    if doc is None:
        raise UsageError(f"{given}: not a result of nccl-bench (not JSON, nor a stress journal)")
    res = from_doc(doc, given, path, need_rows)
    if constants and res.kind not in ASV_KINDS:  # asv keeps a skipped benchmark as NaN; a measurement never
        raise UsageError(f"{given}: holds {constants[0]}, which no measurement of a {res.kind} result is")
    return res, size


def from_doc(doc, given: str, path: Path | None = None, need_rows: bool = False) -> Result:
    """A parsed JSON document as the Result of its kind."""
    path = path or Path(given)
    if isinstance(doc, dict) and {"commit_hash", "results", "result_columns"} <= doc.keys():
        return asv.results(path, given, doc)
    if (info := asv.info(path, given, doc)) is not None:
        return info
    if bench_layouts.is_layout(doc):  # bench -J: ours (kind bench) or written by nccl-tests itself
        return bench_layouts.result(path, given, doc, need_rows)
    if not (isinstance(doc, dict) and {"kind", "schema", "rows"} <= doc.keys()):
        raise UsageError(f"{given}: not a result of nccl-bench (no kind/schema/rows)")
    kind, schema = doc["kind"], doc["schema"]
    if kind not in KINDS:
        raise UsageError(f"{given}: kind '{kind}' is not a result kind nccl-bench reads ({', '.join(REPORTED)})")
    if kind == "bench" and schema == SCHEMA_VERSION:  # schema 1: before bench took nccl-tests' layout
        return bench_layouts.result(path, given, doc, need_rows)
    if schema != SCHEMA_VERSION:
        raise UsageError(f"{given}: schema version {schema!r} of kind '{kind}'; nccl-bench reads version "
                         f"{SCHEMA_VERSION}")
    meta = doc.get("meta") or {}
    if not isinstance(meta, dict):
        raise UsageError(f"{given}: its metadata block is not an object")
    check_rows(given, kind, doc["rows"], need_rows=need_rows)
    top = {k: v for k, v in doc.items() if k not in ("kind", "schema", "meta", "rows")}
    return Result(path, given, kind, meta, doc["rows"], top=top)


FIRST_LINE_MAX = 1 << 20  # a journal's header line is a few kilobytes


def _journal_head(path: Path, given: str, constants: list[str]) -> dict | None:
    """A stress journal's header (its first line), or None for a file of any other kind."""
    first = _first_line(path)
    head = _json(given, first, constants) if '"header"' in first else None
    return head if isinstance(head, dict) and head.get("type") == "header" else None


def _first_line(path: Path) -> str:
    """The file's first line that holds anything, at most FIRST_LINE_MAX characters of it: enough to tell a stress
    journal's header (its file is read line by line) from a whole JSON document."""
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        while line := f.readline(FIRST_LINE_MAX):
            if line.strip():
                return line
    return ""


def load_all(names: list[str], need_rows: bool = True, progress=None, rounds=None) -> list[Result]:
    """Each FILE; an asv results folder as its files (records.asv.folder); any other folder as the result
    files in it (*.json, *.jsonl). `progress(done, total)`, if given, is called after each file; `rounds(given,
    n)` while a stress journal is read."""
    files = [f for n in names for f in (folder(n) if Path(n).is_dir() else [n])]
    loaded, held, rows = [], 0, 0
    for f in files:
        res, size = _load(f, need_rows, (lambda n, f=f: rounds(f, n)) if rounds else None)
        loaded.append(res)
        rows += len(res.every_cycle())
        held += size
        if held > MAX_BYTES_ALL or rows > MAX_ROWS_ALL:  # said at the file that passes it, the rest unread
            what = f"{held:,} bytes" if held > MAX_BYTES_ALL else f"{rows:,} rows"
            raise UsageError(f"{f}: with the files before it, {what}: more than one report reads "
                             f"({MAX_BYTES_ALL >> 20} MiB, {MAX_ROWS_ALL:,} rows); report fewer files")
        if progress:
            progress(len(loaded), len(files))
    return loaded


def folder(given: str) -> list[str]:
    top = Path(given)
    if (top / "machine.json").is_file() or any((d / "machine.json").is_file() for d in top.iterdir() if d.is_dir()):
        return asv.folder(given)
    found = sorted(str(f) for f in top.iterdir() if f.is_file() and f.suffix in (".json", ".jsonl"))
    if not found:
        raise UsageError(f"{given}: a folder with no result files in it (*.json, *.jsonl, or asv results)")
    return found


def _json(given: str, text: str, constants: list[str]):
    """The parsed document, or None where it is not JSON; NaN and infinities noted in `constants`."""
    try:
        return json.loads(text, parse_constant=lambda c: constants.append(c) or float(c), parse_int=_whole(given))
    except RecursionError:
        raise UsageError(f"{given}: nested deeper than any result is") from None
    except ValueError:
        return None


INT_DIGITS_MAX = 4300  # Python's own bound on parsing one; a field's range is checked with its kind's


def _whole(given: str):
    """JSON's integers as Python's; one of more digits than any field of a result holds is said as such."""
    def parse(digits: str) -> int:
        if len(digits.lstrip("-")) > INT_DIGITS_MAX:
            raise UsageError(f"{given}: holds an integer of {len(digits.lstrip('-'))} digits, more than any field "
                             "of a result holds")
        return int(digits)
    return parse


def asv_units(given: list[Result], asv_results: list[Result]) -> dict[str, str | None]:
    """Each asv benchmark's unit, from a benchmarks.json among `given` or beside the machine folders
    of `asv_results`; {} where there is none (units only make the history read better)."""
    infos = [r for r in given if r.kind == "asv-benchmarks"]
    for path in dict.fromkeys(r.path.parent.parent / "benchmarks.json" for r in asv_results):
        if not infos and path.is_file():
            try:
                infos.append(load(str(path)))
            except UsageError:
                pass
    return {k: v for r in infos if r.kind == "asv-benchmarks" for k, v in r.meta["units"].items()}

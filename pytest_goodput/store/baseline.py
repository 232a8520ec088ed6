"""The baseline store: per test, a reviewable JSON file and its samples file, validated, atomic.

A baseline keeps a short history of sessions (newest last) so the verdict engine can judge a
new run against the run-to-run spread, not only against one lucky or unlucky sample. The
JSON holds the spec and each session's summary; the per-request samples sit beside it in a
compressed file it names by digest (``store/samples_file.py``), written first, so a reader
never pairs a JSON with samples it was not written with. Version 1 files (samples inline)
still read and are rewritten in version 2 on the next record.

The JSON is laid out for review (:func:`reviewable_json`): ``json.dumps(indent=...)`` puts
every list element on a line of its own (thousands of lines for a sweep's loads) or, without
indent, a whole file on one line; neither gives a readable ``git diff``. Here an object has one
key per line and a list of plain values stays on one line, so a re-recorded baseline's diff
shows the numbers that changed, each on its own line.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from pydantic import ValidationError

from pytest_goodput.schema.runs.baseline import (
    BASELINE_KIND,
    BASELINE_SCHEMA_VERSION,
    DEFAULT_HISTORY,
    BaselineFile,
    BaselineFileV1,
    SamplesRef,
)
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.schema.runs.session import Session
from pytest_goodput.store import samples_file
from pytest_goodput.store.files import WriteError, write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, see record()
    fcntl = None  # type: ignore[assignment]

DEFAULT_DIR = ".goodput/baselines"


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def reviewable_json(value: Any, indent: int = 1, _depth: int = 0) -> str:
    """``value`` as JSON text laid out for review (parsing it back gives ``value``)."""
    pad, inner = " " * (indent * _depth), " " * (indent * (_depth + 1))
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {reviewable_json(v, indent, _depth + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value and not all(_scalar(v) for v in value):
        items = [f"{inner}{reviewable_json(v, indent, _depth + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)


class BaselineError(Exception):
    """A baseline file exists but cannot be used; the message names the file and why."""


#: What follows a baseline's stem in the name of one of its samples files.
_OWN_SAMPLES = re.compile(r"\.[0-9a-f]{12}" + re.escape(samples_file.SUFFIX))
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-\[\]=+,@]")


def path_for(directory: Path, nodeid: str) -> Path:
    """``tests/test_x.py::TestA::test_b[p]`` → ``DIR/tests/test_x/TestA.test_b[p].json``."""
    module, _, rest = nodeid.partition("::")
    module = module[:-3] if module.endswith(".py") else module
    parts = [_UNSAFE.sub("_", p) for p in module.split("/") if p not in ("", ".", "..")]
    raw = rest.replace("::", ".")
    name = _UNSAFE.sub("_", raw) or "module"
    if name != raw or len(name) > 180:
        # Sanitising can map two ids to one name: a short hash keeps them apart.
        digest = hashlib.sha256(nodeid.encode()).hexdigest()[:8]
        name = f"{name[:180]}-{digest}"
    return directory.joinpath(*parts, f"{name}.json")


def load(path: Path, nodeid: Optional[str] = None) -> Optional[BaselineFile]:
    """The baseline at ``path``, ``None`` if there is none; :class:`BaselineError` if unusable.

    With ``nodeid``, a file recorded for another test is an error, never compared.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BaselineError(
            f"baseline {path} is not UTF-8 text (byte {exc.start}); "
            "fix or delete it, then record a new one with --goodput-update-baseline"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"baseline {path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
            "fix or delete it, then record a new one with --goodput-update-baseline"
        ) from None
    if not isinstance(data, dict) or data.get("kind") != BASELINE_KIND:
        raise BaselineError(
            f"{path} is not a pytest-goodput baseline (no \"kind\": \"{BASELINE_KIND}\"); "
            "it was left untouched — move it away or choose another --goodput-baseline directory"
        )
    version = data.get("schema_version")
    if version not in (1, BASELINE_SCHEMA_VERSION):
        raise BaselineError(
            f"baseline {path} has schema_version {version!r}; this pytest-goodput reads "
            f"versions 1 and {BASELINE_SCHEMA_VERSION}. Re-record it with --goodput-update-baseline "
            "after deleting it"
        )
    try:
        doc = (BaselineFileV1.model_validate(data).upgraded() if version == 1
               else BaselineFile.model_validate(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise BaselineError(f"baseline {path} is invalid at {loc}: {first['msg']}") from None
    if version != 1:
        doc = _with_samples(path, doc)
    _check_columns(path, doc)
    if nodeid is not None and doc.nodeid != nodeid:
        raise BaselineError(
            f"baseline {path} belongs to {doc.nodeid!r}, not {nodeid!r}; it was left untouched"
        )
    return doc


#: Largest sample a baseline may hold (ms, tokens, seconds): beyond it a value is damage,
#: and the statistics over it would overflow.
MAX_SAMPLE = 1e9


def _check_columns(path: Path, doc: BaselineFile) -> None:
    """Every sample column has one entry per request (the length of ``ok``), and every value
    is a number a measurement could have produced: finite, >= 0, at most ``MAX_SAMPLE``."""
    for i, run in enumerate(doc.sessions):
        for j, samples in enumerate(run.samples):
            n = len(samples.ok)
            where = f"baseline {path} is invalid at sessions.{i}.samples.{j}"
            again = "fix or delete it, then record a new one with --goodput-update-baseline"
            if not 0 < samples.window_s <= MAX_SAMPLE:  # also refuses NaN
                raise BaselineError(f"{where}.window_s: {samples.window_s!r} is not a window "
                                    f"of seconds in (0, {MAX_SAMPLE:g}]; {again}")
            for name in Samples.model_fields:
                column = getattr(samples, name)
                if not isinstance(column, list):
                    continue
                if len(column) != n:
                    raise BaselineError(f"{where}.{name}: {len(column)} values for {n} requests "
                                        f"(the length of ok); {again}")
                bad = next((v for v in column if not isinstance(v, (bool, type(None)))
                            and not 0 <= v <= MAX_SAMPLE), None)
                if bad is not None:
                    raise BaselineError(f"{where}.{name}: {bad!r} is not a measured value "
                                        f"(finite, 0 to {MAX_SAMPLE:g}); {again}")


def _with_samples(path: Path, doc: BaselineFile) -> BaselineFile:
    """``doc`` with each session's samples read from the file it names (checked by digest)."""
    again = "fix or delete both files, then record a new one with --goodput-update-baseline"
    if doc.samples is None:
        if doc.sessions:
            raise BaselineError(f"baseline {path} names no samples file; {again}")
        return doc
    where = path.parent / doc.samples.file
    if Path(doc.samples.file).name != doc.samples.file:
        raise BaselineError(f"baseline {path}: samples file {doc.samples.file!r} is not a file "
                            f"name beside it; {again}")
    try:
        data = where.read_bytes()
    except OSError as exc:
        raise BaselineError(f"cannot read the samples of baseline {path}: {where}: "
                            f"{exc.strerror or exc} (commit it with the baseline)") from None
    if samples_file.digest(data) != doc.samples.sha256:
        raise BaselineError(f"samples file {where} is not the one baseline {path} was written "
                            f"with (SHA-256 differs); {again}")
    try:
        per_session = samples_file.decode(data)
    except samples_file.SamplesFileError as exc:
        raise BaselineError(f"samples file {where}: {exc}; {again}") from None
    if len(per_session) != len(doc.sessions):
        raise BaselineError(f"samples file {where} holds {len(per_session)} sessions, baseline "
                            f"{path} {len(doc.sessions)}; {again}")
    sessions = [s.model_copy(update={"samples": x}) for s, x in zip(doc.sessions, per_session)]
    return doc.model_copy(update={"sessions": sessions})


def write(path: Path, doc: BaselineFile) -> BaselineFile:
    """Write ``doc`` in the current version: its samples file first, then the JSON naming it,
    then remove this baseline's older samples files. Returns what was written."""
    data = samples_file.encode([list(s.samples) for s in doc.sessions])
    name = samples_file.file_name(path.stem, data)
    doc = doc.model_copy(update={"schema_version": BASELINE_SCHEMA_VERSION,
                                 "samples": SamplesRef(file=name, sha256=samples_file.digest(data))})
    write_atomic(path.parent / name, data)
    stored = doc.model_dump(mode="json", exclude={"sessions": {"__all__": {"samples"}}})
    write_atomic(path, reviewable_json(stored) + "\n")
    for old in path.parent.glob(f"{glob.escape(path.stem)}.*{samples_file.SUFFIX}"):
        if old.name != name and _OWN_SAMPLES.fullmatch(old.name[len(path.stem):]):
            old.unlink(missing_ok=True)
    return doc


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``'s directory (no lock without fcntl); the
    baseline and history stores share it.

    The directory itself, not a sibling lock file: baseline directories are reviewed and
    committed, and must not fill with lock files.
    """
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    lock_path = path.parent
    try:
        lock_path.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError as exc:
        raise WriteError(lock_path, exc.strerror or str(exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def record(
    path: Path,
    *,
    nodeid: str,
    spec: dict[str, Any],
    spec_hash: str,
    run: Session,
    existing: Optional[BaselineFile],
    history: int = DEFAULT_HISTORY,
    older: Optional[Callable[[Session], Session]] = None,
) -> BaselineFile:
    """Append session ``run`` to the history (a new identity starts a new history) and save it;
    ``older`` rewrites each kept session but ``run`` (what only the newest one keeps).

    Merge-safe: under an exclusive lock on the baseline's directory the baseline is
    re-read, ``run`` appended and the files written atomically, so concurrent recorders on
    one directory lose no session. The file read under the lock wins over ``existing`` (kept for
    callers that already loaded it; used only when the file cannot be read back). POSIX
    only: without ``fcntl`` (Windows) there is no lock and the last writer wins.
    """
    with locked(path):
        try:
            existing = load(path, nodeid)
        except BaselineError:
            pass  # the caller already decided what to do with a damaged file: keep `existing`
        identity = run.environment.identity if run.environment is not None else None
        runs: list[Session] = []
        if existing is not None and existing.spec_hash == spec_hash:
            runs = [r for r in existing.sessions
                    if (r.environment.identity if r.environment is not None else None) == identity]
        if older is not None:
            runs = [older(r) for r in runs]
        runs = (runs + [run])[-max(history, 1) :]
        return write(path, BaselineFile(nodeid=nodeid, spec=spec, spec_hash=spec_hash, sessions=runs))


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def find_all(directory: Path) -> dict[str, Path]:
    """nodeid → path of every readable baseline under ``directory`` (unreadable ones skipped)."""
    found: dict[str, Path] = {}
    if not directory.is_dir():
        return found
    for p in sorted(directory.rglob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: not a baseline
            continue
        if isinstance(data, dict) and data.get("kind") == BASELINE_KIND and "nodeid" in data:
            found[str(data["nodeid"])] = p
    return found

"""The baseline store: one reviewable JSON file per test, validated, written atomically.

A baseline keeps a short history of runs (newest last) so the verdict engine can judge a
new run against the run-to-run spread, not only against one lucky or unlucky sample.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

from pydantic import ValidationError

from pytest_goodput.schema.runs.baseline import (
    BASELINE_KIND,
    BASELINE_SCHEMA_VERSION,
    DEFAULT_HISTORY,
    BaselineFile,
    BaselineRun,
)
from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.store.files import WriteError, write_atomic

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, see record()
    fcntl = None  # type: ignore[assignment]

DEFAULT_DIR = ".goodput/baselines"


class BaselineError(Exception):
    """A baseline file exists but cannot be used; the message names the file and why."""


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
    if version != BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {path} has schema_version {version!r}; this pytest-goodput reads "
            f"version {BASELINE_SCHEMA_VERSION}. Re-record it with --goodput-update-baseline "
            "after deleting it"
        )
    try:
        doc = BaselineFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise BaselineError(f"baseline {path} is invalid at {loc}: {first['msg']}") from None
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
    for i, run in enumerate(doc.runs):
        for j, samples in enumerate(run.samples):
            n = len(samples.ok)
            where = f"baseline {path} is invalid at runs.{i}.samples.{j}"
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
    run: BaselineRun,
    existing: Optional[BaselineFile],
    history: int = DEFAULT_HISTORY,
) -> BaselineFile:
    """Append ``run`` to the history (a new identity starts a new history) and save it.

    Merge-safe: under an exclusive lock on the baseline's directory the baseline is
    re-read, ``run`` appended and the file written atomically, so concurrent recorders on one
    directory lose no run. The file read under the lock wins over ``existing`` (kept for
    callers that already loaded it; used only when the file cannot be read back). POSIX
    only: without ``fcntl`` (Windows) there is no lock and the last writer wins.
    """
    with locked(path):
        try:
            existing = load(path, nodeid)
        except BaselineError:
            pass  # the caller already decided what to do with a damaged file: keep `existing`
        runs: list[BaselineRun] = []
        if existing is not None and existing.spec_hash == spec_hash:
            runs = [r for r in existing.runs if r.environment.identity == run.environment.identity]
        runs = (runs + [run])[-max(history, 1) :]
        doc = BaselineFile(nodeid=nodeid, spec=spec, spec_hash=spec_hash, runs=runs)
        write_atomic(path, doc.model_dump_json(indent=1) + "\n")
        return doc


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

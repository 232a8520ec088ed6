"""Baseline file formats side by side: bytes and read time (``python bench/baseline_format.py DIR [V1DIR]``).

For every baseline under ``DIR`` (version 1 or 2): the version-1 JSON (samples inline,
``indent=1``), the version-2 JSON, and two candidate samples files of the same samples,
gzip'd columnar JSON (what the store writes) and a compressed numpy ``.npz`` (one array per
column over every run, lengths beside, NaN for null); then the median time to read each
samples file back into columns (gzip and ``json.loads``; ``np.load`` of every array), as a
ratio of the two measured in one run.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
import time
from pathlib import Path
from statistics import median

import numpy as np

from pytest_goodput.schema.runs.results import Samples
from pytest_goodput.store import baseline as store
from pytest_goodput.store import samples_file


def _npz(runs: list[Samples]) -> bytes:
    columns: dict[str, list] = {}
    for s in runs:
        for name, value in s.model_dump(mode="json", exclude_none=True).items():
            if isinstance(value, list):
                columns.setdefault(name, []).extend(np.nan if v is None else float(v) for v in value)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    arrays["lengths"] = np.asarray([len(s.ok) for s in runs])
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def version1_text(doc: store.BaselineFile) -> str:
    """The version-1 file of ``doc`` (samples inline, ``indent=1``), byte for byte what the
    store wrote before version 2: the figure "before" for sizes and re-record diffs."""
    v1 = {"kind": doc.kind, "schema_version": 1, "nodeid": doc.nodeid, "spec": doc.spec,
          "spec_hash": doc.spec_hash,
          "runs": [{**s.model_dump(mode="json", exclude={"samples", "sweep", "capacity"}),
                    "samples": [x.model_dump(mode="json") for x in s.samples],
                    "frontier": [p.model_dump(mode="json") for p in s.sweep.frontier] if s.sweep else None,
                    "capacity": s.capacity.as_dict() if s.capacity else None}
                   for s in doc.sessions]}
    return json.dumps(v1, indent=1) + "\n"


def _time(fn, repeat: int = 50) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return median(out)


def main(directory: Path, originals: Path | None = None) -> None:
    """``originals``: the version-1 files these were converted from; each is then checked to be
    byte for byte the version-1 file rebuilt from the conversion (nothing lost or changed)."""
    print(f"{'baseline':36} {'v1 JSON':>8} {'v2 JSON':>8} {'gz JSON':>8} {'npz':>8} {'npz/gz read':>12}"
          + ("  v1 rebuilt == original" if originals else ""))
    totals = np.zeros(4)
    for path in sorted(directory.rglob("*.json")):
        doc = store.load(path)
        if doc is None:
            continue
        v1_text = version1_text(doc)
        v1_bytes = len(v1_text)
        v2_bytes = path.stat().st_size if doc.schema_version == 2 else 0
        gz = samples_file.encode([list(s.samples) for s in doc.sessions])
        npz = _npz([x for s in doc.sessions for x in s.samples])
        t_gz = _time(lambda: json.loads(gzip.decompress(gz)))
        t_npz = _time(lambda: dict(np.load(io.BytesIO(npz))))
        sizes = np.array([v1_bytes, v2_bytes, len(gz), len(npz)])
        totals += sizes
        same = ""
        if originals is not None:
            same = f"  {(originals / path.relative_to(directory)).read_text(encoding='utf-8') == v1_text}"
        print(f"{path.name:36} {sizes[0]:8d} {sizes[1]:8d} {sizes[2]:8d} {sizes[3]:8d} {t_npz / t_gz:12.2f}{same}")
    print(f"{'total':36} {int(totals[0]):8d} {int(totals[1]):8d} {int(totals[2]):8d} {int(totals[3]):8d}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "example_suite/baselines"),
         Path(sys.argv[2]) if len(sys.argv) > 2 else None)

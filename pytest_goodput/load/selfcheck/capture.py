"""Packet capture of the engine's port: exact arrival times on a busy machine.

A client whose event loop is late reads several chunks at once and cannot tell when each
arrived; kernel stamps on its own socket do not help either (chunks queued behind a late
reader are coalesced and carry the last one's stamp). An ``AF_PACKET`` socket sees every
segment as it arrives, stamped by the kernel (``SO_TIMESTAMPNS``, CLOCK_REALTIME), however
late it is read. ``docs/capture.md`` says how to enable it and what it does not fix.

The capture runs in its own process (``client/capture_process.py``) so that it is not starved
together with the client's event loop. Here: whether a capture can run (:func:`unavailable`),
the process around a run (:class:`PacketCapture`), the offset between CLOCK_REALTIME and
the client's monotonic clock, measured before and after the run (:func:`clock_sample`), and
a run's capture from start to retimed exchanges (:func:`begin`, :func:`finish`).
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from pytest_goodput.load.client.capture_process import open_socket
from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.metrics import distribution
from pytest_goodput.measure.records.packets import departures, segments, streams
from pytest_goodput.measure.records.retime import ClockMap, depart_all, retime_all
from pytest_goodput.schema.runs.results import ReceiveTimestamps

#: Seconds the capture process may take to start, and to drain and exit.
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0
CAP_HINT = ("packet capture needs CAP_NET_RAW: run as root (e.g. a CI runner), or grant it to "
            "the interpreter with `setcap cap_net_raw+ep $(readlink -f $(which python))`")


class CaptureError(ValueError):
    """Packet capture was asked for (``capture="on"``) and cannot run; the message says why."""


def unavailable(base_url: str) -> Optional[str]:
    """Why packet capture cannot time this engine, or None when it can."""
    url = urlsplit(base_url)
    if url.scheme != "http":
        return f"{url.scheme}:// streams are encrypted: their bytes cannot be matched to packets"
    try:
        open_socket().close()
    except PermissionError:
        return CAP_HINT
    except OSError as exc:
        return f"no packet capture here: {exc}"
    return None


def why_not(backend: str, base_url: str) -> Optional[str]:
    """Why a run on ``backend`` against ``base_url`` cannot be captured, or None when it can."""
    if backend == "ray":
        return "the Ray workers' connections may be on other hosts"
    return unavailable(base_url)


def engine_port(base_url: str) -> int:
    url = urlsplit(base_url)
    return url.port or (443 if url.scheme == "https" else 80)


def clock_sample(rounds: int = 64) -> tuple[int, int, int]:
    """``(monotonic ns, realtime - monotonic ns, bracket ns)`` from the tightest of ``rounds``.

    Each round reads the monotonic clock, the realtime clock, the monotonic clock again;
    the realtime reading lies inside the bracket, so the offset errs by at most half of it.
    """
    best: Optional[tuple[int, int, int]] = None
    for _ in range(rounds):
        m0 = time.perf_counter_ns()
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m1 = time.perf_counter_ns()
        if best is None or m1 - m0 < best[2]:
            mid = (m0 + m1) // 2
            best = (mid, r - mid, m1 - m0)
    assert best is not None
    return best


class PacketCapture:
    """The capture process around a run: ``start()`` before the first connect, ``stop()`` after."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._dir = tempfile.TemporaryDirectory(prefix="goodput-capture-")
        self.path = Path(self._dir.name) / "packets.bin"
        self._proc: Optional[subprocess.Popen[str]] = None
        self.clock0: tuple[int, int, int] = (0, 0, 0)
        self.clock1: tuple[int, int, int] = (0, 0, 0)
        self.stats: dict[str, int] = {}

    def start(self) -> None:
        """Start capturing; returns once the socket is bound. Raises ``CaptureError``."""
        cmd = [sys.executable, "-m", "pytest_goodput.load.client.capture_process", str(self.port), str(self.path)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], START_TIMEOUT_S)
        line = self._proc.stdout.readline() if ready else ""
        if line.strip() != "READY":
            self._proc.kill()
            _, err = self._proc.communicate()
            self._dir.cleanup()
            raise CaptureError(f"the packet capture did not start: {(err or 'no answer').strip()[-300:]}")
        self.clock0 = clock_sample()

    def stop(self) -> bytes:
        """Stop capturing; return the capture file's bytes (``measure.records.packets.read_records``)."""
        self.clock1 = clock_sample()
        proc = self._proc
        if proc is None:
            return b""
        try:
            out, err = proc.communicate(input="", timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        self._proc = None
        try:
            self.stats = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.stats = {}
        try:
            return self.path.read_bytes()
        except OSError:
            return b""
        finally:
            self._dir.cleanup()


class CaptureFallbackWarning(UserWarning):
    """``capture="auto"`` could not capture: read-time stamps were used (said once)."""


#: Reasons already said: ``capture="auto"`` says each once per process, not once per run.
_SAID: set[str] = set()


def begin(mode: str, backend: str, base_url: str) -> tuple[Optional[PacketCapture], Optional[str]]:
    """Start a capture for a run as ``mode`` asks: ``(capture, None)`` or ``(None, why not)``.

    ``on`` raises :class:`CaptureError` where ``auto`` warns (once per reason and process:
    every run's ``receive_timestamps.reason`` repeats it) and falls back.
    """
    if mode == "off":
        return None, "capture off"
    why = why_not(backend, base_url)
    cap = None
    if why is None:
        cap = PacketCapture(engine_port(base_url))
        try:
            cap.start()
        except CaptureError as exc:
            cap, why = None, str(exc)
    if why is not None:
        if mode == "on":
            raise CaptureError(f"capture=on: {why}; use capture=auto to fall back to read-time stamps")
        if why not in _SAID:
            _SAID.add(why)
            warnings.warn(CaptureFallbackWarning(f"capture=auto: read-time stamps used: {why}"),
                          stacklevel=2)
    return cap, why


def finish(cap: Optional[PacketCapture], why: Optional[str],
           exchanges: list[RawExchange]) -> ReceiveTimestamps:
    """Stop ``cap`` and retime ``exchanges`` to its packets (or say read-time stamps were used)."""
    if cap is None:
        return ReceiveTimestamps(source="read", reason=why)
    blob = cap.stop()
    (m0, off0, b0), (m1, off1, b1) = cap.clock0, cap.clock1
    clock = ClockMap(m0, off0, m1, off1, max(b0, b1))
    segs = segments(blob)
    departed, lags = depart_all(exchanges, departures(segs, cap.port), clock)
    incoming = sum(1 for seg in segs if seg.sport == cap.port)
    stamps = retime_all(exchanges, streams(segs, cap.port), clock, packets=incoming,
                        dropped=int(cap.stats.get("dropped", 0)))
    return stamps.model_copy(update={"requests_departed": departed,
                                     "departure_lag_ms": distribution(lags)})



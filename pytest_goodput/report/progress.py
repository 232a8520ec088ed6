"""Progress of a long run: a live line on a terminal, a sparse plain line in CI logs.

On a TTY one line is rewritten in place with ``\\r`` at most ``max_hz`` times a second.
Anywhere else (CI logs, files) a line is written at most every ``interval_s`` seconds, so
a ten-minute run adds a few dozen lines to a log, not thousands.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """``Progress(total, label)``; call ``update(done)`` as work completes and ``close()`` at the end.

    ``total`` may be None when a run is bounded by time rather than a count (no ETA then).
    ``live=None`` picks the live line when ``stream`` is a TTY.
    """

    def __init__(
        self,
        total: Optional[int],
        label: str = "goodput",
        stream: Optional[TextIO] = None,
        live: Optional[bool] = None,
        *,
        interval_s: float = 10.0,
        max_hz: float = 10.0,
        unit: str = "req",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            isatty = getattr(self.stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = live
        self.interval_s = interval_s
        self.min_gap = 1.0 / max_hz if max_hz > 0 else 0.0
        self.unit = unit
        self._clock = clock
        self._start = clock()
        self._last_write: Optional[float] = None
        self._width = 0
        self._done = 0
        self._lines = 0
        self._closed = False
        self._stage = ""

    def line(self, now: Optional[float] = None) -> str:
        """``label (point 2/4): 120/400 (30%) 12.0s, 10.0 req/s, ETA 28s``."""
        now = self._clock() if now is None else now
        elapsed = now - self._start
        done = self._done
        rate = done / elapsed if elapsed > 0 else 0.0
        label = f"{self.label} ({self._stage})" if self._stage else self.label
        if self.total:
            pct = 100.0 * done / self.total
            text = f"{label}: {done}/{self.total} ({pct:.0f}%) {_duration(elapsed)}"
        else:
            text = f"{label}: {done} {_duration(elapsed)}"
        if elapsed > 0:
            text += f", {rate:.1f} {self.unit}/s"
        if self.total and rate > 0 and done < self.total:
            text += f", ETA {_duration((self.total - done) / rate)}"
        return text

    def _write_live(self, text: str) -> None:
        pad = " " * max(0, self._width - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self._width = len(text)

    def stage(self, text: str) -> None:
        """Name the part of the work under way (``concurrency 16, point 2/4``); shown in the line."""
        self._stage = text

    def update(self, done: int, total: Optional[int] = None) -> None:
        """Record progress (``total``: a new estimate of all the work, 0 for unknown); writes only
        when the rate limit (live) or the interval (plain) allows. ``done`` never goes back."""
        if self._closed:
            return
        if total is not None:
            self.total = total or None
        self._done = max(self._done, done)
        done = self._done
        now = self._clock()
        if self.live:
            if self._last_write is None or now - self._last_write >= self.min_gap:
                self._write_live(self.line(now))
                self._last_write = now
            return
        since = now - (self._last_write if self._last_write is not None else self._start)
        finished = self.total is not None and done >= self.total
        if since >= self.interval_s and not finished:  # the final line is close()'s
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()
            self._last_write = now
            self._lines += 1

    @property
    def lines_written(self) -> int:
        """Plain lines written so far (always 0 in live mode)."""
        return self._lines

    def close(self, keep: bool = False) -> None:
        """Finish: a live line is erased (or kept with ``keep``); a plain log gets a final line
        only if it already showed progress, so short runs add nothing to CI logs."""
        if self._closed:
            return
        self._closed = True
        now = self._clock()
        if self.live:
            if keep:
                self._write_live(self.line(now))
                self.stream.write("\n")
            elif self._width:
                self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        elif self._lines:
            self.stream.write(self.line(now) + " - done\n")
            self.stream.flush()
            self._lines += 1

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remeasure_line(nodeid: str, reasons: list[str]) -> str:
    """What the terminal says when an invalid run is measured once more, and why."""
    why = "; ".join(reasons) or "client health check failed"
    return (f"goodput: {nodeid}: measuring again - the client, not the server, set the pace "
            f"of the first run ({why})")

"""Incremental Server-Sent Events parser (pure, no I/O).

Used after a run to turn the raw ``(time, bytes)`` reads of a streamed response into
event payloads, so the hot path never parses anything. It follows the WHATWG
event-stream rules that matter for OpenAI-compatible servers:

* lines end in CRLF, LF or CR — and a CR at the end of one read may be followed by
  the LF of the next, which must not produce an extra blank line;
* a blank line dispatches the pending event; ``data:`` lines accumulate (joined by
  ``\\n``); one space after the colon is dropped; lines starting with ``:`` are
  comments (keep-alives); ``event:``, ``id:`` and ``retry:`` are remembered or ignored;
* bytes are decoded only per complete line, so a UTF-8 character split across two
  reads decodes correctly;
* a line, or an event's ``data:`` lines together, longer than ``MAX_LINE_BYTES`` (1 MiB)
  raises :class:`SSELimitError`: a broken or hostile server cannot make the parser hold an
  unbounded line.

``finish()`` is lenient where the standard is strict: a final event that is not
followed by a blank line is still returned, because some servers end the stream
right after the last ``data:`` line.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"
#: Longest SSE line, and largest event (its ``data:`` lines together), in bytes.
MAX_LINE_BYTES = 1 << 20


class SSELimitError(ValueError):
    """A line or an event is longer than the parser's limit: the stream is not usable."""


class SSEParser:
    """Feed raw bytes as they arrive; get back the data payloads of completed events.

    An incomplete line is kept as a list of pieces and joined once, when its end arrives, so
    a line split over many reads costs linear time. A line or an event longer than
    ``max_line_bytes`` raises :class:`SSELimitError`.
    """

    __slots__ = ("_data", "_data_size", "_parts", "_pending_cr", "_size", "_started",
                 "event", "last_event_id", "max_line_bytes")

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._parts: list[bytes] = []  # the incomplete last line, in pieces
        self._size = 0
        self._data: list[str] = []
        self._data_size = 0
        self._pending_cr = False
        self._started = False
        self.event: str | None = None
        """Type of the event being assembled (``event:`` field); reset on dispatch."""
        self.last_event_id: str | None = None

    def feed(self, data: bytes) -> list[str]:
        """Consume ``data`` and return the payloads of the events it completed, in order."""
        if not data:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if not self._started:
            data = self._take() + data  # at most two bytes held back
            if len(data) < 3 and _BOM.startswith(data):
                self._hold(data)  # could still be the start of a byte-order mark
                return []
            self._started = True
            if data.startswith(_BOM):
                data = data[3:]
        if b"\r" in data:
            if data.endswith(b"\r"):
                self._pending_cr = True  # a following LF belongs to this line ending
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in data:
            self._hold(data)
            return []
        lines = data.split(b"\n")
        if self._parts:
            lines[0] = self._take() + lines[0]
        tail = lines.pop()
        out: list[str] = []
        for line in lines:
            self._line(line, out)
        self._hold(tail)
        return out

    def finish(self) -> list[str]:
        """End of stream: return a final event left without its terminating blank line."""
        out: list[str] = []
        if self._parts:
            self._line(self._take(), out)
        if self._data:
            self._line(b"", out)
        return out

    def _hold(self, piece: bytes) -> None:
        if piece:
            self._parts.append(piece)
            self._size += len(piece)
            if self._size > self.max_line_bytes:
                raise SSELimitError(f"an SSE line is longer than {self.max_line_bytes} bytes")

    def _take(self) -> bytes:
        line = b"".join(self._parts)
        self._parts, self._size = [], 0
        return line

    def _line(self, line: bytes, out: list[str]) -> None:
        if len(line) > self.max_line_bytes:
            raise SSELimitError(f"an SSE line is longer than {self.max_line_bytes} bytes")
        if not line:
            if self._data:
                out.append("\n".join(self._data))
                self._data, self._data_size = [], 0
            self.event = None
            return
        if line[:1] == b":":
            return  # comment / keep-alive
        colon = line.find(b":")
        if colon < 0:
            field, value = line, b""
        else:
            field, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if field == b"data":
            self._data_size += len(value) + 1
            if self._data_size > self.max_line_bytes:
                raise SSELimitError(f"an SSE event is longer than {self.max_line_bytes} bytes")
            self._data.append(value.decode("utf-8", "replace"))
        elif field == b"event":
            self.event = value.decode("utf-8", "replace")
        elif field == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the standard requires


def parse_all(chunks: list[bytes]) -> list[str]:
    """Parse a complete stream given as a list of reads (convenience for tests and tools)."""
    parser = SSEParser()
    out: list[str] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.finish())
    return out

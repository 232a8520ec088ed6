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
  reads decodes correctly.

``finish()`` is lenient where the standard is strict: a final event that is not
followed by a blank line is still returned, because some servers end the stream
right after the last ``data:`` line.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed raw bytes as they arrive; get back the data payloads of completed events."""

    __slots__ = ("_buf", "_data", "_pending_cr", "_started", "event", "last_event_id")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
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
        buf = self._buf + data if self._buf else data
        if not self._started:
            if len(buf) < 3 and _BOM.startswith(buf):
                self._buf = buf  # could still be the start of a byte-order mark
                return []
            self._started = True
            if buf.startswith(_BOM):
                buf = buf[3:]
        if b"\r" in buf:
            if buf.endswith(b"\r"):
                self._pending_cr = True  # a following LF belongs to this line ending
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n" not in buf:
            self._buf = buf
            return []
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        out: list[str] = []
        for line in lines:
            self._line(line, out)
        return out

    def finish(self) -> list[str]:
        """End of stream: return a final event left without its terminating blank line."""
        out: list[str] = []
        if self._buf:
            self._line(self._buf, out)
            self._buf = b""
        if self._data:
            self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list[str]) -> None:
        if not line:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
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

"""Multiplexed log tails: one remote sh loop follows every server log of a host, by byte offset.

The loop prints framed chunks `==> IDX OFFSET LEN` followed by exactly LEN raw bytes, so the
console knows the offset of every byte it has: after a reconnect (or a relaunch adding a file) it
restarts the loop from those offsets, and no line is lost or repeated. An idle loop prints
`==> hb` each second; when the channel is closed, that write kills it (signals do not reach
root sessions, a closed pipe does). A file that disappears is reported once: `==> IDX G`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from console.sglang.command import shell_path

MAX_FRAME = 262_144
MAX_HEADER = 256
"""`==> IDX OFFSET LEN` is under 64 bytes; a longer line outside a frame is noise and is not buffered."""

TAIL_SCRIPT = f"""
n=0
while [ $# -gt 1 ]; do eval "p_$n=\\$1; o_$n=\\$2"; shift 2; n=$((n+1)); done
hb=0
while :; do
  sizes=$(i=0; while [ $i -lt $n ]; do eval "p=\\$p_$i"; if [ -r "$p" ]; then wc -c < "$p"; else echo -1; fi; i=$((i+1)); done)
  set -- $sizes
  i=0; moved=0
  while [ $i -lt $n ]; do
    s=$(($1)); shift
    eval "p=\\$p_$i; o=\\$o_$i"
    if [ "$s" -lt 0 ]; then
      eval "g=\\${{g_$i:-0}}"
      if [ "$g" = 0 ]; then echo "==> $i G"; eval "g_$i=1"; fi
    else
      eval "g_$i=0"
      if [ "$s" -lt "$o" ]; then echo "==> $i T $s"; o=0; fi
      if [ "$s" -gt "$o" ]; then
        c=$((s - o)); [ "$c" -gt {MAX_FRAME} ] && c={MAX_FRAME}
        echo "==> $i $o $c"
        tail -c +$((o + 1)) "$p" | head -c "$c"
        o=$((o + c)); moved=1
      fi
      eval "o_$i=$o"
    fi
    i=$((i+1))
  done
  if [ "$moved" = 0 ]; then
    hb=$((hb+1)); if [ "$hb" -ge 4 ]; then echo "==> hb"; hb=0; fi
    sleep 0.25
  fi
done"""


def tail_command(files: list[tuple[str, int]]) -> str:
    """`sh -c SCRIPT tail PATH OFFSET ...` (paths quoted; a leading ~/ means the remote $HOME)."""
    words = " ".join(f"{shell_path(p)} {int(o)}" for p, o in files)
    return f"exec sh -c {shlex.quote(TAIL_SCRIPT)} dflash-tail {words}"


@dataclass(frozen=True)
class Chunk:
    index: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class Missing:
    """The file is gone or unreadable (said once, until it is back)."""

    index: int


@dataclass(frozen=True)
class Truncated:
    index: int
    size: int


class FrameReader:
    """Raw bytes of the tail loop in; Chunk / Truncated / 'hb' out (frames may split anywhere)."""

    def __init__(self) -> None:
        self._buf = b""
        self._need = 0
        self._cur: tuple[int, int] | None = None
        self._got: list[bytes] = []
        self.noise_dropped = 0
        """Bytes outside any frame thrown away (a header line over MAX_HEADER never ends)."""

    def feed(self, data: bytes) -> list[Chunk | Truncated | Missing | str]:
        out: list[Chunk | Truncated | Missing | str] = []
        buf = self._buf + data
        pos = 0
        while pos < len(buf):
            if self._cur is not None:
                take = buf[pos : pos + self._need]
                self._got.append(take)
                self._need -= len(take)
                pos += len(take)
                if self._need == 0:
                    idx, off = self._cur
                    out.append(Chunk(idx, off, b"".join(self._got)))
                    self._cur, self._got = None, []
                continue
            nl = buf.find(b"\n", pos)
            if nl < 0:
                if len(buf) - pos > MAX_HEADER:  # no frame header is this long: noise, dropped (bounded memory)
                    self.noise_dropped += len(buf) - pos
                    pos = len(buf)
                break
            line = buf[pos:nl].decode("ascii", "replace")
            pos = nl + 1
            parts = line.split()
            if len(parts) < 2 or parts[0] != "==>":
                continue  # noise outside a frame (never expected)
            if parts[1] == "hb":
                out.append("hb")
            elif len(parts) == 3 and parts[2] == "G" and parts[1].isdigit():
                out.append(Missing(int(parts[1])))
            elif len(parts) == 4 and parts[2] == "T" and parts[1].isdigit() and parts[3].isdigit():
                out.append(Truncated(int(parts[1]), int(parts[3])))
            elif len(parts) == 4 and all(p.isdigit() for p in parts[1:]) and int(parts[3]) <= MAX_FRAME:
                # (a longer frame is never sent by either loop: its header is noise, not LEN bytes to hold)
                self._cur, self._need = (int(parts[1]), int(parts[2])), int(parts[3])
                if self._need == 0:
                    self._cur = None
        self._buf = buf[pos:]
        return out

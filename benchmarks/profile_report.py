"""Summarise a pyinstrument session (`-r session`): where the CPU goes, by package and by console function.

Used on the benchmarks' `--profile X.pyisession` output. Idle waits (select/epoll) are left out;
`[self]` samples count for the function that owns them; "console functions" are inclusive times.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from pyinstrument.session import Session

IDLE = ("poll", "select", "epoll", "kqueue", "sleep", "wait")


def _owner(f: object) -> object:
    while f is not None and getattr(f, "is_synthetic", False):
        f = f.parent  # type: ignore[attr-defined]
    return f


def summarise(path: str, top: int = 25) -> str:
    session = Session.load(path)
    root = session.root_frame()
    by_pkg: Counter[str] = Counter()
    by_fn: Counter[str] = Counter()
    console_incl: Counter[str] = Counter()
    idle = 0.0
    stack = [(root, frozenset())] if root is not None else []
    while stack:
        f, seen = stack.pop()
        key = f"{f.function} ({f.file_path_short}:{f.line_no})"
        if (f.file_path_short or "").startswith("console/") and not f.is_synthetic and key not in seen:
            console_incl[key] += f.time
            seen = seen | {key}
        stack.extend((c, seen) for c in f.children)
        self_t = f.time - sum(c.time for c in f.children)
        if self_t <= 1e-9:
            continue
        owner = _owner(f)
        name = getattr(owner, "function", "?") or "?"
        if any(w in name for w in IDLE) and (getattr(owner, "file_path_short", "") or "").find("console/") < 0:
            idle += self_t
            continue
        fp = (getattr(owner, "file_path_short", "") or "?").replace("\\", "/")
        by_fn[f"{name} ({fp}:{getattr(owner, 'line_no', '')})"] += self_t
        by_pkg[fp.split("/")[0] if "/" in fp else fp] += self_t
    busy = sum(by_pkg.values()) or 1.0
    out = [
        f"{path}: {session.duration:.1f} s wall, {session.cpu_time:.1f} s CPU; {busy:.1f} s busy samples, "
        f"{idle:.1f} s idle waits"
    ]
    out.append("busy self time by package:")
    out += [f"  {t:7.2f} s {100 * t / busy:5.1f}%  {k}" for k, t in by_pkg.most_common(10)]
    out.append(f"busy self time by function (top {top}):")
    out += [f"  {t:7.2f} s {100 * t / busy:5.1f}%  {k}" for k, t in by_fn.most_common(top)]
    out.append(f"console functions, inclusive (top {top}):")
    out += [f"  {t:7.2f} s {100 * t / busy:5.1f}%  {k}" for k, t in console_incl.most_common(top)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args(argv)
    print(summarise(a.session, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The fleet top bar fitted to the terminal's width, pure: what it drops or shortens first, so that the counts and
an active filter always stay on it (a long probe result is cut, never the filter)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len

GAP = "  "
"""Between two items of the bar."""
FLEX_MIN = 16
"""A cut item (probe result, status) narrower than this says nothing useful: it is dropped instead."""


@dataclass(frozen=True)
class Item:
    """One thing the bar says, in the forms it can take (longest first), and how readily it gives way.

    `rank`: the lowest rank shrinks first, through all its forms, before the next rank; `flex`: its last form can
    also be cut (with an ellipsis) to the room that is left; `keep`: its shortest form is never dropped."""

    forms: tuple[str, ...]
    style: str = ""
    rank: int = 0
    flex: bool = False
    keep: bool = False


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells, an ellipsis where it was cut."""
    if cell_len(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out += ch
        used += w
    return out + "…"


def fit(items: list[Item], width: int) -> list[tuple[str, str]]:
    """(text, style) segments of `items` in their order, in `width` cells, gaps included."""
    shown: list[str | None] = [it.forms[0] if it.forms else None for it in items]

    def total() -> int:
        words = [s for s in shown if s]
        return sum(cell_len(s) for s in words) + cell_len(GAP) * max(0, len(words) - 1)

    for i in sorted(range(len(items)), key=lambda k: items[k].rank):
        it = items[i]
        for form in it.forms[1:]:
            if total() <= width:
                break
            shown[i] = form
        over = total() - width
        if over <= 0:
            break
        text = shown[i]
        if text is None:
            continue
        if it.flex and cell_len(text) - over >= FLEX_MIN:
            shown[i] = cut(text, cell_len(text) - over)
            break
        if not it.keep:
            shown[i] = None
    segments: list[tuple[str, str]] = []
    used = 0
    for text, it in zip(shown, items, strict=True):
        if not text:
            continue
        gap = GAP if segments else ""
        room = width - used - cell_len(gap)
        if room <= 0:
            break
        if gap:
            segments.append((gap, ""))
            used += cell_len(gap)
        text = cut(text, room)  # the last resort when even the kept forms are too wide: cut at the edge
        segments.append((text, it.style))
        used += cell_len(text)
    return segments


def fleet_items(
    *,
    hosts: str,
    gpus: str,
    counts: str,
    filter_note: tuple[str, ...] | None,
    read_only: bool,
    demo: bool,
    probe: str,
    status: str,
) -> list[Item]:
    """The fleet screen's bar: name, counts, filter (its forms, longest first), read-only, demo, probe, status.

    Gives way in this order: the name, the demo's long label, the probe result (cut, then dropped), the status
    (cut), the host and GPU totals, then the filter's key hints. The phase counts, the filter and READ-ONLY stay."""
    items = [Item(("dflash-console › fleet ",), "bold", rank=0)]  # a wider gap after the name
    items.append(Item((f"{hosts} · {gpus} · {counts}", f"{gpus} · {counts}", counts), rank=4, keep=True))
    if filter_note is not None:
        items.append(Item(filter_note, "bold reverse", rank=6, keep=True))
    if read_only:
        items.append(Item((" READ-ONLY ",), "bold reverse", rank=6, keep=True))
    if demo:
        items.append(Item(("demo (simulated fleet)", "demo"), "italic", rank=1, keep=True))
    if probe:
        items.append(Item((f"probe: {probe}",), rank=2, flex=True))
    if status:
        items.append(Item((status,), rank=3, flex=True))
    return items

"""What `?` lists (console/ui/widgets/help_sheet.py): a screen's keys grouped by purpose, with keymap ids, so a
`[keymap]` table is easy to write, packed into as many columns as the terminal's width holds. Textual's own plumbing
(focus cycling, copy-text, the palette's binding) is left out. Pure: the rows come from a screen's bindings."""

from __future__ import annotations

import textwrap
from typing import Any

from textual.content import Content
from textual.screen import Screen

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Select", ("left", "right", "up", "down", "mark", "fleet-filter")),
    ("Servers", ("details", "launch", "relaunch", "stop", "probe", "chat", "bench")),
    (
        "Log",
        (
            "search",
            "search-next",
            "search-prev",
            "filter",
            "traceback",
            "follow",
            "wrap",
            "older-log",
            "current-log",
            "copy",
            "save",
            "info",
        ),
    ),
    ("Console", ("back", "help", "theme", "quit")),
)
"""Help sections in the order a person looks for them; ids not named here go under 'Other'."""
SCREEN_TITLES = {
    "FleetScreen": "Fleet screen",
    "ServerScreen": "Server screen",
    "ChatScreen": "Chat",
    "BenchScreen": "Bench",
    "LaunchScreen": "Launch",
}
INTERNAL_ACTIONS = {
    "focus_next",
    "focus_previous",
    "copy_text",
    "command_palette",
    "app.focus_next",
    "app.focus_previous",
    "screen.copy_text",
    "app.command_palette",
    "maximize",
    "minimize",
    "screen.maximize",
    "screen.minimize",
}
"""Textual's own bindings: real, but not this console's keys (ctrl+p is named in the footer of the help)."""


def grouped(rows: list[tuple[str, str, str, bool]]) -> list[tuple[str, list[tuple[str, str, str, bool]]]]:
    """Rows in GROUPS order, each group's in its listed order; empty groups dropped."""
    by_id = {r[2]: r for r in rows}
    out: list[tuple[str, list[tuple[str, str, str, bool]]]] = []
    named: set[str] = set()
    for title, ids in GROUPS:
        members = [by_id[i] for i in ids if i in by_id]
        named.update(ids)
        if members:
            out.append((title, members))
    rest = [r for r in rows if r[2] not in named]
    if rest:
        out.append(("Other", sorted(rest, key=lambda r: r[2])))
    return out


def binding_rows(screen: Screen[Any]) -> list[tuple[str, str, str, bool]]:
    """(keys, description, id, enabled) for the screen's active bindings, keymap applied, grouped by id."""
    rows: dict[str, tuple[list[str], str, str, bool]] = {}
    for key, ab in screen.active_bindings.items():
        b = ab.binding
        if b.action in INTERNAL_ACTIONS:
            continue
        ident = b.id or b.action
        desc = b.tooltip or b.description or b.action
        keys, had, _, _ = rows.setdefault(ident, ([], desc, ident, ab.enabled))
        if b.tooltip and had != b.tooltip:  # Textual's ctrl+q shares the 'quit' id: the console's words win
            rows[ident] = (keys, b.tooltip, ident, ab.enabled)
        display = screen.app.get_key_display(b)
        keys.append(display if display else key)
    return [(" ".join(dict.fromkeys(k)), d, i, e) for k, d, i, e in rows.values()]


def title_of(screen: Screen[Any]) -> str:
    name = type(screen).__name__
    return f"Keys: {SCREEN_TITLES.get(name, name)}"


Row = tuple[str, str, str, bool]
"""(keys, what it does, keymap id, enabled now)."""
HEADING = "keymap id"
COLUMN_GAP = 4


def key_table(rows: list[Row], width: int = 0) -> Content:
    """Aligned columns (key, keymap id, what it does) under a heading per group, as plain Content (a Rich Table
    took ~50 ms to draw). Groups stay whole and go side by side in as many columns as `width` cells hold (one
    if 0), each as wide as its widest line, so a wide terminal shows every key in few rows."""
    kw = max([3, *(len(k) for k, _, _, _ in rows)])
    iw = max([len(HEADING), *(len(i) for _, _, i, _ in rows)])
    head = Content.styled(f"{'key'.ljust(kw)}  {HEADING.ljust(iw)}  what it does", "dim")
    blocks = _blocks(rows, kw, iw, 0)
    columns = pack(blocks, 1) if not width else _fitting(blocks, width, head.cell_length)
    if width and len(columns) == 1 and any(line.cell_length > width for line in columns[0]):
        columns = pack(_blocks(rows, kw, iw, width), 1)  # one column and still too wide: wrap under the text
    widths = [max([head.cell_length, *(line.cell_length for line in col)]) for col in columns]
    lines: list[Content] = []
    for y in range(max((len(c) for c in columns), default=0) + 1):
        line = Content("")
        for x, col in enumerate(columns):
            part = head if y == 0 else (col[y - 1] if y - 1 < len(col) else Content(""))
            last = x == len(columns) - 1
            line += part if last else part + " " * (widths[x] + COLUMN_GAP - part.cell_length)
        lines.append(line)
    return Content("\n").join(lines)


def _blocks(rows: list[Row], kw: int, iw: int, width: int) -> list[list[Content]]:
    """A heading and a line per key for each group; with `width`, a description too long for it goes on in lines
    of its own under where it starts (not back at the left edge, under the keys)."""
    indent = kw + 2 + iw + 2
    room = width - indent if width else 0
    blocks: list[list[Content]] = []
    for title, members in grouped(rows):
        block = [Content.styled(title, "bold underline")]
        for keys, desc, ident, enabled in members:
            parts = textwrap.wrap(desc, room) if room >= 20 and len(desc) > room else [desc]
            tone = "" if enabled else "dim"
            block.append(
                Content.assemble((keys.ljust(kw), "bold"), "  ", (ident.ljust(iw), "dim"), "  ", (parts[0], tone))
            )
            block += [Content.assemble(" " * indent, (part, tone)) for part in parts[1:]]
        blocks.append(block)
    return blocks


def _fitting(blocks: list[list[Content]], width: int, least: int) -> list[list[Content]]:
    """The most columns (each as wide as its widest line) that fit `width`, and so the fewest rows."""
    for n in range(len(blocks), 1, -1):
        columns = pack(blocks, n)
        widths = [max([least, *(line.cell_length for line in col)]) for col in columns]
        if sum(widths) + COLUMN_GAP * (len(columns) - 1) <= width:
            return columns
    return pack(blocks, 1)


def pack(blocks: list[list[Content]], n: int) -> list[list[Content]]:
    """Blocks in order into at most `n` columns, none taller than needed: the shortest height (from the tallest
    block up) at which the blocks fit n columns in order, a blank line between two blocks of one column."""
    if not blocks:
        return [[]]
    height = max(len(b) for b in blocks)
    while True:
        columns: list[list[Content]] = [[]]
        for b in blocks:
            col = columns[-1]
            need = len(b) + (1 if col else 0)
            if col and len(col) + need > height:
                columns.append([])
                col = columns[-1]
                need = len(b)
            if col:
                col.append(Content(""))
            col.extend(b)
        if len(columns) <= n:
            return columns
        height += 1

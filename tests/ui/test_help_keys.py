"""The help's key table: groups kept whole, in order, packed side by side as far as the width holds."""

from __future__ import annotations

from textual.content import Content

from console.ui.help_keys import COLUMN_GAP, HEADING, grouped, key_table, pack

ROWS = [
    ("l", "Pick a preset for the selected GPU(s).", "launch", True),
    ("r", "Relaunch this server's preset.", "relaunch", True),
    ("s", "Stop the server (asks first).", "stop", False),
    ("← h", "Select the GPU to the left.", "left", True),
    ("→", "Select the GPU to the right.", "right", True),
    ("/", "Search the log (highlights, keeps context).", "search", True),
    ("o", "View the previous launch's log (again: the one before; O: back to the current).", "older-log", True),
    ("i", "Show/hide timeline and command.", "info", True),
    ("?", "Every key, with its keymap id.", "help", True),
    ("^q q", "Close the console; servers keep running.", "quit", True),
    ("pgdn", "Page Down", "page_down", True),
]


def _lines(width: int) -> list[str]:
    return str(key_table(ROWS, width)).splitlines()


def test_one_column_lists_every_key_under_its_group_in_order() -> None:
    lines = _lines(0)
    assert HEADING in lines[0]
    titles = [t for t, _ in grouped(ROWS)]
    assert titles == ["Select", "Servers", "Log", "Console", "Other"]
    assert [ln for ln in lines if ln in titles] == titles
    for _keys, desc, ident, _on in ROWS:
        assert sum(f" {ident} " in f" {ln} " and desc in ln for ln in lines) == 1, ident


def test_a_wide_terminal_gets_columns_that_fit_and_fewer_rows() -> None:
    one = _lines(0)
    width = max(len(ln) for ln in one) * 2 + COLUMN_GAP
    two = _lines(width)
    assert len(two) < len(one)
    assert all(len(ln) <= width for ln in two)
    assert two[0].count(HEADING) >= 2  # a heading over each column (each as wide as its own lines)
    for _keys, desc, ident, _on in ROWS:  # every key still there, once, whole
        assert sum(desc in ln for ln in two) == 1, ident
    assert _lines(width - 1 - max(len(ln) for ln in one)) == one  # too narrow for two: one column, as before


def test_groups_stay_whole_and_in_order_across_columns() -> None:
    lines = _lines(400)
    assert lines[0].count(HEADING) > 2  # several columns
    for title, members in grouped(ROWS):
        rows_at = [i for i, ln in enumerate(lines) if any(desc in ln for _k, desc, _i, _e in members)]
        head_at = next(i for i, ln in enumerate(lines) if title in ln.split())
        assert rows_at == list(range(head_at + 1, head_at + 1 + len(members))), title  # right under its title


def test_pack_uses_the_fewest_rows_for_n_columns_in_order() -> None:
    blocks = [[Content(f"{b}.{i}") for i in range(size)] for b, size in enumerate((3, 3, 3, 3))]
    two = pack(blocks, 2)
    assert len(two) == 2 and max(len(c) for c in two) == 7  # 3 + a blank + 3 in each
    assert [str(x) for x in two[0] + two[1] if str(x)] == [str(x) for b in blocks for x in b]
    assert len(pack(blocks, 4)) == 4 and max(len(c) for c in pack(blocks, 4)) == 3
    assert len(pack(blocks, 1)) == 1 and len(pack(blocks, 1)[0]) == 15
    assert pack([], 3) == [[]]


def test_a_narrow_terminal_wraps_a_long_description_under_its_column() -> None:
    """At 80 columns `/`'s and `o`'s descriptions went on at the left edge, under the keys."""
    width = 60
    lines = _lines(width)
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    start = next(ln for ln in lines if " older-log " in f" {ln} ").index("View")
    i = next(i for i, ln in enumerate(lines) if "View the previous" in ln)
    rest = lines[i + 1]
    assert rest[:start].strip() == "" and rest[start:].strip() and "current" in " ".join(lines[i : i + 3])

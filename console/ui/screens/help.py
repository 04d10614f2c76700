"""HelpScreen (`?`): the keys of the screen below grouped by purpose, with keymap ids, so a `[keymap]` table is easy
to write. Textual's own plumbing (focus cycling, copy-text, the palette's binding) is left out."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from console.ui.textual_private import LayoutOnce, QuietFrames

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Select", ("left", "right", "up", "down", "mark", "fleet-filter")),
    ("Servers", ("details", "launch", "relaunch", "stop", "probe", "chat", "bench")),
    ("Log", ("search", "search-next", "search-prev", "filter", "traceback", "follow", "wrap", "older-log",
             "current-log", "copy", "save", "info")),
    ("Console", ("back", "help", "theme", "quit")),
)
"""Help sections in the order a person looks for them; ids not named here go under 'Other'."""
SCREEN_TITLES = {"FleetScreen": "Fleet screen", "ServerScreen": "Server screen", "ChatScreen": "Chat",
                 "BenchScreen": "Bench", "LaunchScreen": "Launch"}
INTERNAL_ACTIONS = {"focus_next", "focus_previous", "copy_text", "command_palette", "app.focus_next",
                    "app.focus_previous", "screen.copy_text", "app.command_palette", "maximize", "minimize",
                    "screen.maximize", "screen.minimize"}
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


def binding_rows(screen: Screen) -> list[tuple[str, str, str, bool]]:
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


def title_of(screen: Screen) -> str:
    name = type(screen).__name__
    return f"Keys: {SCREEN_TITLES.get(name, name)}"


def key_table(rows: list[tuple[str, str, str, bool]]) -> Content:
    """Aligned columns (key, keymap id, what it does) under a heading per group, as plain Content (a Rich Table
    took ~50 ms to draw)."""
    kw = max([3, *(len(k) for k, _, _, _ in rows)])
    iw = max([9, *(len(i) for _, _, i, _ in rows)])
    lines = [Content.styled(f"{'key'.ljust(kw)}  {'keymap id'.ljust(iw)}  what it does", "dim")]
    for title, members in grouped(rows):
        lines.append(Content.styled(title, "bold underline"))
        for keys, desc, ident, enabled in members:
            lines.append(Content.assemble((keys.ljust(kw), "bold"), "  ", (ident.ljust(iw), "dim"), "  ",
                                          (desc, "" if enabled else "dim")))
    return Content("\n").join(lines)


class HelpScreen(LayoutOnce, QuietFrames, ModalScreen[None]):
    """Keys for the current screen; the command palette (ctrl+p) has the rest as `group: verb`.

    Opaque on purpose: a translucent modal makes Textual re-render the whole screen below through Rich
    for every frame of the dialog (~100 ms at 200×60 with 64 GPU panes; benchmarks/bench_keypress.py).
    """

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help-close")]
    DEFAULT_CSS = """
    HelpScreen { background: $background; }
    HelpScreen .dialog { max-width: 100; }
    HelpScreen .help-foot { height: auto; color: $text-muted; margin-top: 1; }
    """

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under
        self._rows = binding_rows(under)
        self._title = title_of(under)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static(self._title, classes="dialog-title", markup=False, id="help-title")
            yield Static(key_table(self._rows), markup=False, id="help-keys")
            yield Static("ctrl+p: command palette (server: relaunch, host: reconnect, …)\n"
                         "remap any id in hosts.toml [keymap], e.g. launch = \"ctrl+l\"", classes="help-foot",
                         markup=False)

    def show_for(self, under: Screen) -> None:
        """Reopened (the app keeps one, so an open is a resume, not a compose and a style pass: the first `?` on a
        server screen cost 70-80 ms of a busy machine's CPU that way): the title and keys of this screen below,
        each redrawn only when it differs (another kind of screen; a server's keys dim on a free GPU)."""
        self.under = under
        title = title_of(under)
        if title != self._title:
            self._title = title
            self.query_one("#help-title", Static).update(title)
        rows = binding_rows(under)
        if rows != self._rows:
            self._rows = rows
            self.query_one("#help-keys", Static).update(key_table(rows))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

"""HelpScreen (`?`): every binding of the screen below, with its keymap id, so a `[keymap]` table is easy to write."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import Static


def binding_rows(screen: Screen) -> list[tuple[str, str, str, bool]]:
    """(keys, description, id, enabled) for the screen's active bindings, keymap applied, grouped by id."""
    rows: dict[str, tuple[list[str], str, str, bool]] = {}
    for key, ab in screen.active_bindings.items():
        b = ab.binding
        ident = b.id or b.action
        desc = b.tooltip or b.description or b.action
        keys, _, _, _ = rows.setdefault(ident, ([], desc, ident, ab.enabled))
        display = screen.app.get_key_display(b)
        keys.append(display if display else key)
    return [(" ".join(dict.fromkeys(k)), d, i, e) for k, d, i, e in rows.values()]


def key_table(rows: list[tuple[str, str, str, bool]]) -> Content:
    """Three aligned columns (key, what it does, keymap id) as plain Content: a Rich Table took ~50 ms to draw."""
    kw = max([3, *(len(k) for k, _, _, _ in rows)])
    iw = max([9, *(len(i) for _, _, i, _ in rows)])
    head = Content.styled(f"{'key'.ljust(kw)}  {'keymap id'.ljust(iw)}  what it does", "bold underline")
    lines = [head]
    for keys, desc, ident, enabled in rows:
        lines.append(Content.assemble((keys.ljust(kw), "bold"), "  ", (ident.ljust(iw), "dim"), "  ",
                                      (desc, "" if enabled else "dim")))
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
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

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Static("Keys", classes="dialog-title", markup=False)
            yield Static(key_table(sorted(binding_rows(self.under), key=lambda r: r[2])), markup=False)
            yield Static("ctrl+p: command palette (server: relaunch, host: reconnect, …)\n"
                         "remap any id in hosts.toml [keymap], e.g. launch = \"ctrl+l\"", classes="help-foot",
                         markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

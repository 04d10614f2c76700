"""HelpScreen (`?`): every binding of the screen below, with its keymap id, so a `[keymap]` table is easy to write."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
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


class HelpScreen(ModalScreen[None]):
    """Keys for the current screen; the command palette (ctrl+p) has the rest as `group: verb`."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help-close")]
    DEFAULT_CSS = """
    HelpScreen .dialog { max-width: 100; }
    HelpScreen .help-foot { height: auto; color: $text-muted; margin-top: 1; }
    """

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("what it does", ratio=1)
        table.add_column("keymap id", style="dim", no_wrap=True)
        for keys, desc, ident, enabled in sorted(binding_rows(self.under), key=lambda r: r[2]):
            table.add_row(Text(keys), Text(desc, style="" if enabled else "dim"), Text(ident))
        with VerticalScroll(classes="dialog"):
            yield Static("Keys", classes="dialog-title", markup=False)
            yield Static(table)
            yield Static("ctrl+p: command palette (server: relaunch, host: reconnect, …)\n"
                         "remap any id in hosts.toml [keymap], e.g. launch = \"ctrl+l\"", classes="help-foot",
                         markup=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

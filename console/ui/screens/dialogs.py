"""Small modal dialogs: yes/no confirmation before anything that stops or replaces a server."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    """Asks one question; `y`/enter answers yes, `n`/escape no."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]
    DEFAULT_CSS = "ConfirmScreen .dialog { max-width: 72; }"

    def __init__(self, question: Text) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Confirm", classes="dialog-title", markup=False)
            yield Static(self.question, markup=False)
            yield Static("y / enter: yes    n / esc: no", classes="keys", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

"""Small modal dialogs: a confirmation before anything that stops or replaces a server, Cancel by default."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Asks one question. Cancel has the focus, so enter (or esc, n) cancels; only `y` or the Yes button says yes.

    A stray enter (the key that opened the server screen a moment ago) must never stop a server.
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes", tooltip="Yes: do it."),
        Binding("n,escape", "answer(False)", "Cancel", id="confirm-no", tooltip="Cancel (enter does too)."),
        Binding(
            "left,right,tab,shift+tab",
            "switch",
            "Switch",
            id="confirm-switch",
            show=False,
            tooltip="Move between Cancel and Yes.",
        ),
    ]
    DEFAULT_CSS = """
    ConfirmScreen .dialog { max-width: 72; }
    ConfirmScreen #buttons { height: auto; margin-top: 1; }
    ConfirmScreen Button { margin-right: 2; }
    """

    def __init__(self, question: Text, yes_label: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes_label

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Confirm", classes="dialog-title", markup=False)
            yield Static(self.question, markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="no", variant="primary")
                yield Button(self.yes_label, id="yes", variant="error")
            yield Static("enter / esc / n: cancel    y: yes", classes="keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_switch(self) -> None:
        target = "#yes" if self.query_one("#no", Button).has_focus else "#no"
        self.query_one(target, Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

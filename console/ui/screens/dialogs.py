"""Small modal dialogs: a confirmation before anything that stops or replaces a server, Cancel by default; a
command shown to read, select or copy."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea


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


class TextScreen(ModalScreen[None]):
    """Shows a command (a curl line) to read and select, with copying as one option: a terminal's clipboard
    escape (OSC 52) reaches no buffer under a tmux without `set-clipboard on`, so the text is always on screen."""

    BINDINGS = [
        Binding("c", "copy", "Copy", id="text-copy", tooltip="Copy to the terminal's clipboard (OSC 52)."),
        Binding("escape,q", "close", "Close", id="text-close", tooltip="Close."),
    ]
    DEFAULT_CSS = """
    TextScreen .dialog { max-width: 110; height: auto; }
    TextScreen TextArea { height: auto; max-height: 16; }
    TextScreen #buttons { height: auto; margin-top: 1; }
    TextScreen Button { margin-right: 2; }
    """

    def __init__(self, title: str, text: str, copy: Callable[[str], None]) -> None:
        super().__init__()
        self.title_text, self.text, self._copy = title, text, copy

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            yield TextArea(self.text, read_only=True, soft_wrap=True, show_line_numbers=False, id="text")
            with Horizontal(id="buttons"):
                yield Button("Copy", id="copy", variant="primary")
                yield Button("Close", id="close")
            yield Static(
                "select the text with the mouse, or c: copy (OSC 52; under tmux it needs set-clipboard on)"
                "    esc: close",
                classes="keys",
                markup=False,
                id="note",
            )

    def on_mount(self) -> None:
        self.query_one("#copy", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "copy":
            self.action_copy()
        else:
            self.dismiss(None)

    def action_copy(self) -> None:
        self._copy(self.text)
        self.query_one("#note", Static).update(
            "sent to the terminal's clipboard (OSC 52): if pasting gives nothing, select the text above    esc: close"
        )

    def action_close(self) -> None:
        self.dismiss(None)

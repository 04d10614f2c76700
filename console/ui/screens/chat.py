"""ChatScreen (`c`): stream a prompt's answer from a server, reasoning apart, with TTFT/tok/s and a copyable curl."""

from __future__ import annotations

import time
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Collapsible, Input, Label, Select, Static, Switch

from console.fleet.state import ServerState
from console.ui import format as fmt
from console.ui.backend import ChatRequest
from console.ui.console_app import console_app
from console.ui.static_text import update_static
from console.ui.widgets.footer import ConsoleFooter


class PromptInput(Input):
    """The prompt line; up/down walk the history of prompts sent from this pane."""

    BINDINGS = [Binding("up", "history(-1)", show=False), Binding("down", "history(1)", show=False)]

    def __init__(self, **kw: Any) -> None:  # Input's keyword arguments
        super().__init__(**kw)
        self.history: list[str] = []
        self._pos = 0

    def remember(self, text: str) -> None:
        if text and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._pos = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self._pos = max(0, min(len(self.history), self._pos + step))
        self.value = self.history[self._pos] if self._pos < len(self.history) else ""
        self.cursor_position = len(self.value)


class Turn(Vertical):
    """One prompt and its streamed answer; reasoning sits in a collapsed, dimmed block."""

    DEFAULT_CSS = """
    Turn { height: auto; margin-bottom: 1; }
    Turn .prompt { color: $accent; text-style: bold; }
    Turn Collapsible { padding: 0; border: none; background: $surface; }
    Turn Collapsible Contents { padding: 0 0 0 2; }
    Turn .reasoning { color: $text-muted; text-style: italic; }
    Turn .stats { color: $text-muted; }
    """

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt
        self.reasoning = ""
        self.answer = ""

    def compose(self) -> ComposeResult:
        yield Static(Content("› " + fmt.clean(self.prompt)), classes="prompt")
        with Collapsible(title="reasoning", collapsed=True, id="reasoning-box"):
            yield Static(classes="reasoning", id="reasoning")
        yield Static(id="answer")
        yield Static(Content("waiting for the first token…"), classes="stats", id="stats")

    def on_mount(self) -> None:
        self.query_one("#reasoning-box").display = False

    def add(self, kind: str, text: str) -> None:
        if kind == "reasoning":
            self.reasoning += text
            self.query_one("#reasoning-box").display = True
            update_static(self.query_one("#reasoning", Static), Content(fmt.clean(self.reasoning)))
        else:
            self.answer += text
            update_static(self.query_one("#answer", Static), Content(fmt.clean(self.answer)))

    def stats(self, text: str) -> None:
        update_static(self.query_one("#stats", Static), Content(text))


class ChatScreen(Screen[Any]):
    """Server picker, transcript, knobs (max tokens, temperature, thinking) and the prompt."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="chat-back"),
        Binding(
            "y", "copy_curl", "Curl", id="chat-curl", tooltip="Show the equivalent curl command (copy from there)."
        ),
        Binding(
            "ctrl+y",
            "copy_curl",
            "Curl",
            id="chat-curl-typing",
            show=False,
            tooltip="Show the curl command while typing a prompt (copy from there).",
        ),
        Binding("ctrl+l", "clear", "Clear", id="chat-clear", tooltip="Start a new conversation."),
    ]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    """Under 110 columns the bar's knobs go on a second row (at 80 the temperature and thinking were off screen)."""
    DEFAULT_CSS = """
    ChatScreen #bar { height: 3; padding: 0 1; }
    ChatScreen.-narrow #bar { layout: grid; grid-size: 6 2; grid-columns: auto auto auto auto auto 1fr; height: 6; }
    ChatScreen.-narrow #bar #server { column-span: 5; width: 1fr; }
    ChatScreen #bar Select { width: 1fr; min-width: 30; }
    ChatScreen #bar Input { width: 12; }
    ChatScreen #bar Label { padding: 1 1 0 1; }
    ChatScreen #transcript { height: 1fr; padding: 0 1; background: $surface; }
    ChatScreen #prompt { height: 3; }
    """

    def __init__(self, name: str | None) -> None:
        super().__init__()
        self.server_name = name
        self.messages: list[dict[str, str]] = []
        self.last_request: ChatRequest | None = None
        self.last_turn: Turn | None = None

    def current_server(self) -> ServerState | None:
        return console_app(self).state.servers.get(self.server_name or "")

    def current_host(self) -> str | None:
        s = self.current_server()
        return s.meta.host if s else None

    def _choices(self) -> list[tuple[Content, str]]:
        servers = [s for s in console_app(self).state.servers.values() if s.alive]
        routers = getattr(getattr(self.app, "router_manager", None), "views", {})  # issue 15: chat through a router
        return [(Content(fmt.clean(s.name)), s.name) for s in servers] + [
            (Content(f"router:{n}"), f"router:{n}") for n, v in routers.items() if v.phase == "running"
        ]

    def compose(self) -> ComposeResult:
        choices = self._choices()
        names = [v for _, v in choices]
        if self.server_name is None:
            self.server_name = names[0] if names else None
        elif self.server_name not in names:  # asked for one that cannot chat: ask which, never another silently
            self.server_name = None
        with Horizontal(id="bar"):
            yield Label("fleet › chat ›", id="crumbs")  # where this screen sits; esc goes back to the fleet
            yield Select(
                choices,
                value=self.server_name if self.server_name else Select.NULL,
                id="server",
                prompt="server",
                allow_blank=not names or self.server_name is None,  # blank: asks which
            )
            yield Label("max tokens")
            yield Input("512", type="integer", id="max-tokens")
            yield Label("temp")
            yield Input("0.7", type="number", id="temperature")
            yield Label("thinking")
            yield Switch(True, id="thinking")
        yield VerticalScroll(id="transcript")
        yield PromptInput(placeholder="prompt (enter: send, ↑/↓: history)", id="prompt")
        yield ConsoleFooter()

    def on_mount(self) -> None:
        self.query_one("#prompt").focus()

    @on(Select.Changed, "#server")
    def _server_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str):
            self.server_name = event.value
            self.messages = []

    def request(self, prompt: str | None = None) -> ChatRequest:
        """The request the knobs describe (for a send, or for the curl copy)."""
        try:
            max_tokens = max(1, int(self.query_one("#max-tokens", Input).value or 512))
        except ValueError:
            max_tokens = 512
        try:
            temperature = float(self.query_one("#temperature", Input).value or 0.7)
        except ValueError:
            temperature = 0.7
        msgs = [*self.messages, {"role": "user", "content": prompt}] if prompt is not None else list(self.messages)
        return ChatRequest(
            msgs, max_tokens=max_tokens, temperature=temperature, thinking=self.query_one("#thinking", Switch).value
        )

    @on(Input.Submitted, "#prompt")
    async def _send(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        box = self.query_one(PromptInput)
        if not text:
            return
        if self.server_name is None:
            self.notify(
                "pick a server to chat with (above)" if self._choices() else "no running server to chat with",
                severity="warning",
                markup=False,
            )
            return
        box.remember(text)
        box.value = ""
        turn = Turn(text)
        await self.query_one("#transcript", VerticalScroll).mount(turn)
        self.last_turn = turn
        req = self.request(text)
        self.last_request = req
        self._stream(self.server_name, req, turn)

    @work(exclusive=True, group="chat", exit_on_error=False)
    async def _stream(self, name: str, req: ChatRequest, turn: Turn) -> None:
        app = console_app(self)
        t0 = time.monotonic()
        ttft: float | None = None
        finish = tokens = tok_s = None
        api = app.api
        if api is None:
            turn.stats("error: the fleet is not connected yet")
            return
        try:
            url = await api.server_url(name)
            async for d in app.backend.stream_chat(url, req, app.api_key_for(name)):
                if d.kind in ("reasoning", "content") and d.text:
                    if ttft is None:
                        ttft = time.monotonic() - t0
                        turn.stats(f"streaming… first token after {ttft * 1000:.0f} ms")  # no longer waiting
                    turn.add(d.kind, d.text)
                    self.query_one("#transcript", VerticalScroll).scroll_end(animate=False)
                elif d.kind == "finish":
                    finish = d.finish_reason
                elif d.kind == "usage":
                    ttft = d.ttft_s if d.ttft_s is not None else ttft
                    tokens, tok_s = d.completion_tokens, d.tok_s
                elif d.kind == "error":
                    turn.stats(f"error: {fmt.clean(d.text, 300)}")
                    return
        except Exception as e:
            turn.stats(f"error: {type(e).__name__}: {fmt.clean(str(e), 300)}")
            return
        self.messages = [*req.messages, {"role": "assistant", "content": turn.answer}]
        ttft_s = f"{ttft * 1000:.0f} ms" if ttft is not None else "—"
        turn.stats(
            f"TTFT {ttft_s} · {tokens if tokens is not None else '—'} tokens · "
            f"{f'{tok_s:.1f}' if tok_s is not None else '—'} tok/s · finish {finish or '—'}"
        )

    def action_copy_curl(self) -> None:
        name = self.server_name
        if name is None:
            return
        self._copy_curl(name, self.last_request or self.request(self.query_one(PromptInput).value or "Hello"))

    @work(group="chat-curl", exit_on_error=False)
    async def _copy_curl(self, name: str, req: ChatRequest) -> None:
        app = console_app(self)
        if app.api is None:
            return
        url = await app.api.server_url(name)
        cmd = app.backend.curl(url, req, app.api.api_key_env(name))
        self.last_curl = cmd
        from console.ui.screens.dialogs import TextScreen

        self.app.push_screen(TextScreen(f"curl for {name} (the API key stays in $VAR)", cmd, app.copy_to_clipboard))

    def action_clear(self) -> None:
        self.messages = []
        self.last_request = None
        self.query_one("#transcript", VerticalScroll).remove_children()

    def action_back(self) -> None:
        self.app.pop_screen()

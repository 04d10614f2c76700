"""BenchScreen (`b`): a concurrency sweep on the selected server with a progress bar per level, then the table.

Self-contained: it needs only a FleetApi and a server name. The target is resolved on the app's loop
(the tunnel lives there); the sweep itself (`console.sglang.bench`) runs on its own loop in a thread so
rendering never skews its timings. Each run is saved to bench.jsonl and compared with the preset's
previous run. `b` first asks for the sweep (levels, lengths, requests) in a BenchForm. Install with
`install(app)` (sets `app.bench_runner`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label, ProgressBar, Static

from console.fleet.bench_target import target_from_state
from console.sglang.bench import (
    BenchSpec,
    BenchTarget,
    LoadGenerator,
    SweepResult,
    append_record,
    load_records,
    make_record,
)
from console.sglang.benchstats import (
    LevelResult,
    compare_levels,
    default_num_prompts,
    levels_of,
    num_prompts_notes,
    parse_concurrency,
    previous_record,
)
from console.ui.widgets.footer import ConsoleFooter


def results_table(levels: Sequence[LevelResult]) -> Table:
    """The sweep as a rich Table (numbers only; nothing from the server is rendered as markup)."""
    t = Table(box=None, expand=False, show_edge=False, pad_edge=False, header_style="bold")
    for col in ("C", "requests", "out tok/s", "req/s", "TTFT p50/p99 ms", "ITL p50/p99 ms", "E2E p50/p99 s", "errors"):
        t.add_column(col, justify="right", no_wrap=True)

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.1f}"

    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    for lv in levels:
        t.add_row(
            str(lv.concurrency),
            str(lv.requests),
            f"{lv.output_throughput_tok_s:,.0f}",
            f"{lv.request_throughput_rps:.2f}",
            f"{ms(lv.ttft_p50_s)}/{ms(lv.ttft_p99_s)}",
            f"{ms(lv.itl_p50_s)}/{ms(lv.itl_p99_s)}",
            f"{s(lv.e2e_p50_s)}/{s(lv.e2e_p99_s)}",
            Text(str(lv.errors), style="bold red" if lv.errors else ""),
        )
    return t


class BenchScreen(Screen[list[LevelResult] | None]):
    """One sweep: a bar per level while it runs, the results table and the delta to the last run after."""

    BINDINGS = [
        Binding("escape,q", "close", "Close", id="bench-close", tooltip="Close (a running sweep is cancelled)."),
        Binding("r", "rerun", "Run again", id="bench-rerun", tooltip="Run the same sweep again."),
    ]
    DEFAULT_CSS = """
    BenchScreen VerticalScroll { padding: 1 2; }
    BenchScreen .bench-title { text-style: bold; margin-bottom: 1; }
    BenchScreen .bench-row { height: 1; }
    BenchScreen .bench-row Label { width: 8; }
    BenchScreen .bench-row ProgressBar { width: 1fr; }
    BenchScreen #bench-status { margin-top: 1; }
    BenchScreen #bench-results { margin-top: 1; height: auto; }
    """

    def __init__(
        self,
        api: Any,
        server: str,
        *,
        concurrency: Sequence[int] = (1, 32, 64, 128),
        input_len: int = 1024,
        output_len: int = 256,
        num_prompts: int | None = None,
        save: bool = True,
    ) -> None:
        super().__init__()
        self.api = api
        self.server = server
        self.spec = BenchSpec(
            url="", concurrency=tuple(concurrency), input_len=input_len, output_len=output_len, num_prompts=num_prompts
        )
        self.save = save
        self.levels: list[LevelResult] = []
        self.error: str | None = None
        self.comparison: list[str] = []
        self.running = False
        self._stop = threading.Event()
        """Set to end a sweep's thread (closing the screen, or the sweep finished)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(f"fleet › {self.server} › bench"), classes="bench-title", id="bench-title")
            for c in self.spec.concurrency:
                with Horizontal(classes="bench-row"):
                    yield Label(Text(f"C={c}"))
                    yield ProgressBar(
                        total=default_num_prompts(c, self.spec.num_prompts), show_eta=False, id=f"bench-c{c}"
                    )
            yield Static("", id="bench-status", markup=False)
            yield Static("", id="bench-results")
        yield ConsoleFooter()  # its keys (esc close, r run again) on screen like every other screen's

    def on_mount(self) -> None:
        self.start()

    def start(self) -> None:
        if self.running:
            return
        for c in self.spec.concurrency:
            self.query_one(f"#bench-c{c}", ProgressBar).update(progress=0)
        self.query_one("#bench-results", Static).update("")
        self.running = True
        self._sweep()

    def _status(self, text: str) -> None:
        self.query_one("#bench-status", Static).update(Text(text))

    def on_unmount(self) -> None:
        self._stop.set()  # the app is closing under a running sweep: end the generator thread too

    def _progress(self, c: int, done: int, total: int) -> None:
        if not self.is_attached:
            return  # a callback from the generator thread that arrived after the screen went
        self.query_one(f"#bench-c{c}", ProgressBar).update(total=total, progress=done)
        self._status(f"C={c}: {done}/{total} requests")

    async def _target(self) -> BenchTarget:
        if self.server.startswith("router:"):  # issue 15: a sweep through SGLang's router
            from console.router.manager import router_target

            return await router_target(self.api, self.server)
        srv = self.api.state.servers.get(self.server)
        if srv is None or not srv.alive:
            raise LookupError(f"server {self.server} is not running")
        return await target_from_state(self.api, self.server, srv.meta.preset, srv)

    @work(exclusive=True, exit_on_error=False, group="bench")
    async def _sweep(self) -> None:
        self.error = None
        self._stop.clear()
        try:
            target = await self._target()
            title = f"bench {target.server}" + (f" on {target.gpu_model}" if target.gpu_model else "")
            self.query_one("#bench-title", Static).update(Text(title))
            self._status(f"warming up {target.url} …")
            spec = replace(self.spec, url=target.url or "", api_key=target.api_key)
            res = await asyncio.to_thread(self._run_in_thread, spec, asyncio.get_running_loop())
            self._finish(target, res.levels, res.server_info, res.model, res.fixed_output_len)
        except Exception as e:  # shown on the screen, never a crash of the app
            self.error = f"{type(e).__name__}: {e}"
            self._status(f"bench failed: {self.error}")
        finally:
            self._stop.set()
            self.running = False

    def _run_in_thread(self, spec: BenchSpec, loop: asyncio.AbstractEventLoop) -> SweepResult:
        """The sweep on its own event loop in a thread, so UI work never delays the timestamps it takes."""

        def progress(c: int, done: int, total: int) -> None:
            loop.call_soon_threadsafe(self._progress, c, done, total)

        def level(lv: LevelResult) -> None:
            loop.call_soon_threadsafe(self._level_done, lv)

        async def main() -> SweepResult:
            async with LoadGenerator(spec) as g:
                task = asyncio.create_task(g.sweep(progress, level))
                while not task.done():
                    if self._stop.is_set():
                        task.cancel()
                    await asyncio.wait({task}, timeout=0.2)
                return task.result()

        return asyncio.run(main())

    def _level_done(self, lv: LevelResult) -> None:
        self.levels.append(lv)
        if not self.is_attached:
            return
        self.query_one("#bench-results", Static).update(results_table(self.levels))

    def _finish(
        self, target: BenchTarget, levels: list[LevelResult], info: dict[str, Any], model: str, fixed: bool
    ) -> None:
        self.levels = list(levels)
        prev = previous_record(
            load_records(), target.preset, target.server, "console", self.spec.input_len, self.spec.output_len
        )
        self.comparison = compare_levels(levels, levels_of(prev)) if prev else []
        if self.save:
            append_record(
                make_record(
                    server=target.server,
                    preset=target.preset,
                    url=target.url or "",
                    engine="console",
                    levels=levels,
                    spec=self.spec,
                    server_args=target.server_args,
                    gpu_model=target.gpu_model,
                    server_info=info,
                    fixed_output_len=fixed,
                    model=model,
                )
            )
        self.query_one("#bench-results", Static).update(results_table(levels))
        parts = [f"done: {sum(lv.requests for lv in levels)} requests"]
        parts += num_prompts_notes(self.spec.concurrency, self.spec.num_prompts)
        if self.comparison:
            parts.append("vs previous run: " + ", ".join(self.comparison))
        if not fixed:
            parts.append("(server rejected ignore_eos: answers may be shorter than the output length)")
        self._status("  ".join(parts) + "    r: run again  esc: close")

    def action_rerun(self) -> None:
        self.levels = []
        self.start()

    def action_close(self) -> None:
        self._stop.set()
        self.workers.cancel_group(self, "bench")
        self.dismiss(self.levels or None)


FORM_FIELDS = (
    ("concurrency", "levels (C)", "1,32,64,128"),
    ("input_len", "input tokens", "1024"),
    ("output_len", "output tokens", "256"),
    ("num_prompts", "requests per level", ""),
)
"""Field id, label, default; requests left empty mean 5 × C."""


def parse_form(values: dict[str, str]) -> dict[str, Any]:
    """The BenchScreen arguments from the form's texts; ValueError names the bad field (pure)."""
    try:
        levels = tuple(parse_concurrency(values.get("concurrency", "")))
    except ValueError as e:
        raise ValueError(f"levels: {e}") from None
    out: dict[str, Any] = {"concurrency": levels}
    for key, label, _ in FORM_FIELDS[1:]:
        text = values.get(key, "").strip()
        if key == "num_prompts" and not text:
            out[key] = None
            continue
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{label}: a whole number >= 1, got {text!r}")
        out[key] = int(text)
    return out


class BenchForm(ModalScreen[dict[str, Any] | None]):
    """What `b` asks before a sweep starts: levels, input/output tokens, requests per level."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="bench-form-cancel")]
    DEFAULT_CSS = """
    BenchForm { align: center middle; }
    BenchForm > Vertical { width: 64; height: auto; padding: 1 2; border: round $primary; background: $surface; }
    BenchForm Grid { grid-size: 2; grid-columns: 22 1fr; height: auto; grid-rows: 3; }
    BenchForm Label { padding: 1 0; }
    BenchForm #bench-form-error { color: $error; height: auto; }
    """

    def __init__(self, server: str, last: dict[str, str] | None = None) -> None:
        super().__init__()
        self.server = server
        self.last = last or {}
        self.submitted: dict[str, str] = {}
        """The texts of the sweep that was started (the next form opens with them)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"bench {self.server}"), classes="bench-title")
            with Grid():
                for key, label, default in FORM_FIELDS:
                    yield Label(label)
                    yield Input(
                        self.last.get(key, default),
                        id=f"bench-form-{key}",
                        placeholder="5 x C" if key == "num_prompts" else "",
                    )
            yield Static("enter: start   esc: cancel", id="bench-form-help", markup=False)
            yield Static("", id="bench-form-error", markup=False)

    def values(self) -> dict[str, str]:
        return {key: self.query_one(f"#bench-form-{key}", Input).value for key, _, _ in FORM_FIELDS}

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            sweep = parse_form(self.values())
            self.submitted = self.values()
            self.dismiss(sweep)
        except ValueError as e:
            self.query_one("#bench-form-error", Static).update(Text(str(e)))

    def action_cancel(self) -> None:
        self.dismiss(None)


def bench_runner(app: Any, name: str) -> None:
    """The `b` hook: ask for the sweep (BenchForm, filled with the last one), then push a BenchScreen for it."""

    form = BenchForm(name, getattr(app, "bench_form_last", None))

    def start(sweep: dict[str, Any] | None) -> None:
        if sweep is not None:
            app.bench_form_last = form.submitted
            app.push_screen(BenchScreen(app.api, name, **sweep))

    app.push_screen(form, start)


def install(app: Any) -> None:
    """Make `b` (and the palette's `server: bench`) run sweeps in this app."""
    app.bench_runner = bench_runner

"""LaunchScreen (`l`): preset picker filtered to the selected host/GPUs, then the exact command with lint, then confirm."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from console.config import Preset
from console.fleet.api import LaunchPreview
from console.fleet.journal import mask
from console.ui import format as fmt


def matching_presets(presets: dict[str, Preset], host: str, gpus: list[int]) -> tuple[list[str], bool]:
    """Presets on `host` covering the selected GPUs (exact fit first); falls back to all of the host's."""
    on_host = [n for n, p in presets.items() if p.host == host]
    if not gpus:
        return on_host, True
    sel = set(gpus)
    fit = [n for n in on_host if sel <= set(presets[n].gpus) or len(presets[n].gpus) == len(sel)]
    fit.sort(key=lambda n: (set(presets[n].gpus) != sel, not (sel <= set(presets[n].gpus)), n))
    return (fit, True) if fit else (on_host, False)


def launch_gpus(preset: Preset, marked: list[int]) -> list[int] | None:
    """GPUs to override the preset's with: the marked set when it is a same-sized different set."""
    if marked and len(marked) == len(preset.gpus) and sorted(marked) != sorted(preset.gpus):
        return sorted(marked)
    return None


def preview_content(pv: LaunchPreview, gpus: list[int] | None) -> Content:
    """Commands, lint findings and pre-checks as one block of styled text."""
    parts: list[tuple[str, str] | str] = []
    for plan in pv.plans:
        r = plan.replica
        parts += [(f"{r.name}", "bold"), f"  GPUs {fmt.gpu_span(r.gpus)} · TP{r.tp} · port {r.port}\n",
                  ("$ ", "bold"), fmt.clean(mask(plan.command)), "\n\n"]
    if gpus:
        parts.append((f"(on marked GPUs {fmt.gpu_span(gpus)} instead of the preset's)\n\n", "italic"))
    for f in pv.findings:
        colour = "red" if f.severity == "error" else "yellow"
        parts += [(f"{f.severity} [{fmt.clean(f.rule)}] ", f"bold {colour}"), fmt.clean(f.message)]
        if f.fix:
            parts += [("  fix: ", "bold"), fmt.clean(f.fix)]
        parts.append("\n")
    for c in pv.checks:
        parts += [("✓ " if c.ok else ("✗ " if c.blocking else "! "), "green" if c.ok else "red" if c.blocking else "yellow"),
                  f"{fmt.clean(c.name)}: {fmt.clean(c.message)}\n"]
    if pv.blocked:
        parts.append(("\nblocked: fix the errors above before launching", "bold red"))
    return Content.assemble(*parts)


class LaunchScreen(ModalScreen[None]):
    """Two steps in one modal: pick (OptionList), then preview and confirm."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="launch-back"),
        Binding("y", "confirm", "Launch", id="launch-confirm", tooltip="Launch the previewed command."),
    ]
    DEFAULT_CSS = """
    LaunchScreen .dialog { max-width: 140; }
    LaunchScreen OptionList { height: auto; max-height: 16; }
    LaunchScreen #preview { height: auto; max-height: 30; display: none; }
    LaunchScreen.-preview #preview { display: block; }
    LaunchScreen.-preview OptionList { display: none; }
    """

    def __init__(self, host: str, gpus: list[int]) -> None:
        super().__init__()
        self.host = host
        self.gpus = gpus
        self.preview: LaunchPreview | None = None
        self.chosen: str | None = None

    def compose(self) -> ComposeResult:
        presets = self.app.fleet.presets  # type: ignore[attr-defined]
        names, exact = matching_presets(presets, self.host, self.gpus)
        sel = f" GPU {fmt.gpu_span(self.gpus)}" if self.gpus else ""
        with Vertical(classes="dialog"):
            yield Static(Content(f"Launch on {fmt.clean(self.host)}{sel}"), classes="dialog-title")
            note = "" if exact else "no preset uses exactly these GPUs; all presets of this host:"
            yield Static(Content(note or "pick a preset (enter), esc to cancel"), id="note")
            yield OptionList(*[Option(self._label(n, presets[n]), id=n) for n in names], id="presets")
            with VerticalScroll(id="preview"):
                yield Static(id="preview-body")
            yield Static(Content("enter: preview · y: launch · esc: back"), classes="keys", id="keys")

    @staticmethod
    def _label(name: str, p: Preset) -> Content:
        port = p.port if isinstance(p.port, int) else p.port[0]
        return Content.assemble((name, "bold"), f"  GPUs {fmt.gpu_span(p.gpus)} · TP{p.tp or len(p.gpus)} · "
                                f":{port} · ", (fmt.clean(p.model, 60), "italic"))

    def on_mount(self) -> None:
        if not self.query_one(OptionList).option_count:
            self.query_one("#note", Static).update(Content(f"no presets for {fmt.clean(self.host)} in hosts.toml"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.chosen = event.option.id
        self.query_one("#note", Static).update(Content(f"preview of {self.chosen} …"))
        self._load_preview(self.chosen or "")

    @work(exclusive=True, group="launch-preview", exit_on_error=False)
    async def _load_preview(self, name: str) -> None:
        preset = self.app.fleet.presets[name]  # type: ignore[attr-defined]
        gpus = launch_gpus(preset, self.gpus)
        pv = await self.app.api.preview(name, gpus)  # type: ignore[attr-defined]
        self.preview = pv
        self.query_one("#preview-body", Static).update(preview_content(pv, gpus))
        self.query_one("#note", Static).update(Content.assemble(
            ("blocked" if pv.blocked else "ready to launch", "bold red" if pv.blocked else "bold green"),
            f": {name}"))
        self.add_class("-preview")

    def action_confirm(self) -> None:
        if self.preview is None or self.chosen is None:
            return
        if self.preview.blocked:
            self.notify("blocked by the checks above", severity="error", markup=False)
            return
        preset = self.app.fleet.presets[self.chosen]  # type: ignore[attr-defined]
        self.app.start_launch(self.chosen, launch_gpus(preset, self.gpus))  # type: ignore[attr-defined]
        self.dismiss(None)

    def action_back(self) -> None:
        if self.has_class("-preview"):
            self.remove_class("-preview")
            self.preview = None
            self.query_one(OptionList).focus()
        else:
            self.dismiss(None)

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
from console.ui.console_app import console_app


def replica_tp(preset: Preset) -> int:
    return preset.tp or len(preset.gpus)


def matching_presets(
    presets: dict[str, Preset], host: str, gpus: list[int], marked: bool = False
) -> tuple[list[str], bool]:
    """Presets on `host` for the selection (exact fit first); falls back to all of the host's.

    Marked GPUs are the target: a preset fits when its TP groups divide them (it is re-planned onto them)."""
    on_host = [n for n, p in presets.items() if p.host == host]
    if not gpus:
        return on_host, True
    sel = set(gpus)
    if marked:
        fit = [n for n in on_host if len(sel) % replica_tp(presets[n]) == 0]
    else:
        fit = [n for n in on_host if sel <= set(presets[n].gpus) or len(presets[n].gpus) == len(sel)]
    fit.sort(key=lambda n: (set(presets[n].gpus) != sel, not (sel <= set(presets[n].gpus)), n))
    return (fit, True) if fit else (on_host, False)


def launch_gpus(preset: Preset, gpus: list[int], marked: bool = False) -> list[int] | None:
    """GPUs to launch on instead of the preset's: marked GPUs whenever its TP groups divide them (replicas are
    re-planned onto them); a single selected GPU only for a preset of one GPU."""
    if not gpus or sorted(gpus) == sorted(preset.gpus):
        return None
    if marked and len(gpus) % replica_tp(preset) == 0:
        return sorted(gpus)
    if not marked and len(gpus) == len(preset.gpus):
        return sorted(gpus)
    return None


def target_line(name: str, preset: Preset, gpus: list[int], marked: bool) -> tuple[str, str | None]:
    """(where the launch goes, in words; why it cannot go on the marked GPUs, or None)."""
    tp, own = replica_tp(preset), fmt.gpu_span(preset.gpus)
    use = launch_gpus(preset, gpus, marked)
    if use is not None:
        n = len(use) // tp
        what = "marked" if marked else "selected"
        return (
            f"on the {what} GPU{'s' if len(use) > 1 else ''} {fmt.gpu_span(use)} instead of the preset's {own}: "
            f"{n} replica{'s' if n != 1 else ''} of TP{tp}, ports chosen free by the pre-check",
            None,
        )
    if marked and sorted(gpus) != sorted(preset.gpus):
        return "", (
            f"{name} runs TP{tp}: the {len(gpus)} marked GPU{'s' if len(gpus) != 1 else ''} "
            f"{fmt.gpu_span(gpus)} cannot be split into groups of {tp}; mark {tp} GPUs (or a multiple "
            f"of {tp}), or unmark them to launch on the preset's GPUs {own}"
        )
    return f"on the preset's GPUs {own}", None


def blocking_reasons(pv: LaunchPreview) -> list[str]:
    """Why a launch is refused: lint errors and failed blocking pre-checks."""
    return [f.message for f in pv.findings if f.severity == "error"] + [
        c.message for c in pv.checks if c.blocking and not c.ok
    ]


def preview_content(pv: LaunchPreview, where: str) -> Content:
    """Where it launches, then commands, lint findings and pre-checks (why it is blocked is the dialog's top line)."""
    parts: list[tuple[str, str] | str] = []
    if where:
        parts.append((f"{fmt.clean(where)}\n\n", "italic"))
    for plan in pv.plans:
        r = plan.replica
        parts += [
            (f"{r.name}", "bold"),
            f"  GPUs {fmt.gpu_span(r.gpus)} · TP{r.tp} · port {r.port}\n",
            ("$ ", "bold"),
            fmt.clean(mask(plan.command)),
            "\n\n",
        ]
    for f in pv.findings:
        colour = "red" if f.severity == "error" else "yellow"
        parts += [(f"{f.severity} [{fmt.clean(f.rule)}] ", f"bold {colour}"), fmt.clean(f.message)]
        if f.fix:
            parts += [("  fix: ", "bold"), fmt.clean(f.fix)]
        parts.append("\n")
    for c in pv.checks:
        parts += [
            ("✓ " if c.ok else ("✗ " if c.blocking else "! "), "green" if c.ok else "red" if c.blocking else "yellow"),
            f"{fmt.clean(c.name)}: {fmt.clean(c.message)}\n",
        ]
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

    def __init__(self, host: str, gpus: list[int], marked: bool = False) -> None:
        super().__init__()
        self.host = host
        self.gpus = gpus
        self.marked = marked and bool(gpus)
        """The GPUs were marked (space): they are the launch target, not a hint."""
        self.preview: LaunchPreview | None = None
        self.chosen: str | None = None
        self.refused: str | None = None
        """Why the chosen preset cannot go on the marked GPUs (no preview is asked for then)."""

    def compose(self) -> ComposeResult:
        presets = console_app(self).fleet.presets
        names, exact = matching_presets(presets, self.host, self.gpus, self.marked)
        span = fmt.gpu_span(self.gpus)
        sel = (
            f": marked GPU{'s' if len(self.gpus) > 1 else ''} {span}"
            if self.marked
            else f" (GPU {span} selected)"
            if self.gpus
            else ""
        )
        with Vertical(classes="dialog"):
            yield Static(Content(f"Launch on {fmt.clean(self.host)}{sel}"), classes="dialog-title")
            note = (
                ""
                if exact
                else (
                    "no preset's TP groups divide the marked GPUs; all presets of this host:"
                    if self.marked
                    else "no preset uses exactly these GPUs; all presets of this host:"
                )
            )
            yield Static(Content(note or "pick a preset (enter), esc to cancel"), id="note")
            yield OptionList(*[Option(self._label(n, presets[n]), id=n) for n in names], id="presets")
            with VerticalScroll(id="preview"):
                yield Static(id="preview-body")
            yield Static(Content("enter: preview · y: launch · esc: back"), classes="keys", id="keys")

    @staticmethod
    def _label(name: str, p: Preset) -> Content:
        port = p.port if isinstance(p.port, int) else p.port[0]
        return Content.assemble(
            (name, "bold"),
            f"  GPUs {fmt.gpu_span(p.gpus)} · TP{p.tp or len(p.gpus)} · :{port} · ",
            (fmt.clean(p.model, 60), "italic"),
        )

    def on_mount(self) -> None:
        if not self.query_one(OptionList).option_count:
            self.query_one("#note", Static).update(Content(f"no presets for {fmt.clean(self.host)} in hosts.toml"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.chosen = event.option.id
        name = self.chosen or ""
        preset = console_app(self).fleet.presets[name]
        _, why_not = target_line(name, preset, self.gpus, self.marked)
        self.refused = why_not
        if why_not is not None:  # said at the top, plainly; nothing is previewed or launched elsewhere
            self.preview = None
            self.query_one("#note", Static).update(Content.assemble(("blocked", "bold red"), f": {fmt.clean(why_not)}"))
            self.query_one("#preview-body", Static).update(Content.styled(fmt.clean(why_not), "red"))
            self.add_class("-preview")
            return
        self.query_one("#note", Static).update(Content(f"preview of {name} …"))
        self._load_preview(name)

    @work(exclusive=True, group="launch-preview", exit_on_error=False)
    async def _load_preview(self, name: str) -> None:
        preset = console_app(self).fleet.presets[name]
        gpus = launch_gpus(preset, self.gpus, self.marked)
        where, _ = target_line(name, preset, self.gpus, self.marked)
        api = console_app(self).api
        if api is None:  # no fleet yet (the demo's is still coming up)
            return
        pv = await api.preview(name, gpus)
        self.preview = pv
        self.query_one("#preview-body", Static).update(preview_content(pv, where))
        reasons = blocking_reasons(pv)
        if pv.blocked:  # the reason at the top, not a 'blocked' under a screen of commands
            note = Content.assemble(
                ("blocked", "bold red"),
                f": {fmt.clean(reasons[0]) if reasons else name}",
                f" (+{len(reasons) - 1} more below)" if len(reasons) > 1 else "",
            )
        else:
            note = Content.assemble(("ready to launch", "bold green"), f": {name}")
        self.query_one("#note", Static).update(note)
        self.add_class("-preview")

    def action_confirm(self) -> None:
        if self.refused is not None:
            self.notify(self.refused, severity="error", markup=False)
            return
        if self.preview is None or self.chosen is None:
            return
        if self.preview.blocked:
            self.notify("blocked: " + "; ".join(blocking_reasons(self.preview)), severity="error", markup=False)
            return
        preset = console_app(self).fleet.presets[self.chosen]
        from console.ui.screens.fleet import FleetScreen

        console_app(self).start_launch(
            self.chosen, launch_gpus(preset, self.gpus, self.marked), self.preview.stamp or None
        )
        fleet = next((s for s in self.app.screen_stack if isinstance(s, FleetScreen)), None)
        self.dismiss(None)
        if self.marked and fleet is not None and fleet.clear_marks():
            self.app.notify(f"marks cleared: launching {self.chosen} on them", title="launch", markup=False)

    def action_back(self) -> None:
        if self.has_class("-preview"):
            self.remove_class("-preview")
            self.preview = None
            self.refused = None
            self.query_one(OptionList).focus()
        else:
            self.dismiss(None)

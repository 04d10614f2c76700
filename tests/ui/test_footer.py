"""ConsoleFooter keeps its key widgets across focus moves and flips their enabled state in place; what it shows
is what a freshly composed footer would show for the focused pane."""

from __future__ import annotations

from console.ui.widgets.footer import ConsoleFooter
from console.ui.widgets.gpu_pane import GpuPane
from tests.ui.fakes import FakeApi, scenario
from tests.ui.waits import until


def shown(footer: ConsoleFooter) -> list[tuple[str, bool]]:
    return [(str(getattr(k, "action", "")), not k.has_class("-disabled")) for k in footer.query("FooterKey")]


def expected(footer: ConsoleFooter) -> list[tuple[str, bool]]:
    """Each footer key's action with the enabled state of its first shown binding, as Textual's Footer composes."""
    first: dict[str, bool] = {}
    for ab in footer.screen.active_bindings.values():
        if ab.binding.show:
            first.setdefault(ab.binding.action, ab.enabled)
    return [(a, first.get(a, e)) for a, e in shown(footer)]


async def test_focus_moves_flip_keys_in_place(make_app) -> None:  # type: ignore[no-untyped-def]
    app = make_app(FakeApi(scenario(crashed=True)))
    async with app.run_test(size=(160, 48)) as pilot:
        footer = app.screen.query_one(ConsoleFooter)
        panes = {(p.host, p.gpu): p for p in app.screen.query(GpuPane)}
        serving, free = panes[("ct129", 0)], panes[("blackwell", 3)]
        serving.focus()
        await until(pilot, lambda: app.screen.focused is serving and footer.query("FooterKey"), "the footer's keys")
        await pilot.pause()
        keys = list(footer.query("FooterKey"))
        on_serving = dict(shown(footer))
        assert on_serving.get("stop") is True, on_serving  # a running server can be stopped
        free.focus()
        await until(pilot, lambda: dict(shown(footer)).get("stop") is False, "stop disabled on a free GPU")
        assert list(footer.query("FooterKey")) == keys  # the same widgets, not a remount
        assert shown(footer) == expected(footer)
        serving.focus()
        await until(pilot, lambda: dict(shown(footer)).get("stop") is True, "stop enabled again")
        assert list(footer.query("FooterKey")) == keys and shown(footer) == expected(footer)


async def test_a_new_screens_first_frame_already_has_its_keys(make_app) -> None:  # type: ignore[no-untyped-def]
    """Textual's Footer composes its keys only after the screen's first frame, then lays the screen out again:
    a second whole-screen layout right after every server-screen open, which a key pressed at once waited for
    (benchmarks/bench_keypress.py). ConsoleFooter composes them before the first frame."""
    from console.ui.screens.server import ServerScreen

    app = make_app(FakeApi(scenario()))
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        name = next(iter(app.state.servers))
        firsts: list[list[tuple[str, bool]]] = []
        real = app._display

        def display(screen, renderable):  # type: ignore[no-untyped-def]
            if isinstance(screen, ServerScreen) and not firsts:
                firsts.append(shown(screen.query_one(ConsoleFooter)))
            return real(screen, renderable)

        app._display = display  # type: ignore[method-assign]
        app.open_server(name)
        await until(pilot, lambda: firsts, "the server screen's first frame")
        footer = app.screen.query_one(ConsoleFooter)
        assert firsts[0] and ("back", True) in firsts[0] and ("toggle_info", True) in firsts[0]
        await pilot.pause()
        assert shown(footer) == firsts[0] == expected(footer)

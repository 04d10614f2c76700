"""GpuPane's per-row strip cache: after any sequence of view changes, focus and marks, every row it serves is the
row a full render of the pane gives (a stale cached row would show an old figure)."""

from __future__ import annotations

from rich.style import Style as RichStyle
from textual.strip import Strip
from textual.visual import Visual, visualize

from console.fleet.events import GpuSample
from console.ui.widgets.gpu_pane import GpuPane
from tests.ui.fakes import A6000, NOW, FakeApi, gpu, scenario


def cells(strip: Strip, y: int, width: int, pad: RichStyle) -> list[tuple[str, object]]:
    """What a row puts on screen, cell by cell (segment boundaries aside; Textual pads a short row with the
    base style), each cell's style without its selection offset, which is checked to be that cell's place."""
    out: list[tuple[str, object]] = []
    for seg in strip.extend_cell_length(width, pad):
        style = seg.style or RichStyle()
        offset = style.meta.get("offset")
        assert offset is None or offset == (len(out), y), f"row {y}: a segment's selection offset is wrong"
        out += [(ch, style.clear_meta_and_links()) for ch in seg.text]
    return out


def rows_served(pane: GpuPane) -> list[list[tuple[str, object]]]:
    w, pad = pane.size.width, pane.visual_style.rich_style
    return [cells(pane.render_line(y), y, w, pad) for y in range(pane.size.height)]


def rows_fresh(pane: GpuPane) -> list[list[tuple[str, object]]]:
    """Textual's own render of the whole pane (`render()` through Visual.to_strips)."""
    (w, h), pad = pane.size, pane.visual_style.rich_style
    strips = Visual.to_strips(pane, visualize(pane, pane.render()), w, h, pane.visual_style)
    strips += [None] * (h - len(strips))  # type: ignore[list-item]
    return [
        cells(st.apply_offsets(0, y) if st is not None else pane.render_line(y), y, w, pad)
        for y, st in enumerate(strips)
    ]


async def test_cached_rows_equal_a_full_render_through_changes(make_app) -> None:  # type: ignore[no-untyped-def]
    api = FakeApi(scenario(crashed=False))
    app = make_app(api)
    app._tick = lambda: None
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        panes = {(p.host, p.gpu): p for p in app.screen.query(GpuPane)}
        p0, p1 = panes[("ct129", 0)], panes[("ct129", 1)]
        rows_served(p0)  # fill the cache
        changed_rows = 0
        for step, (util, temp) in enumerate([(12, 71), (13, 71), (99, 84), (0, 30), (0, 30), (55, 60)]):
            before = rows_served(p0)
            a = (
                gpu(0, A6000, 44_210 + step * 100, 49_140, util, temp, 231.4, 300),
                gpu(1, A6000, 44_198, 49_140, util, temp, 224.9, 300),
            )
            api.emit(GpuSample("ct129", NOW, a))
            app._sync_screens()
            await pilot.pause()
            after = rows_served(p0)
            assert after == rows_fresh(p0), f"step {step}: a cached row differs from the full render"
            changed_rows += sum(x != y for x, y in zip(before, after, strict=True))
            if step == 2:
                p1.focus()  # focus moves: both panes' styles change
                await pilot.pause()
                assert rows_served(p0) == rows_fresh(p0) and rows_served(p1) == rows_fresh(p1)
        assert changed_rows > 0  # the samples did change what the pane shows
        assert f" {55}%  60°C" in p0.render().plain

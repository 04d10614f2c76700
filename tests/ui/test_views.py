"""The view-model (console/ui/views.py), the fleet layout and the pane drawing, without an App."""

from __future__ import annotations

import pytest

from console.fleet.events import LogData, ServerSeen
from console.fleet.state import FleetState
from console.ui.layout import PANE_MIN_HEIGHT, fleet_layout
from console.ui.views import load_text, pane_matches, pane_view, server_view
from console.ui.widgets.gpu_pane import _colours, draw_pane, graphs
from tests.ui.fakes import NOW, SERVING_LOG, meta, scenario

C = _colours({})
TP2 = "qwen3-8b@ct129:gpu0-1"


def test_tp_group_is_said_once_and_marked_on_the_other_gpu() -> None:
    st = scenario()
    lead, member = pane_view(st, "ct129", 0, NOW), pane_view(st, "ct129", 1, NOW)
    assert lead.server is not None and lead.server.label == "qwen3-8b :30000 TP2 gpu0-1"
    assert member.server is None and member.group_of == "TP2 with GPU0: serving · qwen3-8b :30000"
    drawn = "\n".join(x.plain for x in draw_pane(member, 40, 12, C))
    assert "267 tok/s" not in drawn and "run 3" not in drawn and "TP2 with GPU0" in drawn


def test_an_unchanged_fleet_gives_an_equal_view_and_a_new_batch_line_a_different_one() -> None:
    st = FleetState(["a"])
    m = meta("p", "a", (0,), 30000, pid=1, sid=1)
    st.apply(ServerSeen(m, 1.0))
    off = 0

    def feed(text: str) -> None:
        nonlocal off
        st.apply(LogData(m.name, NOW, m.log_path or "", off, text.encode()))
        off += len(text.encode())

    feed("".join(line + "\n" for line in SERVING_LOG))
    v0 = server_view(st.servers[m.name], NOW)
    assert server_view(st.servers[m.name], NOW) == v0  # nothing new: a widget draws nothing
    feed(
        SERVING_LOG[-1]
        .replace("gen throughput (token/s): 267.00", "gen throughput (token/s): 301.00")
        .replace("#running-req: 3", "#running-req: 5")
        + "\n"
    )
    v1 = server_view(st.servers[m.name], NOW)
    assert v1 != v0 and v1.load == "run 5 · queue 0 · KV 42%" and v1.log_tail[-1] != v0.log_tail[-1]


def test_an_idle_gpus_next_sample_at_a_jittered_time_gives_an_equal_view() -> None:
    """Samples never arrive exactly 1 s apart; the graphs' time span must not make every idle pane redraw."""
    from console.fleet.events import GpuSample

    st = scenario()
    g = st.host("blackwell").gpus[1]  # free, idle: the same reading every second
    reading = g.reading
    v0 = pane_view(st, "blackwell", 1, NOW, points=30)
    st.apply(
        GpuSample("blackwell", g.history[-1].at + 1.013, tuple(x.reading for x in st.host("blackwell").gpus.values()))
    )
    assert g.reading == reading and g.history[-1].at != g.history[-2].at + 1
    v1 = pane_view(st, "blackwell", 1, NOW, points=30)
    assert v1.util_series is not None and v1.util_series.interval_s == pytest.approx(1.0)
    assert v1 == v0


def test_load_text_is_one_spelling_for_pane_and_server_screen() -> None:
    st = scenario()
    assert load_text(st.servers[TP2]) == "run 3 · queue 0 · KV 42%"
    assert server_view(st.servers[TP2], NOW).load == "run 3 · queue 0 · KV 42%"


def test_history_series_have_fixed_zero_based_scales_with_units() -> None:
    v = pane_view(scenario(), "ct129", 0, NOW)
    assert v.vram_series is not None and v.util_series is not None and v.server and v.server.tok_series
    assert v.vram_series.scale_text() == "VRAM 0–48 GiB" and v.util_series.scale_text() == "util 0–100%"
    assert v.server.tok_series.scale_text() == "tok/s 0–500"
    assert len(v.vram_series.values) == 181 and v.vram_series.interval_s == pytest.approx(1.0)
    top, *_rows, _bottom = graphs([v.util_series], 20, 4, C)
    assert top.plain.startswith("util 0–100% · 20 s")


def test_graph_columns_drawn_again_are_the_same_and_follow_the_theme() -> None:
    """Columns are reused by what they show (gpu_pane._graph_column): a reused one is cell for cell a fresh one, a
    theme change draws them in its colours, and a moved value is a new column."""
    from console.ui.views import Series
    from console.ui.widgets import gpu_pane

    util = Series("util", "%", 100.0, (0.0, 10.0, 50.0, 0.0, 100.0, 0.0), "util")
    vram = Series("VRAM", "GiB", 96.0, (1.0, 40.0, 80.0, 80.0, 80.0, 80.0), "vram", 0.0)

    def cells(lines: list) -> list:  # type: ignore[type-arg]
        return [(x.plain, [(sp.start, sp.end, str(sp.style)) for sp in x.spans]) for x in lines]

    gpu_pane._graph_column.cache_clear()
    first = cells(graphs([util, vram], 40, 3, C))
    again = cells(graphs([util, vram], 40, 3, C))
    gpu_pane._graph_column.cache_clear()
    assert first == again == cells(graphs([util, vram], 40, 3, C))
    other = _colours({"util-bar": "#123456", "background": "#FFFFFF", "foreground": "#000000"})
    assert gpu_pane.style_of("util", other) != gpu_pane.style_of("util", C)
    themed = graphs([util, vram], 40, 3, other)
    gpu_pane._graph_column.cache_clear()
    assert cells(themed) == cells(graphs([util, vram], 40, 3, other)) != first
    moved = Series("util", "%", 100.0, (10.0, 50.0, 0.0, 100.0, 0.0, 90.0), "util")
    assert cells(graphs([moved, vram], 40, 3, C)) != first


def test_a_full_pane_shows_bars_graphs_and_several_log_lines_a_compact_one_the_essentials() -> None:
    v = pane_view(scenario(), "ct129", 0, NOW)
    big = [x.plain for x in draw_pane(v, 76, 24, C)]
    assert big[0].endswith("43.2/48.0 GiB") and big[1].startswith("util █") and "87%" in big[1]
    assert any(line.startswith("tok/s 0–500") and "VRAM 0–48 GiB" in line for line in big)
    assert sum("Decode batch" in line for line in big) >= 3
    small = [x.plain for x in draw_pane(v, 32, 5, C)]  # the narrowest pane: 36 columns less border and padding
    assert len(small) == 5 and small[3] == "● serving  run 3 · q 0 · KV 42%" and "267 tok/s" in small[4]


def test_crashed_pane_keeps_cause_fix_and_log_tail() -> None:
    v = pane_view(scenario(), "blackwell", 1, NOW)
    lines = [x.plain for x in draw_pane(v, 60, 16, C)]
    assert any("missing shared library libavutil.so.58" in x for x in lines)
    assert any(x.startswith("fix: install FFmpeg") for x in lines)
    assert any("Received sigquit" in x for x in lines)


@pytest.mark.parametrize(
    ("size", "shelves", "height", "spill"),
    [
        ((80, 24), (("ct129",), ("blackwell",)), 7, 1),  # panes at their least and the top bar: one row to scroll
        ((120, 36), (("ct129",), ("blackwell",)), 9, 0),
        ((160, 48), (("ct129",), ("blackwell",)), 20, 0),
        ((200, 60), (("ct129",), ("blackwell",)), 25, 0),
    ],
)
def test_layout_fills_the_terminal(
    size: tuple[int, int], shelves: tuple[tuple[str, ...], ...], height: int, spill: int
) -> None:
    w, h = size
    lay = fleet_layout(w, h, [("ct129", 2), ("blackwell", 4)])
    assert tuple(tuple(b.host for b in s) for s in lay.shelves) == shelves and lay.pane_height == height
    rows = sum(max(b.rows for b in s) for s in lay.shelves)
    used = rows * lay.pane_height + len(lay.shelves) + lay.activity_height + 2  # footer, top bar
    assert h - 3 + spill < used <= h + spill  # at most the rounding of pane heights is left over, never half the
    # screen; `spill`: rows past the terminal's, which the list scrolls to


def test_layout_flows_small_hosts_into_one_shelf_and_scrolls_only_when_it_must() -> None:
    lay = fleet_layout(160, 48, [("a", 1), ("b", 2), ("c", 1), ("d", 8)])
    assert [[b.host for b in s] for s in lay.shelves] == [["a", "b", "c"], ["d"]]
    assert lay.place("d") is not None and (lay.place("d").columns, lay.place("d").rows) == (4, 2)  # type: ignore[union-attr]
    with_router = fleet_layout(160, 48, [("ct129", 2), ("blackwell", 4)], {"blackwell": 2})
    assert with_router.pane_height == 19  # the router band's two rows come out of the panes, not off screen
    many = fleet_layout(80, 24, [(f"h{i}", 2) for i in range(8)])
    assert many.pane_height == PANE_MIN_HEIGHT and many.activity_height == 0  # too many to fit: scroll


def test_fleet_filter_matches_host_preset_and_phase_words() -> None:
    st = scenario()
    views = [pane_view(st, h, g, NOW) for h, n in (("ct129", 2), ("blackwell", 4)) for g in range(n)]

    def hits(q: str) -> list[tuple[str, int]]:
        return [(v.host, v.gpu) for v in views if pane_matches(v, q)]

    assert hits("crashed") == [("blackwell", 1)]
    assert hits("qwen3-8b") == [("ct129", 0), ("ct129", 1)]  # the TP group's other GPU too
    assert hits("blackwell free") == [("blackwell", 3)]
    assert hits("loading") == [("blackwell", 0)] and len(hits("")) == 6


def test_a_server_on_a_host_without_gpu_data_stays_on_the_fleet_screen() -> None:
    """nvidia-smi failing (or not reporting a GPU) must not hide the servers there: the band lists them."""
    from console.fleet.events import HostUp, TelemetryError
    from console.ui.views import host_view

    st = FleetState(["a"])
    st.apply(HostUp("a", NOW))
    st.apply(TelemetryError("a", NOW, "nvidia-smi: command not found"))
    m = meta("p", "a", (0, 1), 30000, pid=1, sid=1)
    st.apply(ServerSeen(m, NOW))
    st.apply(LogData(m.name, NOW, m.log_path or "", 0, b"[2026-12-01 10:00:00] Load weight begin.\n"))
    v = host_view(st, "a", NOW)
    assert v.gpus == () and v.empty_text == "no GPU data: nvidia-smi: command not found"
    (row,) = v.unplaced
    text = "".join(t for t, _ in row)
    assert text.startswith("◐ ") and "p :30000 TP2 gpu0-1" in text and text.endswith("Load weight begin.")

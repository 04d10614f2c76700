"""Speculative decoding through the fleet state: the spec view of a server, status --json's spec object, and
the alarms as notices (raised once, cleared when the figure recovers), from real-format Decode lines."""

from __future__ import annotations

import time

from console.fleet.events import HostUp, LogData, NoticeKind, ServerMeta, ServerSeen
from console.fleet.report import server_doc
from console.fleet.specstate import spec_line, spec_status
from console.fleet.state import FleetState

ARGV = (
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/m",
    "--speculative-algorithm",
    "DFLASH",
    "--speculative-draft-model-path",
    "/d",
    "--speculative-dflash-block-size",
    "16",
)


def _line(t: float, acc: str) -> bytes:
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    return (
        f"[{ts}] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, accept len: {acc}, accept rate: 0.15, "
        "cuda graph: True, gen throughput (token/s): 310.50, #queue-req: 0\n"
    ).encode()


def _fleet(argv: tuple[str, ...] = ARGV) -> tuple[FleetState, str]:
    st = FleetState(["h"])
    st.apply(HostUp("h", 0))
    m = ServerMeta(name="dfl@h:gpu1", host="h", gpus=(1,), port=31001, preset="dfl", log_path="/l", argv=argv)
    st.apply(ServerSeen(m, 0))
    return st, m.name


class Feeder:
    def __init__(self, st: FleetState, name: str) -> None:
        self.st, self.name, self.off = st, name, 0

    def feed(self, data: bytes, at: float) -> list:
        out = self.st.apply(LogData(self.name, at, "/l", self.off, data))
        self.off += len(data)
        return list(out.of_kind(NoticeKind.SPEC))


def test_spec_view_and_json_from_decode_lines() -> None:
    st, name = _fleet()
    t0 = float(int(time.time()))
    Feeder(st, name).feed(_line(t0, "3.22") + _line(t0 + 2, "3.10"), t0 + 2)
    s = st.servers[name]
    sp = spec_status(s, t0 + 3)
    assert sp is not None and sp.accept_len == 3.10 and sp.config.dflash and sp.config.accept_max == 17
    assert spec_line(sp, t0 + 3, 15) == "spec DFLASH · accept 3.10"
    assert spec_line(sp, t0 + 60, 15) == "spec DFLASH · accept 3.10 (58 s ago)"
    doc = server_doc(s, t0 + 3)
    assert doc["spec"]["block_size"] == 16 and doc["spec"]["accept_len"] == 3.10
    assert doc["spec"]["accept_len_age_s"] == 1.0 and doc["spec"]["source"] == "log" and doc["warnings"] == []
    plain, pname = _fleet(argv=("-m", "sglang.launch_server", "--model-path", "/m"))
    assert server_doc(plain.servers[pname], t0)["spec"] is None


def test_collapse_alarm_once_and_clears() -> None:
    st, name = _fleet()
    f = Feeder(st, name)
    t0 = float(int(time.time()))
    assert f.feed(_line(t0, "3.20"), t0) == []
    raised = f.feed(_line(t0 + 2, "1.02"), t0 + 2)
    assert len(raised) == 1 and "1.02 under 1.3" in raised[0].message and raised[0].level == "warning"
    assert f.feed(_line(t0 + 4, "1.01"), t0 + 4) == []  # once, while it stands
    doc = server_doc(st.servers[name], t0 + 5)
    assert [w["kind"] for w in doc["warnings"]] == ["accept-collapse"]
    back = f.feed(_line(t0 + 6, "3.05"), t0 + 6)
    assert len(back) == 1 and back[0].level == "info" and "back at 3.05" in back[0].message
    assert server_doc(st.servers[name], t0 + 7)["warnings"] == []


def test_dflash_warning_is_a_notice_once_and_a_json_warning() -> None:
    st, name = _fleet()
    f = Feeder(st, name)
    line = (
        b"[2026-12-07 10:00:00] DFLASH currently supports greedy verification only; ignoring non-greedy sampling "
        b"params (e.g. temperature/top_p/top_k) and using argmax.\n"
    )
    first = f.feed(line, 1.0)
    assert len(first) == 1 and "greedy" in first[0].message
    assert f.feed(line, 2.0) == []
    w = server_doc(st.servers[name], 3.0)["warnings"]
    assert w[0]["kind"] == "greedy-only" and "(2 times)" in w[0]["text"]


def test_metrics_figure_wins_when_newer_and_absurd_ones_are_unknown() -> None:
    st, name = _fleet()
    t0 = float(int(time.time()))
    Feeder(st, name).feed(_line(t0, "3.20"), t0)
    s = st.servers[name]
    s.metrics, s.metrics_at = {"spec_accept_length": 2.5, "spec_accept_rate": 0.1}, t0 + 5
    sp = spec_status(s, t0 + 6)
    assert sp is not None and sp.accept_len == 2.5 and sp.source == "metrics"
    s.metrics = {"spec_accept_length": 40.0}  # past block 16's width: no such figure
    sp = spec_status(s, t0 + 6)
    assert sp is not None and sp.accept_len == 3.20 and sp.source == "log"


def test_pane_view_has_the_spec_line_the_accept_graph_and_the_alarm() -> None:
    from console.ui.views import server_page, server_view

    st, name = _fleet()
    f = Feeder(st, name)
    t0 = float(int(time.time()))
    f.feed(_line(t0, "3.20") + _line(t0 + 1, "3.30"), t0 + 1)
    v = server_view(st.servers[name], t0 + 2)
    assert v.spec == (("spec DFLASH · accept 3.30", ""),)
    assert v.accept_series is not None and v.accept_series.top == 17 and v.accept_series.values == (3.2, 3.3)
    f.feed(_line(t0 + 2, "1.01"), t0 + 2)
    v = server_view(st.servers[name], t0 + 3)
    assert v.spec[-1] == (" ⚠ drafter collapsed", "bold hot")
    page = server_page(st.servers[name], t0 + 3)
    assert "spec: DFLASH · block 16" in page.facts and "draft model: /d" in page.facts
    assert any("under 1.3" in t for t, _ in page.notes)
    plain, pname = _fleet(argv=("-m", "sglang.launch_server", "--model-path", "/m"))
    pv = server_view(plain.servers[pname], t0)
    assert pv.spec == () and pv.accept_series is None


def test_launch_records_roundtrip_skip_bad_lines_and_compare(tmp_path) -> None:
    import os
    import stat

    from console.fleet.events import ServerGone
    from console.fleet.spechistory import SpecHistory, launch_record
    from console.ui.views import server_page

    st, name = _fleet()
    f = Feeder(st, name)
    t0 = float(int(time.time()))
    f.feed(b"".join(_line(t0 + i, a) for i, a in enumerate(("3.10", "3.20", "3.30", "3.40"))), t0 + 4)
    st.apply(ServerGone(name, t0 + 5))
    rec = launch_record(st.servers[name])
    assert rec is not None and rec.preset == "dfl" and rec.algorithm == "DFLASH" and rec.figures == 4
    assert rec.accept_mean == 3.25 and rec.accept_p10 == 3.1 and rec.accept_p90 == 3.4 and rec.shape == "block 16"
    h = SpecHistory(tmp_path / "spec_history.jsonl")
    h.append(rec)
    with h.path.open("a") as fh:
        fh.write("not json\n")
        fh.write('{"preset": 3}\n')
    h.append(rec.__class__(**{**rec.__dict__, "launch_id": "older", "accept_mean": 1.9}))
    assert stat.S_IMODE(os.stat(h.path).st_mode) == 0o600
    back = h.load()
    assert [r.launch_id for r in back] == [rec.launch_id, "older"] and back[0] == rec
    # a new launch of the preset, set beside the ones before it
    st2, name2 = _fleet()
    for r in back:
        st2.apply(r)
    assert st2.spec_median("dfl") == (3.25 + 1.9) / 2
    f2 = Feeder(st2, name2)
    f2.feed(_line(t0, "3.0") + _line(t0 + 1, "3.2"), t0 + 1)
    page = server_page(st2.servers[name2], t0 + 2, spec_records=st2.spec_records)
    hist = [x for x in page.facts if x.startswith("last 2 launches")]
    assert hist and "3.25 · 1.90" in hist[0] and "this launch 3.10" in hist[0]


def test_a_launch_with_few_figures_or_no_spec_is_not_recorded() -> None:
    from console.fleet.spechistory import launch_record

    st, name = _fleet()
    Feeder(st, name).feed(_line(float(int(time.time())), "3.2"), 1.0)
    assert launch_record(st.servers[name]) is None
    plain, pname = _fleet(argv=("-m", "sglang.launch_server", "--model-path", "/m"))
    assert launch_record(plain.servers[pname]) is None


def test_controller_keeps_an_ended_launch_once_in_the_state_dir(tmp_path) -> None:
    from console.config import parse_fleet
    from console.fleet.controller import FleetController
    from console.fleet.events import ServerGone
    from console.fleet.journal import Journal

    fleet = parse_fleet('[hosts.h]\ntransport = "local"\n')
    ctl = FleetController(fleet, journal=Journal(tmp_path / "journal.jsonl"))
    m = ServerMeta(
        name="dfl@h:gpu1", host="h", gpus=(1,), port=1, preset="dfl", log_path="/l", argv=ARGV, launch_id="L1"
    )
    t0 = float(int(time.time()))
    data = b"".join(_line(t0 + i, "3.2") for i in range(4))
    ctl.emit([ServerSeen(m, t0), LogData(m.name, t0, "/l", 0, data), ServerGone(m.name, t0 + 5)])
    ctl.emit([ServerGone(m.name, t0 + 6)])  # ended again (a re-attach): not kept twice
    lines = (tmp_path / "spec_history.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"launch_id": "L1"' in lines[0]
    again = FleetController(fleet, journal=Journal(tmp_path / "journal.jsonl"))
    assert [r.launch_id for r in again.state.spec_records["dfl"]] == ["L1"]


def test_the_startup_timeline_has_the_draft_models_own_rows() -> None:
    from console.ui.screens.server import timeline_table
    from console.ui.views import timeline_rows

    cur = {"launching": 1.0, "loading_weights": 5.0, "cuda_graph": 3.0, "draft_loading_weights": 2.0}
    rows = timeline_rows(cur, {"draft_cuda_graph": 1.0})
    names = [r[0] for r in rows]
    assert names.index("draft_loading_weights") == names.index("cuda_graph") + 1
    assert ("draft_cuda_graph", None, 1.0) in rows and "draft_kv_cache" not in names
    text = timeline_table(rows).plain
    assert "draft weights" in text and "draft graphs" in text
    assert [r[0] for r in timeline_rows({"launching": 1.0}, {})] == [r[0] for r in timeline_rows({}, {})]


def test_server_info_cumulative_figure() -> None:
    from console.fleet.events import SpecCumulative
    from console.fleet.spechistory import cumulative_accept

    body = b'{"version": "0.5.11", "internal_states": [{"avg_spec_accept_length": 3.18, "last_gen_throughput": 1}]}'
    assert cumulative_accept(body) == 3.18
    for bad in (
        b"not json",
        b"[]",
        b'{"internal_states": []}',
        b'{"internal_states": [{"avg_spec_accept_length": "x"}]}',
        b'{"internal_states": [{"avg_spec_accept_length": -2}]}',
        b"[" * 100_000,
    ):
        assert cumulative_accept(bad) is None, bad[:40]
    st, name = _fleet()
    t0 = float(int(time.time()))
    Feeder(st, name).feed(_line(t0, "3.2"), t0)
    st.apply(SpecCumulative(name, t0 + 1, 3.18))
    doc = server_doc(st.servers[name], t0 + 3)
    assert doc["spec"]["accept_len_cumulative"] == 3.18 and doc["spec"]["accept_len_cumulative_age_s"] == 2.0


def test_a_compact_pane_keeps_tok_s_beside_the_spec_figure() -> None:
    from console.ui.views import pane_view
    from console.ui.widgets.gpu_pane import _colours, draw_pane

    st, name = _fleet()
    t0 = float(int(time.time()))
    Feeder(st, name).feed(_line(t0, "3.20") + _line(t0 + 1, "3.30"), t0 + 1)
    v = pane_view(st, "h", 1, t0 + 2)
    compact = [x.plain for x in draw_pane(v, 32, 5, _colours({}))]
    assert any("tok/s" in x and "accept 3.30" in x for x in compact), compact
    tall = [x.plain for x in draw_pane(v, 36, 12, _colours({}))]
    assert "spec DFLASH · accept 3.30" in tall and any("tok/s" in x for x in tall), tall

"""Router config, commands, status parsing, worker reconciliation and crash causes (pure, no processes)."""

from __future__ import annotations

import shlex

import pytest

from console.config import ConfigError, parse_fleet
from console.router.api import RouterWorker, parse_counters, parse_workers
from console.router.command import parse_status, plan_router, start_script, stop_script, worker_url
from console.router.reconcile import ADD_PENDING_S, plan_changes
from console.router.state import RouterView, crash_cause

BASE = """
[hosts.bw]
address = "10.0.0.5"
python = "/opt/venv/bin/python"
run_dir = "/srv/dfc"
[hosts.ct]
[presets.gen]
host = "bw"
gpus = [0, 1, 2, 3]
tp = 1
port = 31000
bind = "0.0.0.0"
model = "/models/q"
[presets.other]
host = "ct"
gpus = [0]
model = "/models/q"
"""


def fleet(router: str):
    return parse_fleet(BASE + router, "hosts.toml")


def errors(router: str) -> list[str]:
    with pytest.raises(ConfigError) as e:
        fleet(router)
    return [str(i) for i in e.value.issues]


def test_router_config_defaults_and_plan():
    f = fleet(
        '[routers.lb]\nhost = "bw"\npresets = ["gen"]\nport = 31080\npolicy = "power_of_two"\n'
        'args = ["--retry-max-retries", "3"]\n'
    )
    spec = f.routers["lb"]
    assert spec.prometheus_port == 31081 and spec.bind == "0.0.0.0"
    plan = plan_router(f, "lb", "20260101-000000")
    assert plan.workers == tuple(f"http://127.0.0.1:{31000 + i}" for i in range(4))
    argv = list(plan.argv)
    assert argv[:3] == ["/opt/venv/bin/python", "-m", "sglang_router.launch_router"]
    assert argv[argv.index("--policy") + 1] == "power_of_two"
    assert argv[argv.index("--prometheus-host") + 1] == "127.0.0.1"
    assert argv[-2:] == ["--retry-max-retries", "3"]
    assert plan.log_path == "/srv/dfc/logs/router-lb_20260101-000000.log"
    assert plan.state_dir == "/srv/dfc/routers/lb"
    words = shlex.split(plan.command)  # the printed command is one shell line a person can paste
    assert words[:4] == ["mkdir", "-p", "/srv/dfc/logs", "&&"]
    assert words[-5:] == ["<", "/dev/null", "&", "echo", "$!"]
    assert words[words.index("--worker-urls") + 1] == "http://127.0.0.1:31000"


def test_presets_sharing_a_port_plan_one_worker():
    f = parse_fleet(
        BASE + '[presets.one]\nhost = "bw"\ngpus = [0]\nport = 31000\nmodel = "/m"\n'
        '[routers.lb]\nhost = "bw"\npresets = ["gen", "one"]\nport = 31080\n',
        "hosts.toml",
    )
    assert plan_router(f, "lb", "s").workers == tuple(f"http://127.0.0.1:{31000 + i}" for i in range(4))


def test_router_config_errors_are_located():
    errs = errors(
        '[routers.lb]\nhost = "bw"\npresets = ["gne", "other"]\nport = 31002\npolcy = "x"\n'
        'args = ["--worker-urls", "http://x"]\n'
    )
    joined = "\n".join(errs)
    assert "routers.lb.presets[0]: unknown preset 'gne' — did you mean 'gen'?" in joined
    assert "routers.lb.presets[1]: preset other runs on host ct, not on the router's host bw" in joined
    assert "routers.lb.port: port 31002 is also used by preset gen on bw" in joined
    assert "routers.lb.polcy: unknown key 'polcy' — did you mean 'policy'?" in joined
    assert "routers.lb.args[0]: '--worker-urls' is set by the console" in joined
    assert all(e.startswith("hosts.toml:") for e in errs)
    assert "routers.lb.policy" in "\n".join(
        errors('[routers.lb]\nhost = "bw"\npresets = ["gen"]\npolicy = "fastest"\n')
    )
    assert "unknown host 'bww'" in "\n".join(errors('[routers.lb]\nhost = "bww"\npresets = ["gen"]\n'))
    keyed = BASE.replace(
        'model = "/models/q"\n[presets.other]', 'model = "/models/q"\napi_key_env = "GEN_KEY"\n[presets.other]'
    )
    with pytest.raises(ConfigError) as e:
        parse_fleet(keyed + '[routers.lb]\nhost = "bw"\npresets = ["gen"]\n', "hosts.toml")
    assert "routers.lb.presets[0]: preset gen requires an API key" in str(e.value)


def test_worker_url_reaches_the_replica_on_its_host():
    assert worker_url("0.0.0.0", 31000) == "http://127.0.0.1:31000"
    assert worker_url("127.0.0.1", 31000) == "http://127.0.0.1:31000"
    assert worker_url("10.1.2.3", 31000) == "http://10.1.2.3:31000"
    assert worker_url("fd00::5", 31000) == "http://[fd00::5]:31000"


def test_scripts_quote_paths():
    f = fleet('[routers.lb]\nhost = "bw"\npresets = ["gen"]\nport = 31080\n')
    plan = plan_router(f, "lb", "s")
    s = start_script(plan, 1.0)
    assert "/srv/dfc/routers/lb/meta.json" in s and "setsid sh -c 'echo $$ > /srv/dfc/routers/lb/pid.tmp" in s
    assert "exec nohup /opt/venv/bin/python -m sglang_router.launch_router" in s
    assert 'kill -TERM -"$pid"' in stop_script("/srv/d d") and "kill -TERM --" not in stop_script("/srv/d d")
    assert "'/srv/d d'/pid" in stop_script("/srv/d d")


def test_parse_status():
    assert not parse_status("none\n").started
    stopped = parse_status('none\nmeta\n{"started_at": 5, "log_path": "/l"}\n')  # a stopped router keeps its log
    assert (
        not stopped.started
        and not stopped.alive
        and stopped.pid is None
        and stopped.meta == {"started_at": 5, "log_path": "/l"}
    )
    r = parse_status('pid 42\nproc Ssl sglang::router\nproc S sh -c x\nmeta\n{"started_at": 5, "log_path": "/l"}\n')
    assert r.started and r.pid == 42 and r.alive and r.meta == {"started_at": 5, "log_path": "/l"}
    assert not parse_status("pid 42\nproc Z [sglang::router] <defunct>\nmeta\n").alive  # a zombie is no router
    assert not parse_status("pid 42\nproc S /usr/bin/vim\nmeta\n").alive  # the pid was reused by something else
    assert parse_status("pid 42\nmeta\n{not json").meta is None


def test_plan_changes():
    a, b, c = "http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"
    w = [RouterWorker("ia", a, True, 0), RouterWorker("ib", b, True, 0), RouterWorker("ix", "http://other:9", True, 0)]
    ch = plan_changes([a, c], [a, b, c], w)
    assert ch.add == (c,) and [x.id for x in ch.remove] == ["ib"]  # b crashed; the hand-added worker stays
    assert not plan_changes([a, b], [a, b], w[:2])
    dup = plan_changes([a], [a], [RouterWorker("1", a, True, 0), RouterWorker("2", a, True, 0)])
    assert [x.id for x in dup.remove] == ["2"] and not dup.add
    # a console that just opened: a live replica without a /health answer yet is neither removed nor added
    assert not plan_changes([], [a, b], w[:2], unsure=[a, b])
    assert [x.id for x in plan_changes([a], [a, b], w[:2], unsure=[b]).remove] == []
    assert [x.id for x in plan_changes([a], [a, b], w[:2], unsure=[]).remove] == ["ib"]
    # an add the router accepted a moment ago is not sent again while its job queue registers it
    assert not plan_changes([c], [c], [], {c: 100.0}, now=100.0 + ADD_PENDING_S - 1)
    assert plan_changes([c], [c], [], {c: 100.0}, now=100.0 + ADD_PENDING_S + 1).add == (c,)


def test_parse_workers_and_counters_take_host_text_safely():
    ws = parse_workers(
        b'{"workers": [{"id": "u1", "url": "http://127.0.0.1:1", "is_healthy": true, "load": 3},'
        b'{"id": "u2", "url": 5}, "junk", {"id": "u3", "url": "http://h:2", "is_healthy": false,'
        b'"load": -1}]}'
    )
    assert ws == [RouterWorker("u1", "http://127.0.0.1:1", True, 3), RouterWorker("u3", "http://h:2", False, None)]
    assert parse_workers(b'{"workers": null}') == []
    with pytest.raises(ValueError):
        parse_workers(b"[" * 100 + b"]" * 100)
    c = parse_counters(
        'smg_router_requests_total{endpoint="chat"} 10\nsmg_router_requests_total{endpoint="x"} 2\n'
        'smg_worker_cb_outcomes_total{worker="http://a",outcome="success"} 7\n'
        'smg_worker_cb_outcomes_total{worker="http://a",outcome="failure"} 1\n'
        "smg_http_connections_active 4\n"
    )
    assert c.requests == 12 and c.per_worker == {"http://a": 8} and c.failures == 1 and c.active == 4


def test_requests_per_second_from_two_reads():
    v = RouterView("lb", "bw", 1, "round_robin")
    c1 = parse_counters('smg_router_requests_total 10\nsmg_worker_cb_outcomes_total{worker="a",outcome="success"} 4\n')
    c2 = parse_counters('smg_router_requests_total 30\nsmg_worker_cb_outcomes_total{worker="a",outcome="success"} 9\n')
    v = v.with_counters(c1, 100.0)
    assert v.rps is None
    v = v.with_counters(c2, 102.0)
    assert v.rps == 10.0 and v.worker_rps == {"a": 2.5}


def test_crash_causes():
    assert "pip install sglang-router" in crash_cause(
        "/usr/bin/python3: No module named sglang_router\n", "py", "bw", 1
    )
    assert (
        crash_cause("\x1b[31mERROR\x1b[0m Address already in use (os error 98)\n", "py", "bw", 31080)
        == "port 31080 is already in use on bw"
    )
    cause = crash_cause(
        "line one\n\x1b]52;c;ZXZpbA==\x07thread 'main' panicked at \x1b[2Jthe end\nINFO bye\n", "py", "bw", 1
    )
    assert cause.startswith("exited: thread 'main' panicked at") and "\x1b" not in cause and "\x07" not in cause
    assert crash_cause("INFO a\nINFO Router ready\n", "py", "bw", 1).startswith(
        "ended without an error in its log (killed by a signal?); its last line: INFO Router ready"
    )
    assert crash_cause("", "py", "bw", 1) == "exited without a word in its log"


def test_scaling_table():
    from console.router.scaling import scaling_table
    from console.sglang.benchstats import LevelResult

    def lv(c: int, tok: float, ttft: float, err: int = 0) -> LevelResult:
        return LevelResult(c, 10, tok, 1.0, ttft, ttft, None, None, None, None, err)

    table = scaling_table([lv(1, 64, 0.028), lv(32, 658, 0.366)], [lv(1, 63, 0.048), lv(32, 1359, 0.098, 1)], 4)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["C", "one", "replica", "tok/s"] and "router (4) tok/s" in lines[0]
    assert lines[1].split() == ["1", "64", "63", "0.98x", "28/48", "0/0"]
    assert lines[2].split() == ["32", "658", "1,359", "2.07x", "366/98", "0/1"]


async def test_read_only_refuses_router_actions_before_touching_a_host():
    from console.fleet.controller import FleetController
    from console.router.manager import RouterManager

    f = fleet('[routers.lb]\nhost = "bw"\npresets = ["gen"]\nport = 31080\n')
    ctl = FleetController(f, read_only=True)  # never started: a refusal must not need the host
    mgr = RouterManager(ctl)
    try:
        for out in (await mgr.up("lb"), await mgr.down("router:lb")):
            assert not out.ok and out.message.startswith("read-only:")
        mgr.views["lb"] = RouterView("lb", "bw", 31080, "round_robin", phase="running")
        assert not await mgr.sync("lb")
    finally:
        await mgr.aclose()


async def test_an_ended_replica_the_router_still_lists_is_named_and_not_healthy():
    """Right after a crash the router still lists the dead worker (and calls it healthy) until a sync removes it:
    `router status` said `(not a known replica)  healthy`; the band counted it healthy."""
    from console.fleet.controller import FleetController
    from console.fleet.events import ServerMeta
    from console.fleet.state import ServerState
    from console.router.command import worker_url
    from console.router.manager import RouterManager

    f = fleet('[routers.lb]\nhost = "bw"\npresets = ["gen"]\nport = 31080\n')
    ctl = FleetController(f)
    mgr = RouterManager(ctl)
    try:
        live = ServerState(ServerMeta("gen@bw:gpu0", "bw", (0,), 31000, "gen", bind="0.0.0.0"))
        dead = ServerState(ServerMeta("gen@bw:gpu1", "bw", (1,), 31001, "gen", bind="0.0.0.0"), alive=False)
        other = ServerState(ServerMeta("x@bw:gpu2", "bw", (2,), 31002, "other-preset", bind="0.0.0.0"), alive=False)
        for s in (live, dead, other):
            ctl.state.servers[s.meta.name] = s
        urls = [worker_url("0.0.0.0", p) for p in (31000, 31001, 31002)]
        assert mgr.replica_of("lb", urls[0]) == "gen@bw:gpu0" and mgr.ended_replica_of("lb", urls[0]) is None
        assert mgr.replica_of("lb", urls[1]) is None and mgr.ended_replica_of("lb", urls[1]) == "gen@bw:gpu1"
        assert mgr.ended_replica_of("lb", urls[2]) is None  # not one of the router's presets
        # status --json: the router calls both healthy; the ended one is named, marked ended and not healthy
        from console.fleet.report import router_doc
        from console.router.api import RouterWorker

        v = RouterView(
            "lb",
            "bw",
            31080,
            "round_robin",
            phase="running",
            workers=(RouterWorker("a", urls[0], True, 0), RouterWorker("b", urls[1], True, 0)),
        )
        mgr.views["lb"] = v
        assert mgr.ended_workers("lb") == {urls[1]: "gen@bw:gpu1"}
        doc = router_doc(v, lambda u: mgr.replica_of("lb", u), mgr.ended_workers("lb"))
        assert doc["healthy_workers"] == 1
        assert [(w["server"], w["healthy"], w["ended"]) for w in doc["workers"]] == [
            ("gen@bw:gpu0", True, False),
            ("gen@bw:gpu1", False, True),
        ]
    finally:
        await mgr.aclose()

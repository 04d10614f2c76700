"""Names typed on the command line: exact, a preset's only server, ambiguous, stopped, typo (pure)."""

from __future__ import annotations

from console.commands.names import resolve, unknown
from console.commands.stop import unknown_host_of
from console.config import parse_fleet
from console.fleet.events import ServerAction, ServerGone, ServerMeta, ServerSeen
from console.fleet.state import FleetState

FLEET = parse_fleet(
    """
[hosts.bw]
address = "10.0.0.1"
[presets.qwen36-gen]
host = "bw"
gpus = [0, 1, 2, 3]
tp = 1
model = "/m"
[presets.solo]
host = "bw"
gpus = [5]
model = "/m"
port = 31000
""",
    "hosts.toml",
)


def _state(*names: str) -> FleetState:
    st = FleetState(["bw"])
    for i, n in enumerate(names):
        preset = n.split("@")[0]
        st.apply(
            ServerSeen(
                ServerMeta(n, "bw", (i,), 30000 + i, preset=preset, pid=100 + i, sid=100 + i, launch_id=f"l{i}"), 1.0
            )
        )
    return st


def test_a_preset_with_several_servers_is_ambiguous_and_lists_them():
    reps = [f"qwen36-gen@bw:gpu{i}" for i in range(4)]
    r = resolve(_state(*reps), FLEET, "qwen36-gen")
    assert r.name is None and not r.stopped and "ambiguous" in (r.error or "")
    assert all(n in (r.error or "") for n in reps), r.error


def test_a_preset_with_one_server_is_that_server():
    assert resolve(_state("solo@bw:gpu5"), FLEET, "solo").name == "solo@bw:gpu5"


def test_a_typo_gets_a_did_you_mean():
    r = resolve(_state("qwen36-gen@bw:gpu0"), FLEET, "qwen36-gne@bw:gpu0")
    assert r.name is None and "did you mean 'qwen36-gen@bw:gpu0'?" in (r.error or ""), r.error
    assert "did you mean 'qwen36-gen'?" in unknown_host_of("qwen36-gn", FLEET)


def test_every_typo_has_one_format():
    assert unknown("preset", "qwen36-gn", ["qwen36-gen", "solo"]) == (
        "unknown preset 'qwen36-gn'; did you mean 'qwen36-gen'? (known: qwen36-gen, solo)"
    )
    assert unknown("router", "zz", []) == "unknown router 'zz' (known: none)"
    many = unknown("host", "x", [f"h{i}" for i in range(20)])
    assert many.endswith(f"(known: {', '.join(f'h{i}' for i in range(16))}, … 4 more)"), many
    assert unknown_host_of("qwen36-gn", FLEET).startswith(
        "unknown server or preset 'qwen36-gn'; did you mean 'qwen36-gen'? (known: qwen36-gen, solo, "
    ), unknown_host_of("qwen36-gn", FLEET)


def test_a_preset_names_its_one_planned_server_and_lists_several():
    r = resolve(FleetState(["bw"]), FLEET, "solo")
    assert (r.name, r.stopped) == ("solo@bw:gpu5", True)
    r = resolve(FleetState(["bw"]), FLEET, "qwen36-gen")
    assert r.name is None and "its replicas: qwen36-gen@bw:gpu0, qwen36-gen@bw:gpu1" in (r.error or ""), r.error


def test_a_stopped_or_absent_replica_is_already_stopped():
    st = _state("solo@bw:gpu5")
    st.apply(ServerAction("solo@bw:gpu5", 2.0, "stop", True, "SIGTERM"))
    st.apply(ServerGone("solo@bw:gpu5", 3.0))
    r = resolve(st, FLEET, "solo@bw:gpu5")
    assert r.stopped and r.name == "solo@bw:gpu5", (r, st.servers["solo@bw:gpu5"].phase)
    r = resolve(FleetState(["bw"]), FLEET, "qwen36-gen@bw:gpu2")  # a planned replica not running now
    assert r.stopped and r.name == "qwen36-gen@bw:gpu2"
    assert resolve(FleetState(["bw"]), FLEET, "solo").stopped

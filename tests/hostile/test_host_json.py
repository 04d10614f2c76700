"""JSON from a host nested too deep (issue 19.2): a named error, never RecursionError, and one bad meta.json
costs only its own server."""

from __future__ import annotations

import inspect
import json
import sys

import pytest

from console import hostjson
from console.fleet import discovery, prechecks
from console.fleet.events import ServerMeta
from tests.faults import results

DEEP = "[" * 100_000 + "]" * 100_000


def test_too_deep_is_a_named_error_not_recursion() -> None:
    with pytest.raises(RecursionError):  # what the stdlib does with it (so the test below means something)
        json.loads(DEEP)
    with pytest.raises(hostjson.HostJsonError) as e:
        hostjson.loads(DEEP, "meta.json on gpu1")
    assert e.value.too_deep and str(e.value) == "meta.json on gpu1: JSON nested deeper than 64 levels"


def test_depth_limit_is_exact_and_ignores_brackets_in_strings() -> None:
    at_limit = "[" * 64 + "]" * 64
    assert hostjson.loads(at_limit, "x") is not None
    with pytest.raises(hostjson.HostJsonError):
        hostjson.loads("[" + at_limit + "]", "x")
    text = json.dumps({"s": "[" * 500 + '\\"{' * 300, "a": [[[1]]]})
    assert hostjson.depth(text) == 4 and hostjson.loads(text, "x")["a"] == [[[1]]]


def test_under_a_lower_recursion_limit_too_deep_is_still_named() -> None:
    """Even where the interpreter's own limit is below the scan's (a deep caller stack), no RecursionError leaks."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 40)
    try:
        with pytest.raises(hostjson.HostJsonError):
            hostjson.loads("[" * 200 + "]" * 200, "x", max_depth=1000)
    finally:
        sys.setrecursionlimit(old)


def _meta(name: str, pid: int) -> str:
    m = ServerMeta(
        name=name,
        host="gpu1",
        gpus=(0,),
        port=30000,
        preset="p",
        managed=True,
        pid=pid,
        sid=pid,
        log_path=f"/logs/{name}.log",
        argv=("python", "-m", "sglang.launch_server"),
    )
    return discovery.meta_to_json(m)


def test_one_bad_meta_json_keeps_the_other_servers() -> None:
    listing = "\n".join(
        [
            "==> meta",
            _meta("a@gpu1:gpu0", 100),
            "==> meta",
            DEEP,
            "==> meta",
            "{not json",
            "==> meta",
            "[1, 2]",
            "==> meta",
            _meta("b@gpu1:gpu1", 200),
            "==> ps",
            "100 1 100 python -m sglang.launch_server --port 30000",
            "200 1 200 python -m sglang.launch_server --port 30001",
        ]
    )
    metas, _, procs = discovery.parse_listing_full(listing, "gpu1")
    names = [m.name for m in metas]
    ok = names == ["a@gpu1:gpu0", "b@gpu1:gpu1"] and all(discovery.is_alive(m, procs) for m in metas)
    results.record("hostile", "json: one too-deep meta.json keeps the host's other servers", 0, ok, 0.0, str(names))
    assert ok, names


def test_too_deep_config_json_is_a_named_non_blocking_precheck() -> None:
    text = "\n".join(
        [
            "==> gpus",
            "0, GPU-aaa, 10, 49140",
            "==> apps",
            "==> ps",
            "==> ports",
            "==> model",
            "present",
            DEEP,
            "==> disk",
            "Filesystem 1024-blocks Used Available Capacity Mounted",
            "/dev/sda1 100000000 1 99999999 1% /",
            "==> metas",
            "==> meta",
            DEEP,
            "==> end",
        ]
    )
    f = prechecks.parse_facts(text, "gpu1")
    assert f.model_present and f.model_config is None
    assert f.model_config_error == "JSON nested deeper than 64 levels"
    assert [(g.index, g.uuid, g.memory_used_mib) for g in f.gpus] == [(0, "GPU-aaa", 10)]


def test_listing_reads_at_most_the_cap_of_a_huge_meta_json(tmp_path) -> None:
    """The listing command itself (run by a real sh) cuts a 20 MB meta.json; the good one next to it survives."""
    import subprocess

    from console.config import Host

    host = Host(run_dir=str(tmp_path))
    for name, text in (("a", _meta("a@gpu1:gpu0", 100)), ("huge", "{" + "x" * 20_000_000)):
        d = tmp_path / "servers" / name
        d.mkdir(parents=True)
        (d / "meta.json").write_text(text)
    (tmp_path / "servers" / "huge" / "history.jsonl").write_text("[" * 20_000_000)
    out = subprocess.run(["sh", "-c", discovery.list_command(host)], capture_output=True, text=True, timeout=60).stdout
    metas, _, _ = discovery.parse_listing_full(out, "gpu1")
    assert len(out) < 25 * discovery.META_MAX_BYTES and [m.name for m in metas] == ["a@gpu1:gpu0"]

"""Launch ports: every known server's port is taken (a loading one too), `--gpus` picks free ones, and a host
without `ss` still has its listening ports read (/proc/net/tcp{,6}). Local-transport sim hosts, real processes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from console.fleet.prechecks import choose_ports, parse_proc_net_tcp
from console.sim.fleet import build_host, sim_down
from console.sim.spec import PRESET_SPECS
from tests.fleet.test_cli import cli


def _free_port_pair() -> int:
    """A port P with P and P+1 free now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p < 65535:
            try:
                with socket.socket() as s2:
                    s2.bind(("127.0.0.1", p + 1))
                return p
            except OSError:
                continue
    raise RuntimeError("no free port pair")


def _host(sim_root: Path, name: str, path: str | None = None) -> str:
    d = sim_root / f"sim-{name}"
    build_host(d, PRESET_SPECS["blackwell"].with_(name=name))
    path = path or f"{d}/bin:/usr/local/bin:/usr/bin:/bin"
    return (
        f'[hosts.{name}]\ntransport = "local"\npython = "{d}/venv/bin/python3"\nrun_dir = "{d}/run"\n'
        f'log_dir = "{d}/logs"\nenv = {{ PATH = "{path}" }}\n'
    )


def _preset(name: str, host: str, gpus: list[int], port: int, sim_root: Path) -> str:
    return (
        f'[presets.{name}]\nhost = "{host}"\ngpus = {gpus}\ntp = 1\nport = {port}\n'
        f'model = "{sim_root}/sim-{host}/models/Qwen3.6-27B"\nargs = ["--mem-fraction-static", "0.5"]\n'
    )


def test_proc_net_tcp_lists_this_machines_listeners():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        text = Path("/proc/net/tcp").read_text() + (
            Path("/proc/net/tcp6").read_text() if Path("/proc/net/tcp6").exists() else ""
        )
    assert port in parse_proc_net_tcp(text)
    assert port not in parse_proc_net_tcp(text.replace(f":{port:04X} ", ":FFFF "))


def test_choose_ports_skips_taken_ones():
    assert choose_ports(30000, 3, {30000, 30002}) == [30001, 30003, 30004]
    assert choose_ports(30000, 1, set()) == [30000]


def test_a_loading_servers_port_is_taken_and_gpus_picks_the_next(
    sim_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DFLASH_SIM_TIME_SCALE", "1.0")  # ~40 s of loading: the second look is mid-load
    port = _free_port_pair()
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        _host(sim_root, "portbox")
        + _preset("gen", "portbox", [0], port, sim_root)
        + _preset("clash", "portbox", [1], port, sim_root)
    )
    r = cli(hosts, "launch", "gen")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        r = cli(hosts, "launch", "clash", "--dry-run")
        assert r.returncode == 1 and f"port {port} on portbox belongs to gen@portbox:gpu0" in r.stdout, r.stdout
        r = cli(hosts, "launch", "gen", "--gpus", "1")
        assert r.returncode == 0 and f"gen@portbox:gpu1  port {port + 1}" in r.stdout, r.stdout + r.stderr
        assert f"--port {port + 1}" in r.stdout
        r = cli(hosts, "stop", "gen")  # two servers of the preset now: ambiguous, both named
        assert r.returncode == 2 and "'gen' is ambiguous" in r.stderr, r.stderr
        assert "gen@portbox:gpu0" in r.stderr and "gen@portbox:gpu1" in r.stderr
        for verb in ("probe", "bench", "logs"):  # one rule for every command (bench took the first replica)
            r = cli(hosts, verb, "gen")
            assert r.returncode == 2 and "'gen' is ambiguous" in r.stderr, (verb, r.stdout, r.stderr)
            assert "gen@portbox:gpu0" in r.stderr and "gen@portbox:gpu1" in r.stderr, (verb, r.stderr)
    finally:
        stops = [cli(hosts, "stop", n).returncode for n in ("gen@portbox:gpu0", "gen@portbox:gpu1")]
        sim_down(sim_root)  # whatever failed, no sim server stays behind
    assert stops == [0, 0]


def test_a_host_without_ss_still_sees_listening_ports(sim_root: Path, tmp_path: Path):
    noss = tmp_path / "bin-noss"  # every program of this machine but ss (a host without iproute2)
    noss.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        for p in Path(d).iterdir() if Path(d).is_dir() else ():
            if p.name != "ss" and not (noss / p.name).exists() and os.access(p, os.X_OK):
                (noss / p.name).symlink_to(p)
    hosts = tmp_path / "hosts.toml"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        hosts.write_text(
            _host(sim_root, "nossbox", f"{sim_root}/sim-nossbox/bin:{noss}")
            + _preset("gen", "nossbox", [0], port, sim_root)
        )
        r = cli(hosts, "launch", "gen", "--dry-run")
    assert r.returncode == 1 and f"port {port} on nossbox is in use by another process" in r.stdout, r.stdout
    assert "no ss" not in r.stdout

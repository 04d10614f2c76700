"""An `--api-key` in a preset (and the key SGLang echoes in its log and `/server_info`) never reaches the
screen (every screen's rendered text, the whole log paged through), the journal, or files the console writes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from console.sglang.client import SGLangClient
from console.ui.app import DflashApp
from console.ui.screens.launch import LaunchScreen
from console.ui.screens.server import ServerScreen
from console.ui.widgets.log_view import LogView
from tests.faults import results
from tests.faults.simfleet import REPO, build_sim_fleet, controller, preset_toml, wait_for
from tests.hostile.test_text import _strips

API_KEY = "sk-dfc-7Hq2Zx9Lm4PwQ3"
HF_TOKEN = "hf_dfcSecretToken42xy"
KNOWN_GAPS: set[str] = set()
"""Recorded as failed trials; asserted by the strict xfail below until fixed."""


def screen_text(app: DflashApp) -> str:
    return "\n".join("".join(t for t, _ in segs) for _, _, segs in _strips(app))


async def _page_log(app: DflashApp, pilot) -> str:  # type: ignore[no-untyped-def]
    """Every line of the server screen's log view, as rendered, top to bottom."""
    view = app.screen.query_one(LogView)
    seen = []
    view.scroll_to(y=0, animate=False)
    await pilot.pause(0.1)
    for _ in range(400):
        seen.append(screen_text(app))
        if view.scroll_y >= view.max_scroll_y:
            break
        view.scroll_to(y=view.scroll_y + max(1, view.size.height - 1), animate=False)
        await pilot.pause(0.02)
    return "\n".join(seen)


async def test_api_key_never_shown_journaled_or_written(
    ssh_host_factory, sim_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = time.monotonic()
    monkeypatch.setenv("DFC_TEST_API_KEY", API_KEY)
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["sec"])
    h = sf.hosts["sec"]
    preset = preset_toml(
        "keyed",
        h,
        port=30700,
        args=f'["--api-key", "{API_KEY}", "--enable-metrics"]',
        env=f'{{ HF_TOKEN = "{HF_TOKEN}" }}',
        extra='api_key_env = "DFC_TEST_API_KEY"\n',
    )
    fleet = sf.fleet(preset)
    journal = tmp_path / "journal.jsonl"
    ctl = controller(fleet, journal)
    app = DflashApp(ctl)
    texts: dict[str, str] = {}
    async with app.run_test(size=(160, 50)) as pilot:
        assert await ctl.wait_hosts(15)
        out = await ctl.launch("keyed", wait=True)
        assert out.ok, out.message
        name = out.servers[0]
        log_on_disk = Path(ctl.state.servers[name].meta.log_path or "").read_text()
        assert API_KEY in log_on_disk, "the sim server must echo the key (else this test checks nothing)"
        await pilot.pause(1.0)
        texts["fleet screen"] = screen_text(app)
        url = await ctl.server_url(name)
        async with httpx.AsyncClient(trust_env=False) as http:
            raw = (await http.get(url + "/server_info", headers={"Authorization": f"Bearer {API_KEY}"})).text
        info_exposes_key = API_KEY in raw
        client = SGLangClient(url, api_key_env="DFC_TEST_API_KEY")
        try:
            texts["/server_info as the console reads it"] = json.dumps(await client.server_info())
        finally:
            await client.aclose()
        app.request_probe(name)  # health, /model_info, /server_info, a short generation
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        probe_ok = app.last_probe is not None and app.last_probe.ok
        texts["probe"] = screen_text(app) + repr(app.last_probe)
        app.open_server(name)
        await wait_for(lambda: isinstance(app.screen, ServerScreen), 5, "server screen")
        await pilot.pause(0.3)
        texts["server screen: log"] = await _page_log(app, pilot)
        await pilot.press("i")
        await pilot.pause(0.2)
        texts["server screen: info"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause(0.2)
        app.open_launch("sec", [0])
        await wait_for(lambda: isinstance(app.screen, LaunchScreen), 5, "launch screen")
        await pilot.press("enter")
        await wait_for(lambda: getattr(app.screen, "preview", None) is not None, 15, "launch preview")
        await pilot.pause(0.2)
        texts["launch preview"] = screen_text(app)
        await pilot.press("escape", "escape")
        await ctl.stop_server(name)
    await ctl.close()
    dry = subprocess.run(
        [sys.executable, "-m", "console", "--hosts", str(sf.toml(preset)), "launch", "keyed", "--dry-run"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    texts["CLI `launch --dry-run` output"] = dry.stdout + dry.stderr
    checks_cli = "--api-key" in dry.stdout
    texts["journal"] = journal.read_text() if journal.exists() else ""
    # every file the console writes on the host but the 0600 secrets file SGLang reads its --api-key from
    texts["remote meta/history"] = h.ssh.exec(f"cat {h.dir}/run/servers/*/*.json* 2>/dev/null").stdout
    local = [p for d in (tmp_path / "state", tmp_path / "config") if d.exists() for p in d.rglob("*") if p.is_file()]
    texts["console state/config files"] = "\n".join(p.read_text(errors="replace") for p in local)
    checks = {where: API_KEY not in t and HF_TOKEN not in t for where, t in texts.items()}
    checks["journal is not empty (so it was checked)"] = "command" in texts["journal"]
    checks["probe answered (with the key)"] = probe_ok
    checks["/server_info does carry the key (so redaction was checked)"] = info_exposes_key
    checks["CLI dry-run printed the command (so it was checked)"] = checks_cli
    for i, (where, ok) in enumerate(checks.items()):
        label = f"secrets: none in {where}" if where in texts else f"secrets (sanity): {where}"
        results.record(
            "hostile",
            label,
            0,
            ok,
            time.monotonic() - t0 if i == 0 else 0.0,
            "" if ok else _around(texts.get(where, ""), (API_KEY, HF_TOKEN)),
        )
    bad = {
        w: _around(texts.get(w, ""), (API_KEY, HF_TOKEN)) for w, ok in checks.items() if not ok and w not in KNOWN_GAPS
    }
    assert not bad, bad


def _around(text: str, needles: tuple[str, ...]) -> str:
    for n in needles:
        i = text.find(n)
        if i >= 0:
            return text[max(0, i - 120) : i + 40].replace(API_KEY, "<API_KEY>").replace(HF_TOKEN, "<HF_TOKEN>")
    return text[-200:]


def test_launch_preview_masks_the_api_key() -> None:
    """Regression (was a strict xfail): the launch preview printed `--api-key VALUE` in the clear."""
    from console.config import parse_fleet
    from console.fleet.api import LaunchPreview
    from console.sglang.command import plan_launch
    from console.ui.screens.launch import preview_content

    fleet = parse_fleet(
        f'[hosts.h]\ntransport = "local"\n[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "/m"\n'
        f'args = ["--api-key", "{API_KEY}"]\nenv = {{ HF_TOKEN = "{HF_TOKEN}" }}\n'
    )
    text = str(preview_content(LaunchPreview("p", plan_launch(fleet, "p", "s")), None))
    assert "--api-key" in text
    assert API_KEY not in text and HF_TOKEN not in text


ENV_KEY = "sk-dfc-EnvKey8Rt5Yq1"
ADMIN_KEY = "sk-dfc-Admin3Wv6Np0"
DB_PASSWORD = "pw-dfc-Db7Kx2Lq"


def _as_nobody(h, command: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    """`sh -c command` on the test host as user nobody (65534), in the host's PID and mount namespaces."""
    pre = ["nsenter", "-t", str(h.ssh.init_pid), "-n", "-p", "-m", "-u", "-S", "65534", "-G", "65534"]
    return subprocess.run(
        [*pre, "env", "-i", "PATH=/usr/bin:/bin", "/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=10,
        cwd="/",
    )


async def test_no_secret_on_the_host_process_table(
    ssh_host_factory, sim_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (issue 17.1): the key and HF_TOKEN rode on `env K=V ... --api-key K` argv, visible to every user of
    the GPU host. As `nobody` on a host behind real sshd, `ps -eww`, BSD `ps e` and every /proc/*/cmdline are sampled
    from before the launch until the server serves: no secret, while the server did get every one of them."""
    t0 = time.monotonic()
    sf = build_sim_fleet(ssh_host_factory, sim_root, ["psv"])
    h = sf.hosts["psv"]
    if not h.ssh.netns:
        pytest.skip("another local user on the host needs root and the host's PID namespace (loopback mode)")
    monkeypatch.setenv("DFC_TEST_ENV_KEY", ENV_KEY)
    preset = preset_toml(
        "pskeyed",
        h,
        port=30710,
        args=f'["--admin-api-key={ADMIN_KEY}", "--enable-metrics"]',
        env=f'{{ HF_TOKEN = "{HF_TOKEN}", DB_PASSWORD = "{DB_PASSWORD}" }}',
        extra='api_key_env = "DFC_TEST_ENV_KEY"\n',
    )
    secrets = (ENV_KEY, ADMIN_KEY, HF_TOKEN, DB_PASSWORD)
    samples: list[str] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            r = _as_nobody(
                h,
                "ps -eww -o pid,user,args; ps aeuxww; for f in /proc/[0-9]*/cmdline; do "
                "tr '\\0' ' ' < $f 2>/dev/null; echo; done",
            )
            samples.append(r.stdout + r.stderr)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    async with controller(sf.fleet(preset)) as ctl:
        assert await ctl.wait_hosts(15)
        sampler.start()
        try:
            out = await ctl.launch("pskeyed", wait=True)
            await asyncio.sleep(0.5)
        finally:
            stop.set()
            sampler.join(15)
        assert out.ok, out.message
        s = ctl.state.servers[out.servers[0]]
        env = h.environ(int(s.meta.pid or 0))
        url = await ctl.server_url(s.name)
        async with httpx.AsyncClient(trust_env=False) as http:
            anon = (await http.get(url + "/v1/models")).status_code
            keyed = (await http.get(url + "/v1/models", headers={"Authorization": f"Bearer {ENV_KEY}"})).status_code
        d = f"{h.dir}/run/servers/{s.name.replace(':', '_')}"
        modes = h.ssh.exec(f"stat -c '%a %n' '{d}' '{d}/secrets.yaml'; ls -a '{d}'").stdout
        nobody_reads = _as_nobody(h, f"cat '{d}/secrets.yaml'")
        await ctl.stop_server(s.name)
    seen = "\n".join(samples)
    leaked = [i for i, x in enumerate(secrets) if x in seen]
    checks = {
        "no secret in ps -eww, ps e or /proc/*/cmdline as nobody": not leaked,
        "nobody's ps saw the server (so the check could fail)": "sglang.launch_server" in seen,
        "the server got HF_TOKEN and DB_PASSWORD": env.get("HF_TOKEN") == HF_TOKEN
        and env.get("DB_PASSWORD") == DB_PASSWORD,
        "the server requires the api_key_env key (401 without, 200 with)": (anon, keyed) == (401, 200),
        "secrets.yaml 0600 in a 0700 dir, the env file removed": (
            "700 " in modes and "600 " in modes and ".secret.env" not in modes
        ),
        "nobody cannot read secrets.yaml": nobody_reads.returncode != 0 and ENV_KEY not in nobody_reads.stdout,
    }
    for i, (what, ok) in enumerate(checks.items()):
        results.record(
            "hostile",
            f"secrets in ps: {what}",
            0,
            ok,
            time.monotonic() - t0 if i == 0 else 0.0,
            f"{len(samples)} samples" + (f"; leaked secret #{leaked}" if leaked else ""),
            **({"samples": float(len(samples))} if i == 0 else {}),
        )
    assert not leaked, f"secrets {leaked} seen by nobody in {len(samples)} samples"
    assert all(checks.values()), {k: v for k, v in checks.items() if not v} | {"modes": modes, "http": (anon, keyed)}

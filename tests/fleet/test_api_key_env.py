"""A preset whose only secret flag is `api_key_env` must start a server that requires that key."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from console.sim.fleet import build_host
from console.sim.spec import PRESET_SPECS
from tests.fleet.conftest import make_fleet

KEY = "sk-only-from-api-key-env-7f3a"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_api_key_env_alone_protects_the_server(
    sim_root: Path, controller_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: with `api_key_env` and no secret flag in `args`, the key was written to secrets.yaml but the
    server was started without `--config secrets.yaml`, so it served every request with no key at all."""
    d = sim_root / "sim-keybox"
    build_host(d, PRESET_SPECS["blackwell"].with_(name="keybox", time_scale=0.1))
    monkeypatch.setenv("DFC_ONLY_KEY", KEY)
    fleet = make_fleet(
        f'[hosts.keybox]\ntransport = "local"\npython = "{d}/venv/bin/python3"\nrun_dir = "{d}/run"\n'
        f'log_dir = "{d}/logs"\nenv = {{ PATH = "{d}/bin:/usr/local/bin:/usr/bin:/bin" }}\n'
        f'[presets.keyed]\nhost = "keybox"\ngpus = [3]\nmodel = "{d}/models/Qwen3-0.6B"\nport = {_free_port()}\n'
        'args = ["--mem-fraction-static", "0.5"]\nready_timeout = 60\napi_key_env = "DFC_ONLY_KEY"\n'
    )
    ctl = controller_factory(fleet)
    await ctl.start()
    out = await ctl.launch("keyed", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    try:
        url = await ctl.server_url(name)
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            anon = (await http.post(url + "/v1/chat/completions", json=body)).status_code
            keyed = (
                await http.post(url + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
            ).status_code
        argv = ctl.state.servers[name].meta.argv
    finally:
        await ctl.stop_server(name)
    assert (anon, keyed) == (401, 200)
    assert KEY not in " ".join(argv)


async def test_api_key_env_unset_is_a_warning_before_launch(
    sim_root: Path, controller_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its api_key_env variable unset the server starts with no key at all; the pre-checks say so
    (a warning: the launch is still allowed) instead of starting an open server silently."""
    d = sim_root / "sim-keybox2"
    build_host(d, PRESET_SPECS["blackwell"].with_(name="keybox2", time_scale=0.1))
    monkeypatch.delenv("DFC_UNSET_KEY", raising=False)
    fleet = make_fleet(
        f'[hosts.keybox2]\ntransport = "local"\npython = "{d}/venv/bin/python3"\nrun_dir = "{d}/run"\n'
        f'log_dir = "{d}/logs"\nenv = {{ PATH = "{d}/bin:/usr/local/bin:/usr/bin:/bin" }}\n'
        f'[presets.keyed]\nhost = "keybox2"\ngpus = [3]\nmodel = "{d}/models/Qwen3-0.6B"\nport = {_free_port()}\n'
        'api_key_env = "DFC_UNSET_KEY"\n'
    )
    ctl = controller_factory(fleet)
    await ctl.start()
    pv = await ctl.preview("keyed")
    warn = [c for c in pv.checks if c.name == "api key"]
    assert len(warn) == 1 and not warn[0].ok and not warn[0].blocking, pv.checks
    assert "DFC_UNSET_KEY is not set" in warn[0].message
    monkeypatch.setenv("DFC_UNSET_KEY", KEY)
    assert not [c for c in (await ctl.preview("keyed")).checks if c.name == "api key"]

"""Speculative decoding end to end: a DFLASH sim server behind real sshd, read by the controller (Decode lines,
/metrics rank 0, /server_info's lifetime figure), shown in status --json, and its launch kept when it stops."""

from __future__ import annotations

import httpx

from console.fleet.report import server_doc
from tests.fleet.conftest import make_fleet, preset_toml
from tests.fleet.test_lifecycle import wait_for


async def test_dflash_server_figures_from_every_source(sim_ssh, controller_factory, tmp_path):
    h = sim_ssh("gpuhost")
    args = [
        "--speculative-algorithm",
        "DFLASH",
        "--speculative-draft-model-path",
        h.model("Qwen3.6-27B-DFlash-b16"),
        "--speculative-dflash-block-size",
        "16",
        "--mem-fraction-static",
        "0.5",
        "--enable-metrics",
    ]
    ctl = controller_factory(make_fleet(h.section() + preset_toml("dfl", h, [0], 30000, args=args)))
    await ctl.start()
    assert await ctl.wait_hosts(10)
    out = await ctl.launch("dfl", wait=True)
    assert out.ok, out.message
    name = out.servers[0]
    url = await ctl.server_url(name)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 300, "ignore_eos": True, "temperature": 0}
    async with httpx.AsyncClient(timeout=60) as c:
        for _ in range(3):
            assert (await c.post(f"{url}/v1/chat/completions", json=body)).status_code == 200
    s = ctl.state.servers[name]
    await wait_for(lambda: list(s.log.accepts), 20)
    await wait_for(lambda: s.metrics.get("spec_accept_length"), 20)
    await wait_for(lambda: s.spec_cumulative is not None, 40)
    doc = server_doc(s)["spec"]
    assert doc["algorithm"] == "DFLASH" and doc["block_size"] == 16
    assert 3.0 < doc["accept_len"] < 3.4 and doc["source"] in ("log", "metrics")
    assert 3.0 < doc["accept_len_cumulative"] < 3.4
    out = await ctl.stop_server(name)
    assert out.ok, out.message
    await wait_for(lambda: ctl.state.spec_records.get("dfl"), 20)
    assert ctl.spec_history.path.exists() and '"preset": "dfl"' in ctl.spec_history.path.read_text()

"""Link faults: sshd sessions killed mid-tail (no line lost or repeated), a silent link, an unknown host key."""

from __future__ import annotations

import asyncio
import re

from tests.fleet.conftest import launch_small, make_fleet
from tests.fleet.test_lifecycle import wait_for


def seq_lines(ctl, name: str) -> list[int]:
    return [int(m.group(1)) for ln in ctl.state.servers[name].log.lines if (m := re.fullmatch(r"SEQ (\d+)", ln))]


async def test_sessions_killed_mid_tail_no_line_lost_or_repeated(sim_ssh, controller_factory):
    from console.sim.control import inject

    h = sim_ssh("flaky")
    ctl, name, log = await launch_small(h, controller_factory)
    inject(h.dir, 30000, "crash", kind="sigkill")  # the server's own writes must not interleave with ours
    await wait_for(lambda: not ctl.state.servers[name].alive, 10)
    n = 300
    writer = h.ssh.spawn(
        ["/bin/sh", "-c", f'i=0; while [ $i -lt {n} ]; do echo "SEQ $i" >> "$0"; i=$((i+1)); sleep 0.01; done', log],
        as_user=True,
    )
    try:
        connects = ctl.links["flaky"].connects
        for _ in range(2):
            await asyncio.sleep(1.0)
            assert h.ssh.kill_sessions() >= 1
            await wait_for(lambda c=connects: ctl.links["flaky"].connects > c, 12)
            connects = ctl.links["flaky"].connects
        await wait_for(lambda: seq_lines(ctl, name)[-1:] == [n - 1], 15)
    finally:
        writer.wait(10)
    assert seq_lines(ctl, name) == list(range(n))
    assert ctl.state.servers[name].log.gaps == 0


async def test_link_down_then_up_is_back_within_10s(sim_ssh, controller_factory):
    h = sim_ssh("silent")
    if not h.ssh.netns:
        import pytest

        pytest.skip("needs network namespaces")
    ctl = controller_factory(make_fleet(h.section()))
    loop = asyncio.get_running_loop()
    c0 = loop.time()
    await ctl.start()
    assert await ctl.wait_hosts(10)
    connect_s = loop.time() - c0  # this run's baseline: one connect and first sample on this machine as loaded now
    h.ssh.link_down()
    await wait_for(lambda: ctl.state.hosts["silent"].conn != "up", 12)
    h.ssh.link_up()
    t0 = loop.time()
    await wait_for(lambda: ctl.state.hosts["silent"].conn == "up", 12)
    assert loop.time() - t0 < 10 + 2 * connect_s + 0.5  # the backoff's 10 s cap plus a connect as slow as the first
    await wait_for(lambda: not ctl.state.hosts["silent"].stale(__import__("time").time()), 5)


async def test_unknown_host_key_refused_with_fingerprint(sim_ssh, controller_factory):
    h = sim_ssh("stranger")
    h.ssh.known_hosts.write_text("")
    ctl = controller_factory(make_fleet(h.section()))
    await ctl.start()
    await wait_for(lambda: ctl.state.hosts["stranger"].conn == "down", 10)
    err = ctl.state.hosts["stranger"].last_error or ""
    assert "unknown host key" in err and "SHA256:" in err, err
    assert not ctl.state.hosts["stranger"].gpus

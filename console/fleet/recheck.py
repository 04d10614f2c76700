"""The second look before a server is called ended, and the log re-read when a server turns out alive.

IO edge of console.fleet.liveness (the rules): the controller starts these as tasks from its process
loop callback, which must not block.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from console.fleet import discovery, liveness
from console.fleet.events import Event, LogData, ServerGone
from console.fleet.hostops import Rechecks
from console.sglang.command import shell_path
from console.sglang.phase import Phase
from console.transport.base import TransportError

if TYPE_CHECKING:
    from console.fleet.hostlink import HostLink


def _same(ctl: Rechecks, name: str, launch_id: str) -> bool:
    s = ctl.state.servers.get(name)
    return s is not None and s.alive and s.meta.launch_id == launch_id and ctl.absences.missing(name)


async def confirm_gone(ctl: Rechecks, link: HostLink, name: str) -> None:
    """A sample missed `name`: look again; end it only if ps misses it too and /health does not answer.

    The log is read to its end by the same command, so the ServerGone that follows is diagnosed
    (and its notice worded) from every line the server wrote."""
    s = ctl.state.servers.get(name)
    if s is None:
        return
    launch_id = s.meta.launch_id
    await asyncio.sleep(liveness.CONFIRM_DELAY_S)
    if not _same(ctl, name, launch_id):
        return
    offset, path = s.log_offset, s.meta.log_path
    try:
        r = await link.run(liveness.confirm_command(path, offset), timeout=15)
    except TransportError:
        return  # the link is down: nothing is confirmed; the next sample asks again
    procs, rest = liveness.parse_confirm(r.stdout)
    if not _same(ctl, name, launch_id):
        return
    if discovery.is_alive(s.meta, procs):
        ctl.absences.seen(name)
        return
    if s.meta.port is not None and s.phase is not Phase.CRASHED:
        h = await ctl.check_health(name)
        if h.status in liveness.ANSWERING and ctl.absences.absent_for(name, time.time()) < liveness.HEALTH_VETO_S:
            ctl.emit([h])
            return
        if not _same(ctl, name, launch_id):
            return
    now = time.time()
    events: list[Event] = []
    if rest and path:
        events.append(LogData(name, now, path, offset, rest.encode()))
    events.append(ServerGone(name, now))
    ctl.absences.seen(name)
    ctl.emit(events)


async def resync_log(ctl: Rechecks, link: HostLink, name: str) -> None:
    """A server called ended is alive after all: its log model was reset, so read the log again from the
    start (the state drops tail chunks until this arrives), then keep tailing after it."""
    s = ctl.state.servers.get(name)
    if s is None or not s.meta.log_path:
        return
    path = s.meta.log_path
    try:
        r = await link.run(f"head -c {liveness.LOG_REST_MAX} {shell_path(path)}", timeout=30)
        data = r.stdout.encode()
    except TransportError:
        link.untail(name)  # cannot read it now: a fresh tail from byte 0 re-reads it instead
        link.tail(name, path, 0)
        return
    ctl.emit([LogData(name, time.time(), path, 0, data)])
    link.tail(name, path, len(data))

"""A console that stays attached while its server serves (launch, wait ready, keep tailing), to be SIGKILLed by tests.

usage: python -m tests.faults.console_driver HOSTS_TOML PRESET   prints `LAUNCHED name`, `READY name`, then runs on.
"""

from __future__ import annotations

import asyncio
import sys

from console.config import load_fleet
from console.fleet.controller import FleetController


async def main(hosts: str, preset: str) -> int:
    fleet = load_fleet(hosts)
    async with FleetController(fleet) as ctl:
        if not await ctl.wait_hosts(15):
            print("UNREACHABLE", flush=True)
            return 3
        out = await ctl.launch(preset)
        if not out.ok:
            print(f"REFUSED {out.message}", flush=True)
            return 1
        name = out.servers[0]
        print(f"LAUNCHED {name}", flush=True)
        ready = await ctl.wait_ready(name, 30)
        print(f"{'READY' if ready.ok else 'FAILED'} {name}", flush=True)
        while True:  # attached: tails, health polls, telemetry, until killed
            await asyncio.sleep(3600)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))

"""`check --remote`: run SGLang's own argument validation for each preset on its host (console.sglang.validate)."""

from __future__ import annotations

import asyncio

from console.config import Fleet
from console.sglang.lint import Finding
from console.sglang.validate import RULE, findings_from_result, validation_commands
from console.transport import TransportError, make_transport

TIMEOUT_S = 240.0
"""Importing torch + SGLang and reading config.json can take a minute on a cold host."""


def run_remote(fleet: Fleet, names: list[str]) -> list[Finding]:
    """Validate every named preset on its host; one host's failure does not stop the others."""
    return asyncio.run(_run_all(fleet, names))


async def _run_all(fleet: Fleet, names: list[str]) -> list[Finding]:
    by_host: dict[str, list[str]] = {}
    for n in names:
        by_host.setdefault(fleet.presets[n].host, []).append(n)
    results = await asyncio.gather(*(_run_host(fleet, h, ps) for h, ps in by_host.items()))
    out: list[Finding] = []
    for name in names:
        for fs in results:
            out.extend(f for f in fs if f.preset == name)
    for f in out:
        print(f"  {f}")
    return out


async def _run_host(fleet: Fleet, host_name: str, presets: list[str]) -> list[Finding]:
    t = make_transport(host_name, fleet.hosts[host_name])
    try:
        await t.connect()
    except TransportError as e:
        return [Finding(RULE, "error", p, f"cannot validate on host {host_name!r}: {e.message}") for p in presets]
    out: list[Finding] = []
    try:
        for p in presets:
            for cmd in validation_commands(fleet, p):
                try:
                    r = await t.run(cmd, timeout=TIMEOUT_S)
                except TransportError as e:
                    out.append(Finding(RULE, "error", p, f"validation on {host_name!r} failed to run: {e.message}"))
                    continue
                out.extend(findings_from_result(p, r.exit_status, r.stdout, r.stderr))
    finally:
        await t.close()
    return out

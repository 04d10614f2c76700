"""`dflash-console probe NAME|URL [--prompt TEXT]`: health, model, one short generation, TTFT and tok/s.

NAME goes through the fleet (SSH tunnel unless the host is `http = "direct"`); a URL is used as is.
Exit 0 healthy and answered, 1 not ready or the generation failed, 2 unknown name, 3 host unreachable.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from console.commands.stop import resolve, unknown_host_of

if TYPE_CHECKING:  # the fleet layer (asyncssh, httpx) is imported when the command runs, not for `--help`
    from console.fleet.controller import FleetController


PROMPT = "Say hello in one short sentence."


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("probe", help="health, model info, a short generation with TTFT and tok/s")
    p.add_argument(
        "target",
        metavar="NAME|URL",
        help="server name (PRESET@HOST:gpuN), a preset with one server, router:NAME, or an http(s) URL",
    )
    p.add_argument("--prompt", default=PROMPT, metavar="TEXT", help=f"the prompt to send (default: {PROMPT!r})")
    p.add_argument("--max-tokens", type=int, default=32, metavar="N", help="tokens to generate at most (default 32)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=run)


async def probe_url(url: str, prompt: str, max_tokens: int, api_key_env: str | None, as_json: bool) -> int:
    from console.fleet.journal import mask
    from console.fleet.report import EXIT_FAILED, EXIT_OK
    from console.sglang.client import SGLangClient

    async with SGLangClient(url, api_key_env=api_key_env, timeout=30) as c:
        r = await c.probe(prompt, max_tokens=max_tokens)
    model = (r.model_info or {}).get("model_path")
    ttft = r.stats.ttft_s if r.stats else None
    tps = r.stats.tokens_per_s if r.stats else None
    if as_json:
        from console.remote_text import for_json

        print(
            json.dumps(
                for_json(
                    {
                        "url": url,
                        "health": r.health.state,
                        "status": r.health.status,
                        "model": model,
                        "ttft_s": ttft,
                        "tokens_per_s": tps,
                        "tokens": r.stats.tokens if r.stats else None,
                        "answer": r.text,
                        "reasoning": r.reasoning,
                        "error": r.error,
                        "ok": r.ok,
                    }
                ),
                indent=2,
            )
        )
    else:
        print(f"health   {r.health.state} (HTTP {r.health.status}, {r.health.latency_s * 1000:.0f} ms)")
        print(f"model    {model or '-'}")
        print(f"TTFT     {f'{ttft * 1000:.0f} ms' if ttft is not None else '-'}")
        print(f"tok/s    {f'{tps:.1f}' if tps is not None else '-'}")
        if r.reasoning:
            print(f"thinking {r.reasoning.strip()[:300]}")
        print(f"answer   {r.text.strip()}")
        if r.error:
            print(mask(f"error    {r.error}"))
    return EXIT_OK if r.ok else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from console.config import load_fleet
    from console.fleet.report import EXIT_USAGE, fail, host_of, run_async, session

    if args.target.startswith(("http://", "https://")):
        _remember_fleet_secrets(args.hosts)
        return run_async(probe_url(args.target, args.prompt, args.max_tokens, None, args.json))
    fleet = load_fleet(args.hosts)
    host = host_of(args.target, fleet)
    if args.target.startswith("router:") and args.target[7:] in fleet.routers:  # an SGLang router (console/router/)
        host = fleet.routers[args.target[7:]].host

        async def via_router(ctl: FleetController) -> int:
            return await probe_url(await ctl.server_url(args.target), args.prompt, args.max_tokens, None, args.json)

        return run_async(session(args, [host], via_router, fleet=fleet))
    if host is None:
        return fail(unknown_host_of(args.target, fleet) + " (or give a URL)", EXIT_USAGE)

    async def body(ctl: FleetController) -> int:
        name, why = resolve(ctl, args.target)
        if name is None:
            return fail(why, EXIT_USAGE)
        url = await ctl.server_url(name)
        return await probe_url(url, args.prompt, args.max_tokens, ctl.api_key_env(name), args.json)

    return run_async(session(args, [host], body, fleet=fleet))


def _remember_fleet_secrets(path: str | None) -> None:
    """A URL needs no hosts.toml, but when one loads, the secrets it names are masked in what the server says
    (a bare HF_TOKEN echoed in an answer or /model_info was printed as is)."""
    import contextlib

    from console.config import ConfigError, load_fleet

    with contextlib.suppress(ConfigError, OSError):
        load_fleet(path)

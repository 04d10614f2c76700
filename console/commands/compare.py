"""`dflash-console compare A B`: the same prompts on two servers, a level at a time, A then B, with accept length.

A drafter A/B: tok/s, the server's own accept length for the level (its Decode lines), TTFT and ITL p50, errors
and B/A per concurrency level, then a one-line verdict. The load generator is bench's (`console.sglang.bench`);
the figures and the text are `console.sglang.compare` (pure). Saved to bench.jsonl as a record of kind "compare".
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from console.sglang.benchstats import num_prompts_notes, parse_concurrency

if TYPE_CHECKING:
    from console.sglang.bench import BenchSpec, BenchTarget, LoadGenerator
    from console.sglang.compare import LevelPair, Point, Side, SideLevel

DEFAULT_LEVELS = "1,8,32"
SETTLE_QUIET_S = 1.0
"""A server's log is read up to date once no new accept figure has come for this long (the tail polls at 0.25 s)."""
SETTLE_MAX_S = 8.0
SERVING_WAIT_S = 10.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="drafter A/B: the same prompts on two servers, per concurrency tok/s, accept length, TTFT, ITL, B/A",
    )
    p.add_argument("a", metavar="A", help="the baseline: a server name (PRESET@HOST:gpuN) or a preset with one server")
    p.add_argument("b", metavar="B", help="the candidate, named as A; ratios are B/A")
    p.add_argument("--concurrency", default=DEFAULT_LEVELS, metavar="LIST", help=f"levels (default {DEFAULT_LEVELS})")
    p.add_argument(
        "--requests", type=int, metavar="N", help="requests per level on each server (default 5 x concurrency)"
    )
    p.add_argument("--max-tokens", type=int, default=256, metavar="N", help="tokens per answer (default 256)")
    p.add_argument("--input-len", type=int, default=1024, metavar="N", help="prompt length in tokens (default 1024)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="per-request timeout (default 600)")
    p.add_argument("--no-save", action="store_true", help="do not append this run to bench.jsonl")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from console.sglang.bench import BenchSpec

    try:
        levels = parse_concurrency(args.concurrency)
    except ValueError as e:
        print(f"error: --concurrency: {e}", file=sys.stderr)
        return 2
    if args.input_len < 1 or args.max_tokens < 1:
        print("error: --input-len and --max-tokens must be >= 1", file=sys.stderr)
        return 2
    if args.requests is not None and args.requests < 1:
        print("error: --requests must be >= 1", file=sys.stderr)
        return 2
    if args.a == args.b:
        print(f"error: A and B are the same server ('{args.a}'); compare two servers", file=sys.stderr)
        return 2
    for name in (args.a, args.b):
        if name.startswith(("http://", "https://")):
            print(
                f"error: '{name}': compare needs a server or preset name (its log gives the accept length)",
                file=sys.stderr,
            )
            return 2
    for note in num_prompts_notes(levels, args.requests):
        print(f"note: {note}", file=sys.stderr)
    spec = BenchSpec(
        url="",
        concurrency=tuple(levels),
        input_len=args.input_len,
        output_len=args.max_tokens,
        num_prompts=args.requests,
        timeout_s=args.timeout,
    )
    return asyncio.run(_main(args, spec))


async def _main(args: argparse.Namespace, spec: BenchSpec) -> int:
    from console.commands.bench import connect_target
    from console.config import load_fleet
    from console.fleet.controller import FleetController
    from console.sglang.bench import LoadGenerator, append_record
    from console.sglang.compare import all_failed, compare_doc, render_report

    api = FleetController(load_fleet(args.hosts), read_only=bool(getattr(args, "read_only", False)))
    try:
        try:
            ta = await connect_target(api, args.a)
            tb = await connect_target(api, args.b)
            if ta.server == tb.server:
                raise LookupError(f"A and B are the same server ({ta.server}); compare two servers")
            await wait_serving(api, ta.server)
            await wait_serving(api, tb.server)
        except LookupError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        a, b = side_of(api, ta), side_of(api, tb)
        progress = _stderr_progress() if not args.json else None
        try:
            async with (
                LoadGenerator(replace(spec, url=ta.url or "", api_key=ta.api_key)) as ga,
                LoadGenerator(replace(spec, url=tb.url or "", api_key=tb.api_key)) as gb,
            ):
                pairs = await run_pairs(api, spec, (a, ga), (b, gb), progress)
        except (OSError, RuntimeError, ValueError) as e:
            print(f"error: compare failed: {e}", file=sys.stderr)
            return 3
    finally:
        await api.close()
    doc = compare_doc(a, b, pairs, input_len=spec.input_len, output_len=spec.output_len, requests=spec.num_prompts)
    if not args.no_save:
        append_record(record_of(doc, ta, tb))
    if args.json:
        from console.remote_text import for_json

        print(json.dumps(for_json(doc), indent=2))
    else:
        print(render_report(a, b, pairs))
    return 3 if all_failed(pairs) else 0


async def wait_serving(api: Any, name: str, timeout_s: float = SERVING_WAIT_S) -> None:
    """Return once the server is ready or serving; LookupError naming its phase after timeout_s."""
    from console.sglang.phase import Phase

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        srv = api.state.servers.get(name)
        phase = srv.phase if srv is not None else None
        if phase in (Phase.READY, Phase.SERVING):
            return
        if loop.time() > end:
            raise LookupError(f"server '{name}' is not serving (phase {phase or 'unknown'})")
        await asyncio.sleep(0.1)


def side_of(api: Any, t: BenchTarget) -> Side:
    from console.sglang.compare import Side
    from console.sglang.specdec import spec_config

    cfg = spec_config(api.state.servers[t.server].meta.argv)
    return Side(t.server, t.preset, cfg.algorithm if cfg is not None else None)


def accept_points(api: Any, server: str) -> list[Point]:
    """The server's Decode-line accept figures seen so far, as the pane shows them (none past the verify width)."""
    from console.sglang.specdec import spec_config

    srv = api.state.servers.get(server)
    if srv is None:
        return []
    cfg = spec_config(srv.meta.argv)
    ceiling = cfg.accept_max if cfg is not None and cfg.draft_tokens else None
    return [p for p in srv.log.accepts if ceiling is None or p[1] <= ceiling]


async def settle(api: Any, server: str) -> list[Point]:
    """The accept figures once the log tail has caught up: none new for SETTLE_QUIET_S (at most SETTLE_MAX_S)."""
    loop = asyncio.get_running_loop()
    start = last_change = loop.time()
    pts = accept_points(api, server)
    while loop.time() - last_change < SETTLE_QUIET_S and loop.time() - start < SETTLE_MAX_S:
        await asyncio.sleep(0.1)
        now = accept_points(api, server)
        if len(now) != len(pts) or (now and now[-1] is not pts[-1]):
            pts, last_change = now, loop.time()
    return pts


async def run_side(api: Any, side: Side, g: LoadGenerator, c: int, progress: Callable[..., None] | None) -> SideLevel:
    """One level on one server, with the accept length its log printed meanwhile (or its lifetime mean)."""
    from console.sglang.compare import SideLevel, level_accept, points_after

    before = await settle(api, side.server) if side.algorithm else []
    marker = before[-1] if before else None
    lv = await g.run_level(c, progress=progress)
    new: list[float] = []
    lifetime = None
    if side.algorithm:
        new = points_after(await settle(api, side.server), marker)
        if not new:
            lifetime = await g.lifetime_accept_len()
    acc, source = level_accept(new, lifetime, side.algorithm is not None)
    return SideLevel(lv, acc, source)


async def run_pairs(
    api: Any,
    spec: BenchSpec,
    a: tuple[Side, LoadGenerator],
    b: tuple[Side, LoadGenerator],
    progress: Callable[..., None] | None = None,
) -> list[LevelPair]:
    """Warm both up, then every level: A, then B (the same prompts: the generator seeds them by level)."""
    from console.sglang.compare import LevelPair

    for _, g in (a, b):
        await g.warmup()
    pairs = []
    for c in spec.concurrency:
        sa = await run_side(api, a[0], a[1], c, progress)
        sb = await run_side(api, b[0], b[1], c, progress)
        pairs.append(LevelPair(c, sa, sb))
    return pairs


def record_of(doc: dict[str, Any], ta: BenchTarget, tb: BenchTarget) -> dict[str, Any]:
    """The bench.jsonl line: the document, when, and each side's URL, args and GPUs."""
    rec = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "engine": "console", **doc}
    for key, t in (("a", ta), ("b", tb)):
        rec[key] = {**rec[key], "url": t.url, "server_args": list(t.server_args), "gpu_model": t.gpu_model}
    return rec


def _stderr_progress() -> Callable[[int, int, int], None] | None:
    from console.commands.bench import _stderr_progress as bench_progress

    return bench_progress()

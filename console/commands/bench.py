"""`dflash-console bench NAME`: a concurrency sweep against one server, saved and compared with the last run.

NAME is a server/replica name (`PRESET@HOST:gpuN`), a preset with one server (the rule of
console/commands/names.py) or a URL. The built-in load generator (`console.sglang.bench`) runs here;
`--engine sglang` runs SGLang's own `bench_serving` on the host through the fleet's transport. The BenchScreen shares the target
(`console.fleet.bench_target`) and the load generator (`console.sglang.bench`), never this module.
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

from console.sglang.bench_serving_parse import bench_serving_command, parse_summary
from console.sglang.benchstats import (
    LevelResult,
    compare_levels,
    default_num_prompts,
    levels_of,
    num_prompts_notes,
    parse_concurrency,
    previous_record,
)

if TYPE_CHECKING:
    from console.sglang.bench import BenchSpec, BenchTarget

DEFAULT_LEVELS = "1,32,64,128"
"""The load generator (httpx) is imported only when a bench runs: the CLI imports every command at start."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="concurrency sweep against one server (tok/s, TTFT, ITL, E2E), saved and compared")
    p.add_argument(
        "name", metavar="NAME", help="server name (PRESET@HOST:gpuN), a preset with one server, or an http(s) URL"
    )
    p.add_argument("--concurrency", default=DEFAULT_LEVELS, metavar="LIST", help=f"levels (default {DEFAULT_LEVELS})")
    p.add_argument("--input-len", type=int, default=1024, metavar="N", help="prompt length in tokens (default 1024)")
    p.add_argument("--output-len", type=int, default=256, metavar="N", help="tokens per answer (default 256)")
    p.add_argument(
        "--num-prompts",
        type=int,
        metavar="N",
        help="requests per level, exactly (default 5 x concurrency; fewer than C keeps fewer in flight)",
    )
    p.add_argument(
        "--engine",
        choices=("console", "sglang"),
        default="console",
        help="console: the built-in load generator; sglang: `python -m sglang.bench_serving` on the host",
    )
    p.add_argument("--model", help="the request's model field (default: /v1/models' first id)")
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
    if args.input_len < 1 or args.output_len < 1:
        print("error: --input-len and --output-len must be >= 1", file=sys.stderr)
        return 2
    if args.num_prompts is not None and args.num_prompts < 1:
        print("error: --num-prompts must be >= 1", file=sys.stderr)
        return 2
    for note in num_prompts_notes(levels, args.num_prompts):
        print(f"note: {note}", file=sys.stderr)
    spec = BenchSpec(
        url="",
        concurrency=tuple(levels),
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.num_prompts,
        model=args.model,
        timeout_s=args.timeout,
    )
    return asyncio.run(_main(args, spec))


def is_url(name: str) -> bool:
    return name.startswith(("http://", "https://"))


async def _main(args: argparse.Namespace, spec: BenchSpec) -> int:
    from console.sglang.bench import BenchTarget, LoadGenerator, append_record, load_records, make_record

    api = None
    if is_url(args.name):
        target = BenchTarget(server=args.name, url=args.name)
        if args.engine == "sglang":
            print("error: --engine sglang needs a server or preset name (it runs on the host)", file=sys.stderr)
            return 2
    else:
        from console.config import load_fleet
        from console.fleet.controller import FleetController

        fleet = load_fleet(args.hosts)
        api = FleetController(fleet, read_only=bool(getattr(args, "read_only", False)))
        try:
            target = await connect_target(api, args.name)
        except LookupError as e:
            await api.close()
            print(f"error: {e}", file=sys.stderr)
            return 2
    try:
        progress = _stderr_progress() if not args.json else None
        if args.engine == "sglang":
            assert api is not None
            levels, info = await run_engine_sglang(api, target, spec, progress), {}
            model, fixed = target.model_path or "", True
        else:
            async with LoadGenerator(replace(spec, url=target.url or "", api_key=target.api_key)) as g:
                res = await g.sweep(progress)
            levels, info, model, fixed = res.levels, res.server_info, res.model, res.fixed_output_len
    except (OSError, RuntimeError, ValueError) as e:
        print(f"error: bench failed: {e}", file=sys.stderr)
        return 3
    finally:
        if api is not None:
            await api.close()
    record = make_record(
        server=target.server,
        preset=target.preset,
        url=target.url or "",
        engine=args.engine,
        levels=levels,
        spec=spec,
        server_args=target.server_args,
        gpu_model=target.gpu_model,
        server_info=info,
        fixed_output_len=fixed,
        model=model,
    )
    prev = previous_record(load_records(), target.preset, target.server, args.engine, spec.input_len, spec.output_len)
    if not args.no_save:
        append_record(record)
    if args.json:
        from console.remote_text import for_json

        print(
            json.dumps(
                for_json({"server": target.server, "preset": target.preset, "levels": [lv.public() for lv in levels]}),
                indent=2,
            )
        )
    else:
        print(render_report(target, levels, prev, args.engine, fixed))
    return 3 if levels and all(lv.errors == lv.requests for lv in levels) else 0


# -- resolving NAME through the fleet ---------------------------------------------------------
def resolve_server(api: Any, name: str) -> str:
    """The server NAME names, by the rule every command shares (console/commands/names.py); LookupError else."""
    from console.commands.names import resolve

    r = resolve(api.state, api.fleet, name)
    if r.name is None:
        raise LookupError(r.error or f"no server '{name}'")
    return r.name


async def wait_for_server(api: Any, name: str, timeout_s: float = 20.0) -> Any:
    """The server's state once the controller has seen it alive; LookupError after timeout_s."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        srv = api.state.servers.get(name)
        if srv is not None and srv.alive:
            return srv
        if loop.time() > end:
            raise LookupError(f"server '{name}' is not running (nothing seen on its host within {timeout_s:.0f} s)")
        await asyncio.sleep(0.1)


async def connect_target(api: Any, name: str, wait_s: float = 20.0) -> BenchTarget:
    """Start the controller, resolve NAME, wait for the server (and its GPU telemetry, ≤ 5 s), fill in the target."""
    if name.startswith("router:"):  # SGLang's router in front of replicas (console/router/)
        from console.router.manager import router_target

        return await router_target(api, name, wait_s)
    from console.commands.stop import unknown_host_of
    from console.fleet.report import host_of

    host = host_of(name, api.fleet)
    if host is None:
        raise LookupError(unknown_host_of(name, api.fleet))
    await api.start()
    await api.wait_discovered(host, wait_s)  # the host's servers re-attached: a preset's replicas are known
    server = resolve_server(api, name)
    srv = await wait_for_server(api, server, wait_s)
    hs = api.state.hosts.get(srv.meta.host)
    for _ in range(50):
        if hs is None or any(g in hs.gpus for g in srv.meta.gpus):
            break
        await asyncio.sleep(0.1)
    from console.fleet.bench_target import target_from_state

    return await target_from_state(api, server, srv.meta.preset, srv)


# -- --engine sglang ----------------------------------------------------------------------------
async def run_engine_sglang(
    api: Any, target: BenchTarget, spec: BenchSpec, progress: Callable[[int, int, int], None] | None = None
) -> list[LevelResult]:
    """One `python -m sglang.bench_serving` per level on the server's host, parsed from its summary."""
    if target.host is None or target.port is None or not target.python:
        raise ValueError(f"{target.server}: host, port or interpreter unknown; cannot run bench_serving there")
    run_cmd = remote_runner(api, target.host)
    host = api.fleet.hosts[target.host]
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out: list[LevelResult] = []
    for c in spec.concurrency:
        n = default_num_prompts(c, spec.num_prompts)
        if progress is not None:
            progress(c, 0, n)
        cmd = bench_serving_command(
            target.python,
            port=target.port,
            concurrency=c,
            num_prompts=n,
            input_len=spec.input_len,
            output_len=spec.output_len,
            tokenizer=target.model_path,
            env=target.env,
            read_key=bool(target.api_key),
            output_file=f"{host.run_dir.rstrip('/')}/bench/{stamp}-c{c}.jsonl",
        )
        res = await run_cmd(cmd, spec.timeout_s * 4, (target.api_key + "\n") if target.api_key else None)
        try:
            lv = parse_summary(res.stdout + res.stderr).to_level(num_prompts=n, concurrency=c)
        except ValueError as e:
            raise RuntimeError(f"bench_serving on {target.host} (exit {res.exit_status}): {e}") from None
        out.append(lv)
        if progress is not None:
            progress(c, n, n)
    return out


def remote_runner(api: Any, host: str) -> Callable[..., Any]:
    """`run(command, timeout, input)` on the host through the controller's link (its transport) for it."""
    links = getattr(api, "links", None)
    link = links.get(host) if isinstance(links, dict) else None
    if link is None or not hasattr(link, "run"):
        raise RuntimeError(f"no link to host {host} from the fleet controller")

    async def run_cmd(command: str, timeout: float, input: str | None) -> Any:
        return await link.run(command, timeout=timeout, input=input)

    return run_cmd


# -- output ----------------------------------------------------------------------------------------
def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.0f}" if v >= 0.1 else f"{v * 1000:.1f}"


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def render_table(levels: list[LevelResult]) -> str:
    """The results table: one row per concurrency level; TTFT/ITL in ms, E2E in s, as p50/p99."""
    head = ("C", "requests", "out tok/s", "req/s", "TTFT ms p50/p99", "ITL ms p50/p99", "E2E s p50/p99", "errors")
    rows = [head] + [
        (
            str(lv.concurrency),
            str(lv.requests),
            f"{lv.output_throughput_tok_s:,.0f}",
            f"{lv.request_throughput_rps:.2f}",
            f"{_ms(lv.ttft_p50_s)}/{_ms(lv.ttft_p99_s)}",
            f"{_ms(lv.itl_p50_s)}/{_ms(lv.itl_p99_s)}",
            f"{_s(lv.e2e_p50_s)}/{_s(lv.e2e_p99_s)}",
            str(lv.errors),
        )
        for lv in levels
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def render_report(
    target: BenchTarget,
    levels: list[LevelResult],
    prev: dict[str, Any] | None,
    engine: str = "console",
    fixed: bool = True,
) -> str:
    """Title, table, comparison with the previous run of the same preset, and error examples."""
    what = f"{target.server}" + (
        f" (preset {target.preset})" if target.preset and target.preset not in target.server else ""
    )
    lines = [
        f"bench {what} via {engine}" + (f" on {target.gpu_model}" if target.gpu_model else ""),
        render_table(levels),
    ]
    if not fixed:
        lines.append("note: the server rejected ignore_eos, so answers may be shorter than --output-len")
    if prev is not None:
        deltas = compare_levels(levels, levels_of(prev))
        if deltas:
            lines.append(
                f"vs previous run ({prev.get('time', '?')}, same engine, input {prev.get('input_len')} and "
                f"output {prev.get('output_len')} tokens): " + ", ".join(deltas)
            )
    for lv in levels:
        for e in lv.error_examples:
            lines.append(f"C={lv.concurrency} error: {e}")
    return "\n".join(lines)


def _stderr_progress() -> Callable[[int, int, int], None] | None:
    """A one-line progress on a terminal's stderr; None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(c: int, done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        getattr(sys.stderr, "raw_write", sys.stderr.write)(f"\rC={c:<4} {done}/{total} requests" + end)
        sys.stderr.flush()

    return show

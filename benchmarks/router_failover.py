"""Router failover and scaling on the real sglang-router in front of sim replicas (a local sim host).

1. Failover: a closed-loop streaming load through the router (C=12, 120 requests), one of three replicas
   SIGKILLed once 24 have finished; prints requests, failed requests, and which failures they were.
2. Scaling: the console's load generator against one replica, then against the router over N replicas,
   same shape; prints a table of output tok/s per level and the ratio.

Run: `.venv/bin/python -m benchmarks.router_failover [--trials 5] [--replicas 3]` (a minute or two).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from console.sglang.bench import BenchSpec, LoadGenerator
from tests.router.scenario import PRESET, ROUTER, crash_under_load, open_rig, wait_until


async def failover(trials: int, replicas: int) -> list[dict]:
    out = []
    for t in range(trials):
        root = Path(tempfile.mkdtemp(prefix="dfc-router-bench-", dir="/tmp"))
        rig = await open_rig(root, replicas=replicas)
        try:
            assert (await rig.ctl.launch(PRESET, wait=True)).ok
            mgr = rig.mgr
            await wait_until(lambda m=mgr: len(m.ready_urls(ROUTER)) == replicas, 30, "replicas")
            assert (await rig.mgr.up(ROUTER)).ok
            watch = asyncio.create_task(rig.mgr.watch(every=0.5))
            try:
                r = await crash_under_load(rig, concurrency=12, num_prompts=120)
            finally:
                watch.cancel()
            out.append(
                {
                    "trial": t,
                    "requests": r.requests,
                    "errors": r.errors,
                    "concurrency": r.concurrency,
                    "examples": sorted(set(r.error_examples)),
                }
            )
            print(json.dumps(out[-1]), flush=True)
        finally:
            await rig.close()
            shutil.rmtree(root, ignore_errors=True)
    return out


async def scaling(replicas: int, levels: tuple[int, ...]) -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="dfc-router-scale-", dir="/tmp"))
    rig = await open_rig(root, replicas=replicas)
    rows = []
    try:
        assert (await rig.ctl.launch(PRESET, wait=True)).ok
        await wait_until(lambda: len(rig.mgr.ready_urls(ROUTER)) == replicas, 30, "replicas")
        assert (await rig.mgr.up(ROUTER)).ok
        one = await rig.ctl.server_url(rig.replicas()[0])
        via = await rig.mgr.url(ROUTER)
        for url, who in ((one, "one replica"), (via, f"router over {replicas}")):
            spec = BenchSpec(url=url, concurrency=levels, input_len=128, output_len=64, num_prompts=None)
            async with LoadGenerator(spec) as g:
                res = await g.sweep()
            for lv in res.levels:
                rows.append(
                    {
                        "target": who,
                        "concurrency": lv.concurrency,
                        "tok_s": round(lv.output_throughput_tok_s),
                        "errors": lv.errors,
                    }
                )
    finally:
        await rig.close()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--levels", default="1,8,32")
    a = ap.parse_args()
    os.environ.setdefault("DFLASH_SIM_TOKEN_RATE", "400")
    fo = asyncio.run(failover(a.trials, a.replicas))
    errs = [r["errors"] for r in fo]
    print(
        f"failover: {len(fo)} trials, {sum(r['requests'] for r in fo)} requests, failed per trial {errs} "
        f"(C=12: at most the requests in flight on the killed replica)"
    )
    rows = asyncio.run(scaling(a.replicas, tuple(int(x) for x in a.levels.split(","))))
    by = {(r["target"], r["concurrency"]): r for r in rows}
    print("C  one replica tok/s  router tok/s  ratio  errors")
    for c in (int(x) for x in a.levels.split(",")):
        o, r = by[("one replica", c)], by[(f"router over {a.replicas}", c)]
        print(
            f"{c:<3}{o['tok_s']:>18}{r['tok_s']:>14}{r['tok_s'] / max(o['tok_s'], 1):>7.2f}  {o['errors']}/{r['errors']}"
        )


if __name__ == "__main__":
    main()

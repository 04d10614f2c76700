"""Check the telemetry path on real NVIDIA hardware: `status --json` vs nvidia-smi while torch holds VRAM.

Run on a GPU machine from the repo root: `python3 benchmarks/gpu_status_check.py [--gib 20] [--out DIR]`.
It starts a torch process that allocates a known amount of memory and multiplies matrices, writes a
local-transport hosts.toml, runs `python -m console status --json`, reads nvidia-smi itself, and
prints both with the differences (memory within 1 %, utilisation above 0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import sys, time, torch
gib = float(sys.argv[1]); secs = float(sys.argv[2])
hold = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("holding", gib, "GiB", flush=True)
end = time.time() + secs
while time.time() < end:
    for _ in range(20):
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
"""


def nvidia_smi() -> list[dict[str, str]]:
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=index,name,memory.used,memory.total,utilization.gpu",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in out.strip().splitlines():
        i, name, used, total, util = [c.strip() for c in line.split(",")]
        rows.append(
            {"index": i, "name": name, "memory_used_mib": used, "memory_total_mib": total, "utilization_pct": util}
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dfc-gpu-"))
    hosts = tmp / "hosts.toml"
    hosts.write_text(f'[hosts.gpu]\ntransport = "local"\npython = "{sys.executable}"\nrun_dir = "{tmp}/run"\n')
    env = {**os.environ, "DFLASH_STATE_DIR": str(tmp / "state")}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(a.gib), str(a.seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        print(worker.stdout.readline().strip(), flush=True)
        time.sleep(6)
        t0 = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-m", "console", "--hosts", str(hosts), "status", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        took = time.monotonic() - t0
        smi = nvidia_smi()
    finally:
        worker.kill()
        worker.wait()
    print("status rc", r.returncode, f"({took:.1f} s)")
    if r.stderr:
        print(r.stderr[-3000:])
    doc = json.loads(r.stdout)
    result = {"status": doc, "nvidia_smi_after": smi}
    for g in doc["hosts"][0]["gpus"]:
        s = next(x for x in smi if int(x["index"]) == g["index"])
        used = g["memory_used_mib"]
        diff = abs(used - int(s["memory_used_mib"])) / max(1, int(s["memory_used_mib"]))
        print(
            f"GPU {g['index']} {g['name']}: console {used} MiB / {g['memory_total_mib']} MiB, util {g['utilization_pct']}%;"
            f" nvidia-smi {s['memory_used_mib']} MiB, util {s['utilization_pct']}%; memory diff {diff:.2%}"
        )
        result.setdefault("checks", []).append(
            {
                "gpu": g["index"],
                "memory_diff": diff,
                "util": g["utilization_pct"],
                "memory_ok": diff <= 0.01,
                "util_ok": (g["utilization_pct"] or 0) > 0,
            }
        )
    Path(a.out, "gpu_status_check.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(doc, indent=2))
    return 0 if all(c["memory_ok"] and c["util_ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())

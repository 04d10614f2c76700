"""Reliability report: run the fault and hostile-input suites and print their trials and outcomes as markdown.

usage: python -m benchmarks.reliability_report [--trials SCALE] [--suites faults,hostile] [--from JSON] [--out JSON]
Runs `pytest tests/faults tests/hostile` with DFLASH_RELIABILITY_OUT pointing at a results file (each trial
writes one record), then prints one table row per case: trials, passed, failed, and the figures measured
(median / worst). `--from` prints the table of an earlier run without running anything. Exit 0 when every
trial passed, 1 otherwise (known gaps are strict-xfail tests and show up as failed trials in the table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {
    "detect_s": "detected (s)",
    "samples": "samples",
    "reconnect_s": "reconnect after link back (s)",
    "reattach_s": "re-attach (s)",
    "console_s": "console ran (s)",
    "stop_s": "stop (s)",
    "max_key_s": "worst key (s)",
    "p90_key_s": "p90 key (s)",
    "max_loop_lag_s": "worst loop lag (s)",
    "refusal_s": "both launches returned (s)",
    "gate_gave_up_s": "gate gave up after (s)",
    "took_s": "took (s)",
    "baseline_s": "normal request (s)",
    "loop_lag_s": "loop lag (s)",
    "held_bytes": "held (bytes)",
    "parse_s": "parse on the loop (s)",
    "deadline_s": "deadline (s)",
    "bound_s": "bound (s)",
    "refuse_s": "refusal checks took (s)",
    "phase_ok": "phase shown (1 = yes)",
    "cause_known": "cause named (1 = yes)",
    "slowdown_p90": "machine slowdown p90 (x)",
    "slowdown_worst": "machine slowdown worst (x)",
}
"""Labels of the figures trials record; a figure with no label here is printed under its own key."""


def run_suites(suites: list[str], scale: str | None, out: Path) -> tuple[int, float]:
    env = dict(os.environ, DFLASH_RELIABILITY_OUT=str(out))
    if scale:
        env["DFLASH_FAULT_TRIALS"] = scale
    t0 = time.monotonic()
    rc = subprocess.call(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=12",
            *[f"tests/{s}" for s in suites],
        ],
        cwd=ROOT,
        env=env,
    )
    return rc, time.monotonic() - t0


def _fmt(xs: list[float]) -> str:
    if not xs:
        return ""
    med = statistics.median(xs)

    def one(v: float) -> str:
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"

    return f"{one(med)} / {one(max(xs))}" if len(xs) > 1 else one(med)


def grouped(records: list[dict[str, Any]]) -> OrderedDict[tuple[str, str], list[dict[str, Any]]]:
    """Rows by (suite, case); a family of one-trial checks (`nvidia-smi: ...`) folds into one row that lists
    the failed checks, so the table stays readable. Known gaps keep a row each."""
    rows: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
    for r in records:
        rows.setdefault((r["suite"], r["case"]), []).append(r)
    fam: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in rows:
        head = key[1].split(":", 1)[0]
        if ":" in key[1] and not head.startswith("known gap"):
            fam.setdefault((key[0], head), []).append(key)
    out: OrderedDict[tuple[str, str], list[dict[str, Any]]] = OrderedDict()
    for key, recs in rows.items():
        head = key[1].split(":", 1)[0]
        members = fam.get((key[0], head), [])
        if len(members) > 1 and all(len(rows[m]) == 1 for m in members):
            folded = out.setdefault((key[0], f"{head} ({len(members)} checks)"), [])
            check = key[1].split(":", 1)[1].strip()
            folded.extend(
                dict(r, detail=f"{check}: {r.get('detail') or 'failed'}" if not r["ok"] else "") for r in recs
            )
        else:
            out[key] = recs
    return out


def table(doc: dict[str, Any], group: bool = True) -> str:
    """One markdown row per (suite, case), in the order the cases first ran."""
    if group:
        rows = grouped(doc.get("records", []))
    else:
        rows = OrderedDict()
        for r in doc.get("records", []):
            rows.setdefault((r["suite"], r["case"]), []).append(r)
    lines = [
        "| suite | case | trials | passed | failed | figures (median / worst) | first failure |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    total = passed = 0
    for (suite, case), recs in rows.items():
        ok = sum(1 for r in recs if r["ok"])
        total += len(recs)
        passed += ok
        figs = []
        keys = list(FIGURES) + sorted({k for r in recs for k in r.get("figures", {})} - set(FIGURES))
        for key in keys:
            vals = [float(r["figures"][key]) for r in recs if key in r.get("figures", {})]
            if vals:
                figs.append(f"{FIGURES.get(key, key)} {_fmt(vals)}")
        if any("detect_s" in r.get("figures", {}) for r in recs):
            w = sum(1 for r in recs if float(r["figures"].get("detect_s", 99)) <= 2.0)
            figs.append(f"within 2 s: {w}/{len(recs)}")
        bads = [r for r in recs if not r["ok"]]
        why = "; ".join((b.get("detail") or "failed").replace("|", "\\|").replace("\n", " ")[:140] for b in bads[:2])
        lines.append(f"| {suite} | {case} | {len(recs)} | {ok} | {len(recs) - ok} | {'; '.join(figs)} | {why} |")
    lines.append(f"| **all** | | **{total}** | **{passed}** | **{total - passed}** | | |")
    return "\n".join(lines)


def summary(doc: dict[str, Any]) -> str:
    """The seed and trial counts a run is compared by (the same seed and scale give the same counts)."""
    recs = doc.get("records", [])
    per = OrderedDict()
    for r in recs:
        per[r["suite"]] = per.get(r["suite"], 0) + 1
    counts = ", ".join(f"{s} {n}" for s, n in per.items())
    failed = sum(1 for r in recs if not r["ok"])
    return (
        f"Seed {doc.get('seed', 'unrecorded')} (hypothesis `@seed` or derandomized), "
        f"DFLASH_FAULT_TRIALS={doc.get('trials_scale') or '1'}: {len(recs)} trials ({counts}), "
        f"{failed} failed; written {doc.get('written_at', '?')}."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", metavar="SCALE", help="DFLASH_FAULT_TRIALS: multiply every trial count (e.g. 0.5, 2)")
    ap.add_argument("--suites", default="faults,hostile", help="comma-separated test dirs under tests/")
    ap.add_argument("--from", dest="src", metavar="JSON", help="print the table of an existing results file")
    ap.add_argument("--out", metavar="JSON", help="keep the results file here (default: a temporary file)")
    ap.add_argument("--flat", action="store_true", help="one row per check (no folding of one-trial families)")
    a = ap.parse_args(argv)
    if a.src:
        doc = json.loads(Path(a.src).read_text())
        print(summary(doc) + "\n")
        print(table(doc, group=not a.flat))
        return 0 if all(r["ok"] for r in doc.get("records", [])) else 1
    out = Path(a.out) if a.out else Path(tempfile.mkstemp(prefix="reliability-", suffix=".json")[1])
    out.unlink(missing_ok=True)
    rc, wall = run_suites([s.strip() for s in a.suites.split(",") if s.strip()], a.trials, out)
    if not out.exists():
        print(f"no results written (pytest exit {rc})", file=sys.stderr)
        return 1
    doc = json.loads(out.read_text())
    print(
        f"Reliability run: `pytest tests/{' tests/'.join(a.suites.split(','))}` on {os.cpu_count()} cores, "
        f"{wall:.0f} s wall, pytest exit {rc}."
    )
    print(summary(doc) + "\n")
    print(table(doc, group=not a.flat))
    ok = all(r["ok"] for r in doc.get("records", []))
    return 0 if ok and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

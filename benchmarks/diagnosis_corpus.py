"""Score the log parser + diagnosis on the labelled corpus of real SGLang logs (tests/sglang/corpus): prints a table and accuracies.

Usage: .venv/bin/python benchmarks/diagnosis_corpus.py [--corpus DIR] [--quiet]
Exit status 1 when phase < 95 %, crashed < 95 % or cause (over the crashed logs) < 90 %, or any log gets a
confident cause other than its label (a wrong slug; `unknown` with the best line is never one).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from console.sglang.diagnose import diagnose_text

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "sglang" / "corpus"
TARGETS = {"phase": 0.95, "crashed": 0.95, "cause": 0.90}


@dataclass(frozen=True)
class Row:
    name: str
    want_phase: str
    got_phase: str
    want_crashed: bool
    got_crashed: bool
    want_cause: str
    got_cause: str
    error_line: str
    heldout: bool = False
    """Labelled after the parser was changed for the rest, never used to develop it."""

    @property
    def wrong_slug(self) -> bool:
        """A confident cause that is not the labelled one (worse than `unknown`, which names no cause)."""
        return self.got_cause not in (self.want_cause, "unknown", "none")

    @property
    def ok(self) -> dict[str, bool]:
        return {
            "phase": self.want_phase == self.got_phase,
            "crashed": self.want_crashed == self.got_crashed,
            "cause": self.want_cause == self.got_cause,
        }


def score(corpus: Path = CORPUS) -> tuple[list[Row], dict[str, float]]:
    """Run the real parser and diagnosis on every labelled log; -> (rows, accuracy per measure)."""
    labels = tomllib.loads((corpus / "labels.toml").read_text())
    rows = []
    for name, lab in sorted(labels.items()):
        summary, diag = diagnose_text((corpus / f"{name}.log").read_bytes())
        no_sglang = getattr(summary, "sglang_lines", 1) == 0
        rows.append(
            Row(
                name,
                lab["phase"],
                "none" if no_sglang else summary.phase.value,
                lab["crashed"],
                summary.crashed,
                lab["cause"],
                diag.cause if diag else "none",
                diag.error_line if diag else "",
                lab.get("heldout", False),
            )
        )
    crashes = [r for r in rows if r.want_crashed]
    acc = {
        "phase": sum(r.ok["phase"] for r in rows) / len(rows),
        "crashed": sum(r.ok["crashed"] for r in rows) / len(rows),
        "cause": sum(r.ok["cause"] for r in crashes) / max(1, len(crashes)),
        "cause_all": sum(r.ok["cause"] for r in rows) / len(rows),
        "wrong_slug": float(sum(r.wrong_slug for r in rows)),
    }
    return rows, acc


def table(rows: list[Row]) -> str:
    w = max(len(r.name) for r in rows)
    out = [f"{'log':{w}}  {'phase (want/got)':33} {'crashed':13} {'cause (want/got)':60}"]
    for r in rows:
        mark = {k: " " if v else "X" for k, v in r.ok.items()}
        out.append(
            f"{r.name:{w}} {mark['phase']}{r.want_phase + ' / ' + r.got_phase:33} "
            f"{mark['crashed']}{str(r.want_crashed)[0] + ' / ' + str(r.got_crashed)[0]:12} "
            f"{mark['cause']}{r.want_cause + ' / ' + r.got_cause}"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--quiet", action="store_true", help="only the accuracies")
    a = ap.parse_args()
    rows, acc = score(a.corpus)
    if not a.quiet:
        print(table(rows))
    n_crash = sum(r.want_crashed for r in rows)
    print(
        f"\n{len(rows)} logs ({n_crash} crashes): phase {acc['phase']:.1%}  crashed {acc['crashed']:.1%}  "
        f"cause {acc['cause']:.1%} of crashes ({acc['cause_all']:.1%} of all logs)  wrong slug {acc['wrong_slug']:.0f}"
    )
    held = [r for r in rows if r.heldout]
    if held:
        ok = sum(all(r.ok.values()) for r in held)
        print(f"held out ({len(held)} logs labelled after the parser change): {ok}/{len(held)} fully right")
    failed = [k for k, t in TARGETS.items() if acc[k] < t]
    if acc["wrong_slug"]:
        failed.append("wrong_slug")
    if failed:
        print(
            "below target: "
            + ", ".join(
                f"{k} {acc[k]:.1%} < {TARGETS[k]:.0%}" if k in TARGETS else f"{k} {acc[k]:.0f}" for k in failed
            ),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

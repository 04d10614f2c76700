"""docs/sglang.md stays the source the code cites: every cited section exists, every crash cause and lint rule is in it."""

from __future__ import annotations

import re
from pathlib import Path

from console.sglang import lint_rules  # noqa: F401  (registers the SGLang rules into RULES)
from console.sglang.diagnose import CAUSES
from console.sglang.lint import RULES

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "sglang.md"
CITING = ("console", "tests", "benchmarks", "scripts")


def _sections(text: str) -> dict[str, str]:
    """{"2.2": body} for every numbered heading, a section's body running to the next heading of any level."""
    parts = re.split(r"^#{2,3} (\d+(?:\.\d+)?)\.? .*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def _citations() -> set[tuple[str, str]]:
    """(file:line, section) for each `docs/sglang.md §N` in the code, ranges (`§2.1-2.3`, `§2-§4`) by both ends."""
    out = set()
    for top in CITING:
        for path in (ROOT / top).rglob("*"):
            if path.suffix not in (".py", ".sh", "") or not path.is_file() or ".venv" in path.parts:
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if "docs/sglang.md" not in line:
                    continue
                for m in re.finditer(r"§(\d+(?:\.\d+)?)(?:-§?(\d+(?:\.\d+)?))?", line):
                    for sec in m.groups():
                        if sec:
                            out.add((f"{path.relative_to(ROOT)}:{n}", sec))
    return out


def test_every_cited_section_exists() -> None:
    sections = _sections(DOC.read_text())
    cited = _citations()
    assert len(cited) >= 20, cited  # the sim, the lint, the flags and their tests cite it
    missing = sorted((where, sec) for where, sec in cited if sec not in sections)
    assert not missing, f"cited sections docs/sglang.md does not have: {missing}"


def test_every_crash_cause_has_its_texts_in_section_8() -> None:
    body = _sections(DOC.read_text())["8"]
    assert not [c for c in CAUSES if f"`{c}`" not in body]


def test_every_lint_rule_has_the_behaviour_it_predicts_in_section_9() -> None:
    body = _sections(DOC.read_text())["9"]
    assert len(RULES) >= 10
    assert not [r for r in RULES if f"`{r}`" not in body]

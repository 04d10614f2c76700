"""What the journal keeps and shows of a command: digests for inline scripts, names, kinds, one line each (pure)."""

from __future__ import annotations

import asyncio

from console.fleet.journal import Journal, format_record, read_journal
from console.fleet.journalview import (
    LINE_MAX,
    command_name,
    compact,
    grouped_lines,
    one_line,
    operation,
    record_kind,
    select,
)
from console.transport.base import CommandResult

AGENT = "exec /venv/bin/python3 -I -S -u -c '\nimport os, re, sys\n" + "x = 1\n" * 100 + "' procs 1 60"
PREFIX = "PATH=/sim/bin:/usr/bin; export PATH; "


def test_an_inline_script_becomes_a_digest_and_the_rest_stays():
    c = compact(PREFIX + AGENT)
    assert "import os" not in c and c.startswith(PREFIX + "exec /venv/bin/python3 -I -S -u -c <script 103 lines, ")
    assert c.endswith(" procs 1 60") and "sha256 " in c
    assert (
        compact(PREFIX + "kill -TERM -- -42 2>/dev/null || kill -TERM 42") == PREFIX + "kill -TERM -- -42 "
        "2>/dev/null || kill -TERM 42"
    )
    assert compact("echo 'short quoted'") == "echo 'short quoted'"


def test_command_names():
    assert command_name(PREFIX + AGENT) == "python3 -c"
    assert command_name(PREFIX + "exec nvidia-smi --query-gpu=index -lms 500") == "nvidia-smi"
    assert command_name(PREFIX + "mkdir -p /a && cat > /a/m") == "mkdir"
    assert command_name("") == "sh"


def test_one_line_per_command_however_long():
    assert one_line("a\n  b\n\nc") == "a ⏎ b ⏎ c"
    long = "\n".join(f"line {i} " + "x" * 50 for i in range(100))
    out = one_line(long)
    assert "\n" not in out and len(out) < LINE_MAX + 100 and "[100 lines, " in out


def test_an_operation_groups_its_steps_and_kinds_split_actions_from_polling(tmp_path):
    j = Journal(tmp_path / "j.jsonl")
    j.stream(CommandResult("h", PREFIX + AGENT, None, "", "", 5.0))  # polling: a stream ended

    async def launch() -> None:
        with operation("launch small"):
            j.command(CommandResult("h", PREFIX + "setsid nohup python -m sglang.launch_server", 0, "1\n", "", 0.1))
            await asyncio.sleep(0)
            j.event("launch", server="small@h:gpu0", message="pid 1")

    asyncio.run(launch())
    j.event("seen", server="other@h:gpu1", host="h")  # re-attach while watching
    j.event("gone", server="small@h:gpu0")  # a crash seen by the process loop: an action record
    recs = list(read_journal(tmp_path / "j.jsonl"))
    assert [record_kind(r) for r in recs] == ["polling", "actions", "actions", "polling", "actions"]
    assert recs[0]["name"] == "python3 -c" and "import os" not in recs[0]["command"]
    assert recs[1]["op"] == recs[2]["op"] and recs[1]["op_name"] == "launch small"
    lines = grouped_lines(select(recs, "actions"), format_record)
    assert len(lines) == 4 and "── launch small [op " in lines[0]
    assert lines[1].startswith("    ") and "setsid nohup" in lines[1] and lines[2].startswith("    ")
    assert not lines[3].startswith(" ") and "gone" in lines[3]
    assert select(recs, "all", host="h") == recs and select(recs, "all", host="nosuch") == []

"""Pure parsers of the remote loops: tail frames, process-loop frames, ps, discovery, pre-check facts, masking."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

from hypothesis import given
from hypothesis import strategies as st

from console.fleet import discovery, journal
from console.fleet.events import ProcInfo, ServerMeta
from console.fleet.logtail import Chunk, FrameReader, Truncated, tail_command
from console.fleet.monitor import ProcFrameParser, external_meta, parse_ps, sglang_mains
from console.fleet.prechecks import parse_facts
from console.sglang.launchscript import GATE, GATE_NAME


@given(st.lists(st.binary(max_size=40), max_size=6), st.integers(1, 7))
def test_frames_survive_any_split(chunks, step):
    wire = b"".join(f"==> {i} {i * 100} {len(c)}\n".encode() + c for i, c in enumerate(chunks)) + b"==> hb\n"
    r = FrameReader()
    out = []
    for k in range(0, len(wire), step):
        out += r.feed(wire[k : k + step])
    assert [x for x in out if isinstance(x, Chunk)] == [Chunk(i, i * 100, c) for i, c in enumerate(chunks) if c]
    assert out[-1] == "hb"


def test_truncation_frame():
    assert FrameReader().feed(b"==> 2 T 10\n") == [Truncated(2, 10)]


def test_tail_script_resumes_at_offsets(tmp_path):
    a = tmp_path / "a b'$(x).log"
    a.write_bytes(b"0123456789")
    p = subprocess.Popen(tail_command([(str(a), 4)]), shell=True, stdout=subprocess.PIPE)
    try:
        data = p.stdout.read(len(b"==> 0 4 6\n456789"))
    finally:
        p.kill()
        p.wait()
    assert FrameReader().feed(data) == [Chunk(0, 4, b"456789")]


def test_proc_frames():
    text = (
        b"==> ps 1700000000.25\n  100     1   100 python -m sglang.launch_server --port 30000\n"
        b"  101   100   100 sglang::scheduler_TP0\n==> apps\n101, GPU-a, python, 3000\n==> rc 0\n==> end\n"
        b"==> ps 1700000001\n==> end\n==> ps 1700000002\n==> apps\nsh: nvidia-smi: not found\n==> rc 127\n==> end\n"
    )
    p = ProcFrameParser()
    f1, f2, f3 = p.feed(text[:50]) + p.feed(text[50:])
    assert [x.pid for x in f1.procs] == [100, 101] and f1.apps[0].used_mib == 3000 and f1.remote_time == 1700000000.25
    assert f2.procs == [] and f2.apps is None
    assert f3.apps is None and "not found" in f3.apps_error


def test_external_servers_from_ps():
    procs = parse_ps(
        "  50 1 50 /v/bin/python3 -m sglang.launch_server --model-path /m --port 31000 --api-key sk-1234\n"
        "  51 50 50 /v/bin/python3 -m sglang.launch_server --model-path /m --port 31000\n"
        "  60 1 60 awk /sglang[.]launch_server/\n"
    )
    (main,) = sglang_mains(procs)
    m = external_meta("h", main, (2,))
    assert (m.name, m.port, m.managed, m.gpus, m.sid) == ("external@h:31000", 31000, False, (2,), 50)
    assert "sk-1234" not in " ".join(m.argv)


def test_a_shell_naming_sglang_in_its_script_is_not_the_server():
    """Shells whose `-c` script names SGLang run none of it: the console's launch script (alive while it writes
    meta.json), the user's `ssh host 'nohup python -m sglang.launch_server &'`. A wrapper shell that stays leaves
    its child, the interpreter, as the main process."""
    procs = parse_ps(
        "  10 9 10 bash -c # dflash-console: launch r@h:gpu0?d=/x; setsid nohup sh -c 'd=$1' dflash-launch \"$d\" "
        "L 100 /v/bin/python -m sglang.launch_server --port 30840 > /l 2>&1 &\n"
        "  20 19 20 /bin/bash -lc nohup /v/bin/python -m sglang.launch_server --port 30001 &\n"
        "  30 1 30 /usr/bin/nohup bash -c /v/bin/python3 -m sglang.launch_server --port 30002 | tee /l\n"
        "  31 30 30 /v/bin/python3 -m sglang.launch_server --port 30002\n"
        "  32 31 30 sglang::scheduler_TP0\n"
        "  40 1 40 /v/bin/sglang serve --model-path /m --port 30003\n"
        "  50 1 50 /v/bin/python3 -u -m sglang.launch_server --port 30004\n"
    )
    assert [(p.pid, external_meta("h", p, ()).port) for p in sglang_mains(procs)] == [
        (31, 30002),
        (40, 30003),
        (50, 30004),
    ]


def test_a_launch_gate_is_not_a_server_until_it_opens(tmp_path):
    """A gate waiting for meta.json carries the server's argv but runs nothing: sampled then, it is no server (it was
    once taken for an external one, and a launch whose meta.json could not be written showed one). Once meta.json
    names it, the same pid execs the command and is the server."""
    stand_in = [sys.executable, "-c", "import time; time.sleep(30)", "-m", "sglang.launch_server", "--port", "30840"]
    gate = shlex.join(["sh", "-c", GATE, GATE_NAME, str(tmp_path), "L1", "100", *stand_in])
    pid = subprocess.run(
        ["sh", "-c", f"setsid nohup {gate} >/dev/null 2>&1 </dev/null & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()

    def sample() -> list[ProcInfo]:
        out = subprocess.run(["ps", "-ww", "-o", "pid=,ppid=,sid=,args=", "-p", pid], capture_output=True, text=True)
        return parse_ps(out.stdout)

    try:
        deadline = time.monotonic() + 30
        while True:  # `setsid` and `nohup` exec the gate in turn; each stage is sampled, none is a server
            (waiting,) = sample()
            assert "sglang.launch_server" in waiting.args and sglang_mains([waiting]) == [], waiting.args
            if waiting.args.startswith("sh -c ") or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert waiting.args.startswith("sh -c "), waiting.args
        (tmp_path / "meta.json").write_text(f'{{"pid": {pid}, "sid": {pid}, "launch_id": "L1"}}\n')
        deadline = time.monotonic() + 30
        while (procs := sample()) and procs[0].args.startswith("sh -c ") and time.monotonic() < deadline:
            time.sleep(0.05)
        (main,) = sglang_mains(procs)
        assert main.pid == int(pid) and main.args.startswith(f"{sys.executable} -c import time")
    finally:
        subprocess.run(["kill", "-KILL", pid], capture_output=True)


def test_discovery_roundtrip_and_liveness():
    m = ServerMeta(
        name="p@h:gpu0", host="h", gpus=(0,), port=1, preset="p", pid=7, sid=7, log_path="/l", launch_id="7-1"
    )
    listing = discovery.meta_to_json(m) + "\nnot json\n==> ps\n 7 1 7 python -m sglang.launch_server\n"
    (back,), procs = discovery.parse_listing(listing, "h")
    assert back == m and discovery.is_alive(back, procs)
    assert not discovery.is_alive(back, [ProcInfo(7, 1, 7, "bash")])  # a recycled pid is not the server
    assert discovery.safe_name("q@host:gpu0-1") == "q@host_gpu0-1"


def test_precheck_facts():
    text = (
        "==> gpus\n0, GPU-a, 5, 49140\n1, GPU-b, 3000, 49140\n==> apps\n77, GPU-b, python3, 2900\n==> ps\n 77 1 77 python3 x\n"
        '==> ports\nLISTEN 0 4096 0.0.0.0:30000 0.0.0.0:* users:(("python3",pid=77,fd=5))\n'
        'LISTEN 0 128 [::]:22 [::]:*\n==> model\npresent\n{"model_type": "qwen3"}\n'
        "==> disk\ndfcfull 256 256 0 100% /srv/logs\n==> metas\n==> end\n"
    )
    f = parse_facts(text, "h")
    assert [(g.index, g.uuid, g.memory_used_mib, g.memory_total_mib) for g in f.gpus] == [
        (0, "GPU-a", 5, 49140),
        (1, "GPU-b", 3000, 49140),
    ]
    assert f.apps[0].pid == 77
    assert f.listen == {30000: 77, 22: None} and f.model_present and f.model_config == {"model_type": "qwen3"}
    assert (f.log_free_kib, f.log_mount) == (0, "/srv/logs")


def test_masking_everywhere():
    journal.remember_secrets(["python", "--api-key", "sk-remembered"], {"HF_TOKEN": "hf_abcdef"})
    cmd = shlex.join(
        [
            "env",
            "HF_TOKEN=hf_abcdef",
            "MY_SECRET=a b",
            "CUDA_VISIBLE_DEVICES=0",
            "python",
            "--api-key",
            "sk-remembered",
            "--admin-api-key=zz top",
            "--port",
            "1",
        ]
    )
    out = journal.mask(cmd)
    for secret in ("hf_abcdef", "sk-remembered", "a b", "zz top"):
        assert secret not in out
    assert "CUDA_VISIBLE_DEVICES=0" in out and "--port 1" in out
    assert journal.mask("echo sk-remembered") == "echo ***"
    assert journal.mask_argv(["--api-key", "k1234", "--x", "1"]) == ["--api-key", "***", "--x", "1"]
    assert journal.mask_env({"OPENAI_API_KEY": "x", "A": "b"}) == {"OPENAI_API_KEY": "***", "A": "b"}


def test_journal_file(tmp_path):
    j = journal.Journal(tmp_path / "j.jsonl")
    j.event("launch", server="s", message="--api-key sk-9999 ok")
    (rec,) = list(journal.read_journal(tmp_path / "j.jsonl"))
    assert rec["message"] == "--api-key *** ok" and "launch" in journal.format_record(rec)


def test_backoff_is_jittered_exponential_and_capped_at_10s():
    from console.fleet.hostlink import backoff_delay

    firsts = [backoff_delay(1) for _ in range(50)]
    assert all(0.375 <= d <= 0.625 for d in firsts) and len(set(firsts)) > 1
    assert all(backoff_delay(n) <= 10.0 for n in range(1, 40))
    assert min(backoff_delay(4) for _ in range(50)) >= 3.0

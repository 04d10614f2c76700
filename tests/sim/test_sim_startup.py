"""Sim SGLang startup vs docs/sglang.md §1.2: prefixes, phase order, tqdm bars, VRAM per phase, ranks as processes."""

from __future__ import annotations

import re
import subprocess
import threading
import time

import httpx

from tests.patience import patient

from .conftest import launch, smi

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
# docs/sglang.md §1.2 rows in order (the TP0 copy of each per-rank line), with the draft phases of row 17.
ORDER_SPEC = [
    r"sglang/launch_server\.py:54: UserWarning: 'python -m sglang\.launch_server' is still supported, but 'sglang serve' "
    r"is the recommended entrypoint\.\n  Example: sglang serve --model-path <model> \[options\]",
    rf"^\[{TS}\] Attention backend not specified\. Use \w+ backend by default\.$",
    rf"^\[{TS}\] server_args=ServerArgs\(model_path='[^']+', ",
    rf"^\[{TS} TP0\] Init torch distributed begin\.$",
    rf"^\[{TS} TP0\] Init torch distributed ends\. elapsed=\d+\.\d\d s, mem usage=\d+\.\d\d GB$",
    rf"^\[{TS} TP0\] Load weight begin\. avail mem=\d+\.\d\d GB$",
    r"\rMulti-thread loading shards:   0% Completed \| 0/15 \[00:00<\?, \?it/s\]",
    r"\rMulti-thread loading shards: 100% Completed \| 15/15 \[\d\d:\d\d<00:00, +\d+\.\d\d(it/s|s/it)\]\n",
    rf"^\[{TS} TP0\] Load weight end\. elapsed=\d+\.\d\d s, type=Qwen3_5ForConditionalGeneration, avail mem=\d+\.\d\d GB, "
    r"mem usage=25\.9\d GB\.$",
    rf"^\[{TS} TP0\] Using KV cache dtype: torch\.bfloat16$",
    rf"^\[{TS} TP0\] KV Cache is allocated\. #tokens: \d+, K size: \d+\.\d\d GB, V size: \d+\.\d\d GB$",
    rf"^\[{TS} TP0\] Mamba Cache is allocated\. max_mamba_cache_size: \d+, conv_state size: \d+\.\d\dGB, ssm_state size: "
    r"\d+\.\d\dGB intermediate_ssm_state_cache size: \d+\.\d\dGB intermediate_conv_window_cache size: \d+\.\d\dGB $",
    rf"^\[{TS} TP0\] Memory pool end\. avail mem=\d+\.\d\d GB$",
    rf"^\[{TS} TP0\] Capture cuda graph begin\. This can take up to several minutes\. avail mem=\d+\.\d\d GB$",
    rf"^\[{TS} TP0\] Capture cuda graph bs \[1, 2, 3, 4, 5, 6, 7, 8, 10, 12,[\d, ]+\]$",
    r"\rCapturing batches \(bs=32 avail_mem=\d+\.\d\d GB\):   0%\|          \| 0/20 \[00:00<\?, \?it/s\]",
    r"\| 20/20 \[\d\d:\d\d<00:00, +\d+\.\d\d(it/s|s/it)\]\n",
    rf"^\[{TS} TP0\] Capture cuda graph end\. Time elapsed: \d+\.\d\d s\. mem usage=\d+\.\d\d GB\. avail mem=\d+\.\d\d GB\.$",
    rf"^\[{TS} TP0\] Load weight begin\. avail mem=",
    rf"^\[{TS} TP0\] Capture draft cuda graph begin\. This can take up to several minutes\. avail mem=\d+\.\d\d GB$",
    rf"^\[{TS} TP0\] Capture draft cuda graph end\. Time elapsed: \d+\.\d\d s\. mem usage=\d+\.\d\d GB\. avail mem=",
    rf"^\[{TS} TP0\] max_total_num_tokens=\d+, chunked_prefill_size=4096, max_prefill_tokens=16384, "
    r"max_running_requests=48, context_len=262144, available_gpu_mem=\d+\.\d\d GB$",
    rf"^\[{TS}\] INFO:     Started server process \[\d+\]$",
    rf"^\[{TS}\] INFO:     Waiting for application startup\.$",
    rf"^\[{TS}\] INFO:     Application startup complete\.$",
    rf"^\[{TS}\] INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)$",
    rf'^\[{TS}\] INFO:     127\.0\.0\.1:\d+ - "GET /model_info HTTP/1\.1" 200 OK$',
    rf"^\[{TS} TP0\] Prefill batch, #new-seq: 1, #new-token: \d+, #cached-token: 0, full token usage: 0\.00, mamba usage: "
    r"\d\.\d\d, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: (True|False), input throughput \(token/s\): "
    r"\d+\.\d\d$",
    rf'^\[{TS}\] INFO:     127\.0\.0\.1:\d+ - "POST /generate HTTP/1\.1" 200 OK$',
    rf"^\[{TS}\] The server is fired up and ready to roll!$",
]


def _in_order(text: str, patterns: list[str]) -> None:
    pos = 0
    for p in patterns:
        m = re.compile(p, re.M).search(text, pos)
        assert m, f"{p!r} not found after offset {pos}:\n{text[pos : pos + 1500]}"
        pos = m.end()


def test_tp2_speculative_startup_sequence_and_vram(sim) -> None:
    root, hosts = sim
    host = root / "ct129"
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            out = smi(host, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0").stdout.strip()
            if out.isdigit():
                seen.append(int(out))
            time.sleep(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    # slow enough to sample VRAM growth, on a busy machine too (each sample is an nvidia-smi process)
    s = launch(hosts, "qwen36-mtp", env={"DFLASH_SIM_TIME_SCALE": f"{patient(0.06):g}"})
    try:
        s.wait(r"fired up and ready to roll", 30)
    finally:
        stop.set()
        t.join()
    text = s.text()
    _in_order(text, ORDER_SPEC)
    for r in (0, 1):  # every TP rank logs its own per-rank lines
        for phrase in (
            "Init torch distributed begin.",
            "Load weight end.",
            "KV Cache is allocated.",
            "Memory pool end.",
            "Capture cuda graph end.",
            "Capture draft cuda graph end.",
        ):
            assert re.search(rf"^\[{TS} TP{r}\] {re.escape(phrase)}", text, re.M), (r, phrase)
    assert not re.search(rf"^\[{TS} TP1\] (max_total_num_tokens|Capture cuda graph bs)", text, re.M)  # rank0 only
    assert "\r" in text and text.count("Multi-thread loading shards:") >= 16
    # VRAM grew phase by phase (several distinct values on the way up) and stays held.
    distinct = sorted(set(seen))
    assert len(distinct) >= 5 and distinct[-1] > 30000, distinct
    # One compute-apps row per TP rank, attributable to the server's session.
    apps = smi(host, "--query-compute-apps=pid,gpu_uuid,process_name,used_memory", "--format=csv,noheader").stdout
    pids = [int(ln.split(", ")[0]) for ln in apps.splitlines()]
    assert sorted(ln.split(", ")[2] for ln in apps.splitlines()) == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
    ps = subprocess.run(
        ["ps", "-ww", "-o", "pid=,ppid=,sid=,args=", "-p", ",".join(map(str, [s.pid, *pids]))],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    rows = {int(r.split()[0]): r.split() for r in ps if r.strip()}
    assert {rows[p][2] for p in rows} == {str(s.pid)}  # one session, led by the launched server
    assert all(rows[p][1] == str(s.pid) and rows[p][3].startswith("sglang::scheduler_TP") for p in pids)
    assert "-m sglang.launch_server --model-path" in " ".join(rows[s.pid][3:])
    r = httpx.get(f"{s.url}/health", timeout=5)
    assert r.status_code == 200 and r.content == b""
    info = httpx.get(f"{s.url}/server_info", timeout=5).json()
    assert info["version"] == "0.5.11" and info["internal_states"][0]["avg_spec_accept_length"] > 1
    assert httpx.get(f"{s.url}/metrics", timeout=5).status_code == 404  # no --enable-metrics
    assert httpx.get(f"{s.url}/get_model_info", timeout=5).json()["architectures"] == [
        "Qwen3_5ForConditionalGeneration"
    ]
    s.wait(
        r"Endpoint '/get_model_info' is deprecated and will be removed in a future version\. Please use '/model_info' "
        r"instead\."
    )


def test_tp1_has_no_rank_prefix_and_health_503_until_warmup(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-bench", env={"DFLASH_SIM_TIME_SCALE": "0.02"})
    s.wait(r"Uvicorn running on http://0\.0\.0\.0:\d+ ", 30)
    codes = set()
    end = time.monotonic() + 10
    while time.monotonic() < end and 200 not in codes:
        try:
            codes.add(httpx.get(f"{s.url}/health", timeout=2).status_code)
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    s.wait("fired up")
    assert 200 in codes
    text = s.text()
    assert not re.search(r"^\[[^\]]* TP\d\]", text, re.M)
    assert re.search(
        rf"^\[{TS}\] Load weight end\. elapsed=\d+\.\d\d s, type=Qwen3_5ForConditionalGeneration, avail mem="
        r"\d+\.\d\d GB, mem usage=51\.8\d GB\.$",
        text,
        re.M,
    )
    assert re.search(rf"^\[{TS}\] Capture cuda graph bs \[1, 2, 4, 8, 12, 16, 24, ", text, re.M)


def test_sglang_0523_wording(tmp_path) -> None:
    from console.sim.fleet import sim_down, sim_up
    from console.sim.spec import BLACKWELL_SPEC

    root = tmp_path / "v23"
    hosts = sim_up(
        root, hosts=["blackwell"], time_scale=0.04, specs={"blackwell": BLACKWELL_SPEC.with_(sglang_version="0.5.23")}
    )
    try:
        bad = launch(hosts, "qwen36-bench")  # --mamba-scheduler-strategy is gone in 0.5.23
        bad.wait_gone()
        assert "sglang serve: error: unrecognized arguments: --mamba-scheduler-strategy extra_buffer" in bad.text()
        s = launch(
            hosts,
            "qwen36-bench",
            drop=("--mamba-scheduler-strategy",),
            args=["--mamba-radix-cache-strategy", "extra_buffer"],
        )
        s.wait("fired up", 30)
        text = s.text()
        assert "launch_server.py:71: UserWarning:" in text
        assert re.search(rf"^\[{TS}\] server_args=\{{'model_path': '", text, re.M)
        assert re.search(
            rf"^\[{TS}\] KV Cache is allocated\. dtype: torch\.bfloat16, #tokens: \d+, K size: ", text, re.M
        )
        assert re.search(
            rf"^\[{TS}\] Capture target decode CUDA graph begin\. backend=\w+, num_tokens_per_req=1, avail "
            r"mem=\d+\.\d\d GB$",
            text,
            re.M,
        )
        assert re.search(
            rf"^\[{TS}\] Capture target decode CUDA graph end\. bs=\[1, 2, 4, [\d, ]+\], elapsed=\d+\.\d\d s, "
            r"mem usage=\d+\.\d\d GB, avail mem=\d+\.\d\d GB\.$",
            text,
            re.M,
        )
        assert httpx.get(f"{s.url}/ready", timeout=5).status_code == 200
        assert httpx.get(f"{s.url}/server_info", timeout=5).json()["frontend"] == "python"
    finally:
        sim_down(root)

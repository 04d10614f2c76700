"""Sim SGLang failure modes (docs/sglang.md §5.3, §6), each launched by plan_launch's /bin/sh command, log read back."""

from __future__ import annotations

import re
import socket

import httpx

from console.sim.control import hold_vram, inject
from console.sim.hostdir import set_faults
from console.sim.memory import CAPTURE_FAILED_MSG
from tests.fixtures.slowdown import SlowdownMeter

from .conftest import SAMPLES, launch, smi

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
SIGQUIT_LAUNCH = rf"^\[{TS}\] Received sigquit from a child process\. It usually means the child failed\.$"


def _last_line(text: str) -> str:
    return text.rstrip().splitlines()[-1]


def test_hybrid_speculative_without_extra_buffer(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", drop=("--mamba-scheduler-strategy",))
    s.wait_gone()
    real = (SAMPLES / "sglang-logs/12-crash-spec-args-valueerror-qwen35-moe-mamba-no-buffer.log").read_text().strip()
    assert _last_line(s.text()) == real.replace("Qwen3_5Moe", "Qwen3_5")
    assert "Traceback (most recent call last):" in s.text() and "Init torch distributed" not in s.text()


def test_topk_without_num_steps_bare_assertion(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", drop=("--speculative-num-steps",))
    s.wait_gone()
    assert _last_line(s.text()) == "AssertionError"


def test_host_lacking_libavutil(sim) -> None:
    root, hosts = sim
    set_faults(root / "ct129", ["lacks-libavutil"])
    s = launch(hosts, "qwen36-mtp")
    s.wait_gone()
    text = s.text()
    assert _last_line(text) == "OSError: libavutil.so.58: cannot open shared object file: No such file or directory"
    assert re.search(r'File ".*/torchcodec/_core/ops\.py", line \d+, in load_torchcodec_shared_libraries', text)


def test_model_path_missing(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", model="/nonexistent/Qwen3.6-27B")
    s.wait_gone()
    assert _last_line(s.text()) == (
        "OSError: Incorrect path_or_model_id: '/nonexistent/Qwen3.6-27B'. Please provide either "
        "the path to a local folder or the repo_id of a model on the Hub."
    )


def test_kv_pool_not_fitting(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", args=["--mem-fraction-static", "0.5"])
    s.wait_gone()
    text = s.text()
    assert re.search(rf"^\[{TS} TP[01]\] Scheduler hit an exception: Traceback \(most recent call last\):$", text, re.M)
    assert re.search(r"^RuntimeError: Not enough memory\. Please try to increase --mem-fraction-static\.$", text, re.M)
    assert re.search(SIGQUIT_LAUNCH, text, re.M)
    assert "KV Cache is allocated" not in text
    assert smi(_root / "ct129", "--query-gpu=memory.used", "--format=csv,noheader").stdout == "0 MiB\n0 MiB\n"


def test_oom_in_cuda_graph_capture(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", args=["--mem-fraction-static", "0.999"])
    s.wait_gone()
    text = s.text()
    assert re.search(
        r"^Exception: Capture cuda graph failed: CUDA out of memory\. Tried to allocate [\d.]+ MiB\. GPU \d has "
        r"a total capacity of 47\.99 GiB of which [\d.]+ MiB is free\.",
        text,
        re.M,
    )
    assert CAPTURE_FAILED_MSG in text and "Capture cuda graph begin." in text
    assert re.search(SIGQUIT_LAUNCH, text, re.M)


def test_weights_not_fitting_one_gpu(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-mtp", update={"gpus": [0], "tp": 1})  # 27B bf16 on one 48 GB A6000
    s.wait_gone()
    assert "tp_size=1," in s.text()
    assert re.search(
        r"^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate [\d.]+ GiB\. GPU 0 has a total "
        r"capacity of 47\.99 GiB",
        s.text(),
        re.M,
    )


def test_other_process_holding_vram_unbalances_tp(sim) -> None:
    root, hosts = sim
    hog = hold_vram(root / "ct129", 1, 20000)
    try:
        s = launch(hosts, "qwen36-mtp")
        s.wait_gone()
    finally:
        hog.kill()
        hog.wait()
    text = s.text()
    assert re.search(
        r"^RuntimeError: The memory capacity is unbalanced\. Some GPUs may be occupied by other processes\. "
        r"pre_model_load_memory=[\d.]+, local_gpu_memory=[\d.]+, local_gpu_memory \* 0\.9=[\d.]+$",
        text,
        re.M,
    )
    assert re.search(rf"^\[{TS} TP0\] Scheduler hit an exception", text, re.M)  # the rank that is not occupied


def test_port_taken_fails_after_loading(sim) -> None:
    _root, hosts = sim
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        s = launch(hosts, "qwen36-mtp", port=port)
        s.wait_gone(20)
    text = s.text()
    order = [
        r"Capture cuda graph end",
        r"INFO:     Application startup complete\.",
        rf"ERROR:    \[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', {port}\): address "
        r"already in use",
        r"INFO:     Waiting for application shutdown\.",
    ]
    pos = 0
    for p in order:
        m = re.compile(p).search(text, pos)
        assert m, (p, text[pos:])
        pos = m.end()
    assert "Uvicorn running on" not in text


def test_sigterm_drains_then_exits(sim) -> None:
    _root, hosts = sim
    s = launch(hosts, "qwen36-bench", env={"DFLASH_SIM_TOKEN_RATE": "300"})
    s.wait("fired up", 30)
    import os
    import signal
    import threading

    t = threading.Thread(
        target=lambda: httpx.post(
            f"{s.url}/generate",
            timeout=30,
            json={"text": "hi", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}},
        ),
        daemon=True,
    )
    t.start()
    s.wait(r"Prefill batch, #new-seq: 1, #new-token: 1,")
    os.killpg(s.pid, signal.SIGTERM)  # what the console does: SIGTERM to the server's session
    s.wait(
        rf"^\[{TS}\] SIGTERM received\. signum=15 frame=<frame at 0x[0-9a-f]+, .*>\. Draining requests and shutting "
        r"down\.\.\.$"
    )
    s.wait(
        rf"^\[{TS}\] Gracefully exiting\.\.\. Remaining number of requests 1\. Remaining requests "
        r"remaining_rids=\['[0-9a-f]{32}'\]\.$"
    )
    s.wait_gone(20)
    assert smi(_root / "blackwell", "--query-compute-apps=pid", "--format=csv,noheader").stdout == ""


def test_injected_crashes_at_runtime_and_during_load(sim) -> None:
    root, hosts = sim
    s = launch(hosts, "qwen36-bench")
    s.wait("fired up", 30)
    inject(root / "blackwell", s.port, "crash", kind="cuda-assert")
    s.wait_gone()
    text = s.text()
    assert re.search(rf"^\[{TS}\] Scheduler hit an exception: Traceback", text, re.M)
    assert "torch.AcceleratorError: CUDA error: device-side assert triggered" in text
    assert re.search(
        rf"^\[{TS}\] SIGQUIT received\. signum=\d+, frame=.*\. It usually means one child failed\.$", text, re.M
    )
    # Crash during weight loading: the command waits for the phase.
    port2 = s.port + 1 if s.port < 65000 else s.port - 1
    inject(root / "ct129", port2, "crash", kind="nccl", phase="weights")
    s2 = launch(hosts, "qwen36-mtp", port=port2)
    s2.wait_gone()
    t2 = s2.text()
    assert "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)" in t2
    assert re.search(SIGQUIT_LAUNCH, t2, re.M) and "Load weight end" not in t2


def test_sigkill_like_death_frees_gpus(sim) -> None:
    root, hosts = sim
    s = launch(hosts, "qwen36-bench")
    s.wait("fired up", 30)
    assert smi(root / "blackwell", "--query-compute-apps=pid", "--format=csv,noheader").stdout.strip()
    inject(root / "blackwell", s.port, "crash", kind="sigkill")
    s.wait_gone()
    import time

    for _ in range(100):
        if smi(root / "blackwell", "--query-compute-apps=pid", "--format=csv,noheader").stdout == "":
            break
        time.sleep(0.05)
    assert smi(root / "blackwell", "--query-compute-apps=pid", "--format=csv,noheader").stdout == ""
    tail = s.text().split("fired up and ready to roll!", 1)[1]
    assert not re.search(r"sigquit|SIGQUIT|SIGTERM|Traceback|Gracefully", tail), tail  # abrupt: no last words


def test_sigterm_during_loading_kills_the_tree(sim) -> None:
    import os
    import signal
    import time

    root, hosts = sim
    s = launch(hosts, "qwen36-mtp", env={"DFLASH_SIM_TIME_SCALE": "0.5"})
    s.wait(r"TP\d\] Load weight begin", 20)
    os.killpg(s.pid, signal.SIGTERM)
    s.wait_gone(5)
    assert "SIGTERM received" not in s.text()  # before the tokenizer loop: default handling
    for _ in range(100):
        if smi(root / "ct129", "--query-compute-apps=pid", "--format=csv,noheader").stdout == "":
            break
        time.sleep(0.05)
    assert smi(root / "ct129", "--query-compute-apps=pid", "--format=csv,noheader").stdout == ""


def test_control_changes_token_rate(sim) -> None:
    import time

    root, hosts = sim
    s = launch(hosts, "qwen36-bench", env={"DFLASH_SIM_TOKEN_RATE": "1000"})
    s.wait("fired up", 30)
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}}
    inject(root / "blackwell", s.port, "rate", tok_s="inf")
    time.sleep(0.3)
    with SlowdownMeter() as meter:  # the machine's slowness over the same request scales the bound
        t0 = time.monotonic()
        assert httpx.post(f"{s.url}/generate", json=body, timeout=30).json()["meta_info"]["completion_tokens"] == 400
        took = time.monotonic() - t0
    assert took < 2 * meter.result.worst  # 400 tokens at 1000 tok/s/GPU would take 400 * 17 / 1000 = 6.8 s
    inject(root / "blackwell", s.port, "rate", tok_s=1000)
    inject(root / "blackwell", s.pid, "slow", factor=4.0)  # by pid works too
    time.sleep(0.3)
    t0 = time.monotonic()
    httpx.post(
        f"{s.url}/generate",
        json={"text": "hi", "sampling_params": {"max_new_tokens": 10, "ignore_eos": True}},
        timeout=30,
    )
    assert time.monotonic() - t0 > 10 * (1 + 16) / (1000 / 4) * 0.8  # per-request rate P/(C+H), slowed 4x

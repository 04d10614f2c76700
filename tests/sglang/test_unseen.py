"""Issue 12's failure classes, one regression test per class, in SGLang's and torch's exact wordings."""

from __future__ import annotations

import pytest

from console.sglang.diagnose import diagnose_text
from console.sglang.logparse import parse_text

from .synth import startup

TB = (
    "[2026-01-01 10:04:59 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/venv/sglang/srt/managers/scheduler.py", line 3100, in run_scheduler_process\n'
    "    scheduler = Scheduler(\n"
    '  File "/venv/sglang/srt/model_executor/model_runner.py", line 400, in init_memory_pool\n'
    "    raise RuntimeError(\n"
)
NOT_ENOUGH = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


@pytest.mark.parametrize("end", ["", "\n", "\r\n"])
def test_1_a_traceback_that_ends_the_log_is_closed(end: str) -> None:
    s, d = diagnose_text(startup(1, until="kv_cache") + TB + NOT_ENOUGH + end)
    assert s.crashed and d is not None and d.cause == "cuda_oom_kv_cache" and d.error_line == NOT_ENOUGH


@pytest.mark.parametrize(
    "text",
    [
        "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: an illegal memory access was encountered\n"
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):\n",
        "Fatal Python error: Segmentation fault\n\nThread 0x00007f (most recent call first):\n"
        '  File "/venv/sglang/srt/managers/scheduler.py", line 1419 in watchdog_thread\n',
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 "
        "milliseconds before timing out.\n",
        "[2026-01-01 10:05:00] Rank 1 scheduler is dead. Please check if there are relevant logs.\n",
        "[2026-01-01 10:05:00] Exit code: -9\n",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in /venv/torch/lib/libc10.so)\n",
    ],
)
def test_2_process_aborts_are_crashes(text: str) -> None:
    s, d = diagnose_text(startup(2, until="cuda_graph") + text)
    assert s.crashed and d is not None


def test_2_c10_frames_inside_a_python_traceback_are_its_message_not_an_abort() -> None:
    """While serving, a handled torch error that quotes `Exception raised from` is one traceback, not a crash."""
    text = (
        startup(1) + "[2026-01-01 10:06:00] Error in request: Traceback (most recent call last):\n"
        '  File "/venv/sglang/srt/entrypoints/http_server.py", line 1, in generate\n'
        "RuntimeError: shape mismatch\nException raised from check at ../aten/src/ATen/native/x.cpp:1 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in /venv/torch/lib/libc10.so)\n"
        "[2026-01-01 10:06:01] Decode batch, #running-req: 1, #token: 9, token usage: 0.00, gen throughput (token/s): 50.00, "
        "#queue-req: 0\n"
    )
    s, d = diagnose_text(text)
    assert not s.crashed and d is None and s.phase.value == "serving"


def test_2_the_what_text_is_classified() -> None:
    text = (
        "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error: an illegal memory access "
        "was encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    _, d = diagnose_text(startup(1) + text)
    assert d is not None and d.cause == "cuda_device_assert" and "illegal memory access" in d.error_line
    _, d9 = diagnose_text(startup(2, until="loading_weights") + "[2026-01-01 10:05:00] Exit code: -9\n")
    assert d9 is not None and d9.cause == "killed_oom_killer"


@pytest.mark.parametrize(
    "marker",
    [
        "[10:04:59 TP0] Exception in run_tp_server:",
        "[10:04:59] Exception in ControllerSingle:",
        "[gpu_id=0] Exception in ModelTpServer:",
    ],
)
def test_3_old_markers_are_crashes(marker: str) -> None:
    """After start-up a traceback alone is no proof of death; the old crash record is."""
    text = startup(1) + (
        f'{marker}\nTraceback (most recent call last):\n  File "/venv/sglang/srt/managers/tp_worker.py", line 1, in x\n'
        "RuntimeError: NCCL error: unhandled system error\n"
    )
    assert not parse_text(text.replace(marker + "\n", "")).crashed
    s, d = diagnose_text(text)
    assert s.crashed and d is not None and d.cause == "nccl_error"


def test_3_a_per_request_error_while_serving_is_not_a_crash() -> None:
    bad = (
        "[2026-01-01 10:06:00] Error in request: Traceback (most recent call last):\n"
        '  File "/venv/sglang/srt/entrypoints/openai/serving_chat.py", line 120, in handle_request\n'
        "ValueError: Requested token count exceeds the model's maximum context length of 4096 tokens.\n"
        '[2026-01-01 10:06:00] INFO:     127.0.0.1:4000 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request\n'
        "[2026-01-01 10:06:01] Decode batch, #running-req: 3, #token: 900, token usage: 0.01, cuda graph: True, "
        "gen throughput (token/s): 310.50, #queue-req: 0\n"
    )
    s, d = diagnose_text(startup(1) + bad)
    assert not s.crashed and d is None and s.phase.value == "serving" and s.stats.gen_throughput == 310.5


def test_4_an_assert_printed_before_the_crash_decides() -> None:
    asserts = "".join(
        f"../aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [40,0,0], thread: [{t},0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.\n"
        for t in range(3)
    )
    cut = (
        "[2026-01-01 10:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/venv/sglang/srt/managers/scheduler.py", line 1, in event_loop_overlap\n'
    )
    _, d = diagnose_text(startup(1) + asserts + cut)
    assert d is not None and d.cause == "cuda_device_assert" and "srcIndex" in d.error_line


def test_4_a_generic_last_exception_is_explained_by_its_cause() -> None:
    chained = (
        TB.replace("init_memory_pool", "load_model")
        + "subprocess.CalledProcessError: Command '['ninja', '-v']' returned "
        "non-zero exit status 1.\n\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in y\nRuntimeError: Error building extension 'k'\n"
    )
    _, d = diagnose_text(chained)
    assert d is not None and d.cause == "kernel_compile_error"


def test_4_but_progress_after_an_error_clears_it() -> None:
    """An error SGLang survived (the server went on) is not the cause of a later, cut crash."""
    text = (
        startup(1, until="kv_cache")
        + "[2026-01-01 10:00:15] Ignore import error when loading x: Command '['/usr/bin/gcc', 'a.c']' "
        "returned non-zero exit status 1.\n"
        + startup(1).split("\n", 20)[-1]
        + "[2026-01-01 10:09:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    )
    _, d = diagnose_text(text)
    assert d is not None and d.cause == "unknown"


def test_6_serving_evidence_wins_over_missed_startup_lines() -> None:
    text = (
        startup(2, until="kv_cache")
        + "[2026-01-01 10:00:30] INFO:     Uvicorn running on http://0.0.0.0:30000\n"
        + "".join(
            f'[2026-01-01 10:00:3{i}] INFO:     127.0.0.1:5{i} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            for i in range(3)
        )
        + "[2026-01-01 10:00:39 TP0] Decode batch, #running-req: 2, #token: 90, token usage: 0.00, gen throughput (token/s): 88.10, "
        "#queue-req: 0\n"
    )
    s = parse_text(text)
    assert s.phase.value == "serving" and s.stats.gen_throughput == 88.1


@pytest.mark.parametrize(
    "line",
    [
        "[04:40:55 TP0] Decode batch. #running-req: 2, #token: 4078, token usage: 0.00, gen throughput (token/s): 447.31, #queue-req: 0",
        "[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, token usage: 0.43, gen throughput (token/s): 7897.87, "
        "largest-len: 0, #queue-req: 0, ",
        "2026-06-07 10:59:31,659 [INFO] sglang.srt.managers.scheduler_metrics_mixin: Decode batch, #running-req: 1, #token: 227, "
        "token usage: 0.00, cuda graph: True, gen throughput (token/s): 126.29, #queue-req: 0,",
    ],
)
def test_6_decode_lines_of_every_version_give_gen_throughput(line: str) -> None:
    s = parse_text(line + "\n")
    assert s.phase.value == "serving" and s.stats.gen_throughput is not None and s.stats.gen_throughput > 0


def test_3_a_marker_keeps_its_meaning_behind_a_broken_header() -> None:
    """A header that lost its `[` (a paste) is not a wrapper to learn: the marker still says the server died."""
    text = startup(1) + (
        "2025-08-15 14:25:48] DetokenizerManager hit an exception: Traceback (most recent call last):\n"
        '  File "/venv/sglang/srt/managers/detokenizer_manager.py", line 275, in run_detokenizer_process\n'
        "KeyError: 151643\n"
    )
    s, d = diagnose_text(text)
    assert s.crashed and d is not None and d.error_line == "KeyError: 151643"


def test_4_an_error_long_before_the_crash_is_not_its_context() -> None:
    """An import error SGLang ignored at start-up a minute before a cut crash does not name that crash."""
    ignored = (
        "[2026-01-01 10:00:01 TP1] Ignore import error when loading sglang.srt.models.x. Command '['/usr/bin/gcc', "
        "'main.c']' returned non-zero exit status 1.\n"
    )
    cut = "[{t} TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    _, near = diagnose_text(ignored + cut.format(t="2026-01-01 10:00:02"))
    _, far = diagnose_text(ignored + cut.format(t="2026-01-01 10:01:30"))
    assert near is not None and near.cause == "kernel_compile_error"
    assert far is not None and far.cause == "unknown"

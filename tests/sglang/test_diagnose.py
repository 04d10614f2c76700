"""Crash causes the samples cannot produce, from the exact texts SGLang/torch/uvicorn print; and process facts."""

from __future__ import annotations

import pytest

from console.sglang.diagnose import CAUSES, ProcessFacts, diagnose, diagnose_text
from console.sglang.logparse import parse_text

from .synth import startup

SIGQUIT = "[2026-01-01 10:05:00] Received sigquit from a child process. It usually means the child failed.\n"


def crash(exc: str, *, frames: str = "", phase_text: str = "") -> str:
    return (
        phase_text + "[2026-01-01 10:04:59 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 3100, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n" + frames + exc + "\n\n" + SIGQUIT
    )


CASES = [
    (
        "cuda_oom_kv_cache",
        crash("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."),
        "raise --mem-fraction-static",
    ),
    (
        "cuda_oom_cuda_graph",
        crash(
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
            "capacity of 79.10 GiB of which 1.50 GiB is free.\nPossible solutions:\n1. set --mem-fraction-static to a smaller value"
        ),
        "lower --mem-fraction-static",
    ),
    (
        "cuda_oom_weights",
        crash(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
            "23.56 GiB of which 100.00 MiB is free.",
            frames='  File "loader.py", line 1, in load_weights\n',
        ),
        "more GPUs",
    ),
    (
        "memory_imbalance",
        crash(
            "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
            "pre_model_load_memory=70.1, local_gpu_memory=78.2, local_gpu_memory * 0.9=70.4"
        ),
        "nvidia-smi",
    ),
    (
        "port_in_use",
        startup(1, until="ready").replace(
            "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
            "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        ),
        "30000",
    ),
    ("port_in_use", crash("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:30001')"), "30001"),
    (
        "cuda_driver_incompatible",
        crash("RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available."),
        "CUDA_VISIBLE_DEVICES",
    ),
    (
        "invalid_argument",
        "Traceback (most recent call last):\nValueError: User-specified context_length (200000) is greater than "
        "the derived context_length (131072). To allow overriding this maximum, set the env var "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1\n",
        "preset",
    ),
    (
        "invalid_port_config",
        "[2026-01-01 10:00:00] ERROR:    [Errno 99] error while attempting to bind on address ('10.9.9.9', 30000): "
        "cannot assign requested address\n",
        "--host",
    ),
    (
        "missing_shared_library",
        crash("OSError: libavutil.so.58: cannot open shared object file: No such file or directory"),
        "FFmpeg",
    ),
    (
        "cuda_driver_incompatible",
        crash("RuntimeError: The NVIDIA driver on your system is too old (found version 11040)."),
        "driver",
    ),
    (
        "unsupported_gpu_arch",
        crash("RuntimeError: CUDA error: no kernel image is available for execution on the device"),
        "GPU",
    ),
    (
        "kernel_missing",
        crash(
            "ImportError: /venv/lib/python3.11/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c10"
        ),
        "reinstall",
    ),
    ("kernel_compile_error", crash("RuntimeError: ninja exited with status 1"), "toolchain"),
    (
        "nccl_error",
        crash("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error"),
        "NCCL_DEBUG",
    ),
    (
        "distributed_comm_error",
        crash(
            "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to "
            "connect to (10.0.0.1, 5000)."
        ),
        "--dist-init-addr",
    ),
    ("cuda_device_assert", crash("RuntimeError: CUDA error: device-side assert triggered"), "CUDA_LAUNCH_BLOCKING"),
    (
        "spec_args_invalid",
        crash(
            "AssertionError",
            frames='  File "/venv/sglang/srt/server_args.py", line 3519, in _handle_speculative_decoding\n'
            "    assert self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None\n",
        ),
        "--speculative-num-steps",
    ),
    (
        "spec_args_invalid",
        crash("ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."),
        "topk",
    ),
    (
        "mamba_radix_tree_corruption",
        crash(
            "AssertionError: node has no mamba value",
            frames='  File "/venv/sglang/srt/managers/scheduler.py", line 1, in event_loop_overlap\n'
            '  File "/venv/sglang/srt/mem_cache/mamba_radix_cache.py", line 500, in evict\n',
        ),
        "extra_buffer",
    ),
    # where it failed decides: the same kind of assert in the cache's constructor is a start-up incompatibility
    (
        "mamba_radix_cache_incompatible",
        crash(
            "AssertionError",
            frames=(
                '  File "/venv/sglang/srt/managers/scheduler.py", line 400, in init_cache_with_memory_pool\n'
                '  File "/venv/sglang/srt/mem_cache/mamba_radix_cache.py", line 370, in __init__\n'
                "    assert isinstance(token_to_kv_pool_allocator, TokenToKVPoolAllocator)\n"
            ),
        ),
        "extra_buffer",
    ),
    (
        "checkpoint_weight_mismatch",
        crash(
            "KeyError: 'model.layers.0.mlp.experts.w2_weight_scale'",
            frames=(
                '  File "/venv/sglang/srt/models/deepseek_v2.py", line 2100, in load_weights\n'
                "    param = params_dict[name]\n"
            ),
        ),
        "checkpoint",
    ),
    (
        "invalid_port_config",
        crash(
            "TypeError: an integer is required (got type str)",
            frames=('  File "/venv/sglang/srt/utils.py", line 700, in get_open_port\n    s.bind(("", port))\n'),
        ),
        "integer",
    ),
    ("kernel_missing", crash("NameError: name 'fused_moe_kernel' is not defined"), "reinstall"),
    (
        "cuda_driver_incompatible",
        crash(
            "ImportError: /venv/lib/python3.11/site-packages/sgl_kernel/common_ops.abi3.so: "
            "undefined symbol: cuTensorMapEncodeTiled"
        ),
        "driver",
    ),
    ("unsupported_gpu_arch", crash("RuntimeError: SGLang only supports sm75 and above."), "GPU"),
    (
        "nccl_error",
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600003 milliseconds before timing out.\n"
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in /venv/torch/lib/libc10.so)\n",
        "NCCL_DEBUG",
    ),
    (
        "multinode_rank_load_failure",
        crash(
            "ValueError: TP rank 1 could finish the model loading, but there are other ranks that "
            "didn't finish loading. It is likely due to unexpected failures (e.g. OOM) or a slow node."
        ),
        "other node",
    ),
    (
        "distributed_comm_error",
        crash(
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
            "[10.0.0.2]:43139"
        ),
        "--dist-init-addr",
    ),
    (
        "model_not_found",
        'Traceback (most recent call last):\n  File "x.py", line 1\nOSError: /models/nope does not appear to have a file '
        "named config.json. Checkout 'https://huggingface.co//models/nope/tree/None' for available files.\n",
        "model path",
    ),
    (
        "model_not_found",
        crash(
            "OSError: Incorrect path_or_model_id: '/nonexistent/model'. Please provide either the path to a "
            "local folder or the repo_id of a model on the Hub."
        ),
        "model path",
    ),
    (
        "unsupported_model_arch",
        crash("ValueError: Model architectures ['FooForCausalLM'] are not supported for now."),
        "upgrade",
    ),
    (
        "trust_remote_code_required",
        "Traceback (most recent call last):\nValueError: The repository for /m/x contains custom code which must "
        "be executed to correctly load the model. Please pass the argument `trust_remote_code=True` to allow custom code to be run.\n",
        "--trust-remote-code",
    ),
    (
        "invalid_argument",
        "usage: sglang serve [-h] --model-path MODEL_PATH\nsglang serve: error: argument --speculative-algorithm: "
        "invalid choice: 'FOO' (choose from 'DFLASH', 'EAGLE')\n",
        "preset",
    ),
    (
        "warmup_failed",
        startup(1, until="warming")
        + "[2026-01-01 10:00:40] Initialization failed. warmup error: Traceback (most recent call last):\n"
        "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=30000): Read timed out.\n",
        "warmup",
    ),
    (
        "killed_oom_killer",
        crash(
            "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
            "a common cause is the OS OOM killer."
        ),
        "dmesg",
    ),
]


@pytest.mark.parametrize(("cause", "text", "hint_word"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_cause(cause: str, text: str, hint_word: str) -> None:
    s, d = diagnose_text(text)
    assert s.crashed, s.phase
    assert d is not None
    assert d.cause == cause, d
    assert hint_word in d.hint + d.summary
    assert d.error_line


def test_every_slug_is_exercised_somewhere() -> None:
    from .test_samples import EXPECTED

    covered = {c for c, _, _ in CASES} | {c for _, c in EXPECTED.values() if c}
    assert set(CAUSES) == covered


def test_hints_point_the_right_way() -> None:
    by = {c: t for c, t, _ in reversed(CASES)}
    kv = diagnose_text(by["cuda_oom_kv_cache"])[1]
    graph = diagnose_text(by["cuda_oom_cuda_graph"])[1]
    assert kv is not None and "raise --mem-fraction-static" in kv.hint
    assert graph is not None and "lower --mem-fraction-static" in graph.hint and "--cuda-graph-max-bs" in graph.hint
    assert "asked for 2048 MiB" in graph.summary and "cuda:1 of the process" in graph.summary
    lib = diagnose_text(by["missing_shared_library"])[1]
    assert lib is not None and "libavutil.so.58" in lib.summary and "torchcodec" in lib.summary


def test_killed_without_a_word_uses_process_facts() -> None:
    text = startup(2, until="loading_weights")
    s, d = diagnose_text(text)
    assert d is None and not s.crashed
    s2, d2 = diagnose_text(text, ProcessFacts(exit_status=137, signal=9))
    assert s2.crashed and d2 is not None and d2.cause == "killed_oom_killer"
    _, d3 = diagnose_text(text, ProcessFacts(exit_status=137, signal="SIGKILL", stop_requested=True))
    assert d3 is None
    _, d4 = diagnose_text(
        startup(1) + "[2026-01-01 10:09:00] Child process unexpectedly failed with exitcode=9. pid=1\n",
        ProcessFacts(signal=9),
    )
    assert d4 is not None and d4.cause == "killed_oom_killer"


def test_no_confident_wrong_cause_when_exception_missing() -> None:
    text = crash("").replace("\n\n" + SIGQUIT, "\n" + SIGQUIT)
    _, d = diagnose_text(text)
    assert d is not None and d.cause == "unknown" and "Scheduler hit an exception" in d.error_line


def test_healthy_logs_have_no_diagnosis() -> None:
    assert diagnose(parse_text(startup(2))) is None


def test_fatal_decode_oom_is_runtime_oom_not_a_retraction() -> None:
    text = (
        startup(1)
        + "[2026-01-01 10:03:00] Decode out of memory. Try to lower your batch size.\nTry to allocate 64 tokens.\n"
        + crash(
            "RuntimeError: Decode out of memory. Try to lower your batch size.",
            frames='  File "/venv/sglang/srt/managers/scheduler.py", line 1, in event_loop_overlap\n',
        )
    )
    s, d = diagnose_text(text)
    assert s.stats.retractions == 0 and d is not None and d.cause == "cuda_oom_runtime"

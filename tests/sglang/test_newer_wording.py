"""Crash causes and phases in the wording of newer SGLang and the libraries around it, on the lines real logs print."""

from __future__ import annotations

import pytest

from console.commands.diagnose import to_record
from console.sglang.diagnose import diagnose_text

# DeepGEMM's device-side assert (sgl-project/sglang#30399), printed by its own macro, one line per trapped block
DG_ASSERT = (
    "Assertion failed: /usr/local/lib/python3.12/dist-packages/deep_gemm/include/deep_gemm/comm/barrier.cuh:45, "
    'condition: false and "Grid sync timeout"\n'
)
# a scheduler's traceback through the decode loop (sgl-project/sglang#15132), ending in the launch failure the assert causes
LAUNCH_FAILURE = (
    "[2025-12-15 00:02:05 DP1 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2740, in run_scheduler_process\n'
    "    scheduler.event_loop_overlap()\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2152, in process_batch_result\n'
    "    self.process_batch_result_decode(batch, result)\n"
    "torch.AcceleratorError: CUDA error: unspecified launch failure\n"
)


def test_a_librarys_own_device_assert_is_a_crash_with_the_library_and_condition_named() -> None:
    s, d = diagnose_text(DG_ASSERT * 3)
    assert s.crashed and d is not None and d.cause == "cuda_device_assert"
    assert "deep_gemm" in d.summary and "barrier.cuh:45" in d.summary and "Grid sync timeout" in d.summary
    assert d.error_line == DG_ASSERT.strip()


def test_the_launch_failure_after_a_library_assert_is_explained_by_the_assert() -> None:
    s, d = diagnose_text(DG_ASSERT * 2 + LAUNCH_FAILURE)
    assert s.crashed and d is not None and d.cause == "cuda_device_assert"
    assert "deep_gemm" in d.summary and d.error_line == DG_ASSERT.strip()


def test_the_nccl_timeout_of_the_other_ranks_after_a_library_assert_is_not_the_cause() -> None:
    watchdog = (  # sgl-project/sglang#1693's abort, what a peer rank prints once the trapped rank stops answering
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008)\n"
    )
    s, d = diagnose_text(DG_ASSERT * 2 + watchdog)
    assert s.crashed and d is not None and d.cause == "cuda_device_assert" and "deep_gemm" in d.summary


def test_cudas_own_assert_wording_is_not_taken_for_a_library_assert() -> None:
    line = (
        "../aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [27577,0,0], thread: [32,0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
    )  # sgl-project/sglang#3064's wording, which SGLang's own traceback follows
    s, d = diagnose_text("[2025-03-12 11:47:50 TP0] Memory pool end. avail mem=13.09 GB\n" + line)
    assert not s.crashed and d is None


BARE_TB = """Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 440, in initialize
    self.init_device_graphs()
{exc}
"""


@pytest.mark.parametrize(
    ("exc", "module"),
    [
        ("NameError: name 'deep_gemm' is not defined", "deep_gemm"),  # sgl-project/sglang#37105, sm_120
        ("ModuleNotFoundError: No module named 'cutlass'", "cutlass"),  # sgl-project/sglang#21182 (CI, every runner)
        ("ModuleNotFoundError: No module named 'sgl_kernel'", "sgl_kernel"),  # sgl-project/sglang#3687
        ("ModuleNotFoundError: No module named 'sgl_kernel.flash_attn'", "sgl_kernel.flash_attn"),
    ],
)
def test_a_missing_kernel_module_is_kernel_missing_with_the_module_named(exc: str, module: str) -> None:
    s, d = diagnose_text(BARE_TB.format(exc=exc))
    assert s.crashed and d is not None and d.cause == "kernel_missing"
    assert f"missing: {module} " in d.summary


def test_a_module_sglang_says_it_ignored_is_not_the_cause() -> None:
    # sgl-project/sglang#23600's record of an import error SGLang goes on from (it names tilelang there; here a
    # module the kernel rule knows), then an unrelated crash: the earlier rule called it kernel_missing
    text = (
        "[2026-04-24 09:34:00] In import_model_classes: Ignore import error when loading "
        "sglang.srt.models.deepseek_v4_nextn: No module named 'deep_gemm'\n"
        + BARE_TB.format(exc="KeyError: 'q_a_proj'")
    )
    s, d = diagnose_text(text)
    assert s.crashed and d is not None and d.cause != "kernel_missing"


def test_frames_with_no_traceback_or_scheduler_header_still_decide() -> None:
    text = (  # sgl-project/sglang#36507: the frames as pasted, the last line cut by the thread
        'File ".../sglang/srt/layers/deep_gemm_wrapper/entrypoint.py", line 245, in tf32_hc_prenorm_gemm\n'
        "    deep_gemm.tf32_hc_prenorm_gemm(x, fn, out, sqrsum, num_splits=num_splits)\n"
        "NameError: name 'deep_gemm'\n"
    )
    s, d = diagnose_text(text)
    assert s.crashed and d is not None and d.cause == "kernel_missing" and "deep_gemm" in d.summary


@pytest.mark.parametrize("arch", ["Qwen2_5OmniModel", "DeepseekV4ForCausalLM"])  # sglang#8451, ktransformers#1977
def test_not_a_registered_model_is_an_unsupported_architecture_named(arch: str) -> None:
    exc = (
        f"ValueError: Cannot find model module. '{arch}' is not a registered model in the Transformers library (only "
        "relevant if the model is meant to be in Transformers) and 'AutoModel' is not present in the model config's "
        "'auto_map' (relevant if the model is custom)."
    )
    for text in (exc + "\n", BARE_TB.format(exc=exc)):
        s, d = diagnose_text(text)
        assert s.crashed and d is not None and d.cause == "unsupported_model_arch"
        assert arch in d.summary


WARNINGS = (  # swiss-ai/model-launch#119: everything SGLang printed before its traceback
    "/usr/local/lib/python3.12/dist-packages/sglang/srt/environ.py:581: UserWarning: Environment variable "
    "SGL_ENABLE_JIT_DEEPGEMM is deprecated, please use SGLANG_ENABLE_JIT_DEEPGEMM\n"
    "  warnings.warn(\n"
    "/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py:51: UserWarning: 'python -m sglang.launch_server' "
    "is still supported, but 'sglang serve' is the recommended entrypoint.\n"
    "  Example: sglang serve --model-path <model> [options]\n"
    "  warnings.warn(\n"
)


def test_a_log_of_only_sglangs_python_warnings_is_a_launch() -> None:
    s, d = diagnose_text(WARNINGS)
    assert d is None and not s.crashed and s.phase == "launching"
    rec = to_record("x.log", s, d)
    assert rec["sglang_log"] and rec["phase"] == "launching" and rec["summary"] == "launching"


def test_another_packages_warning_is_not_sglang_output() -> None:
    s, _ = diagnose_text(
        "/venv/lib/python3.11/site-packages/transformers/utils/hub.py:105: FutureWarning: Using `TRANSFORMERS_CACHE` "
        "is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead.\n  warnings.warn(\n"
    )  # sgl-project/sglang#5389
    assert s.sglang_lines == 0


# a PD decode worker under dynamo (ai-dynamo/dynamo#4855), which re-prints SGLang's records in a tracing format
DYNAMO = (
    "2025-12-10T13:50:14.788089Z  INFO model_runner.load_model: Load weight end. type=DeepseekV3ForCausalLM, "
    "dtype=torch.bfloat16, avail mem=36.44 GB, mem usage=41.58 GB.\n"
    "2025-12-10T13:50:29.938649Z  INFO memory_pool._finalize_allocation_log: KV Cache is allocated. #tokens: 360072, "
    "KV size: 23.57 GB\n"
    "2025-12-10T13:50:30.199229Z  INFO scheduler.__init__: max_total_num_tokens=360072, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, max_running_requests=128, context_len=65536, available_gpu_mem=12.73 GB\n"
)
# what a decode server prints while its prefill peer is away (sgl-project/sglang#9266), under the same format
PEER_AWAY = (
    "Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. tic start time: "
    "11:56:08. last_heartbeat time: 11:54:35",
    "Error fetching prefill parallel info from bootstrap: HTTPConnectionPool(host='sglang-deploy-glm-4-5-prefill', "
    "port=30089): Max retries exceeded with url: /route?engine_rank=-1&target_dp_group=-1&target_pp_rank=-1 (Caused "
    "by ConnectTimeoutError(<urllib3.connection.HTTPConnection object at 0x79c38b357230>, 'Connection to "
    "sglang-deploy-glm-4-5-prefill timed out. (connect timeout=None)'))",
)
DECODE = (
    "Decode batch, #running-req: 1, #token: 31936, token usage: 0.22, pre-allocated usage: 0.00, #prealloc-req: 0, "
    "#transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 43.98, #queue-req: 0"
)  # sgl-project/sglang#22511


def test_a_runtimes_tracing_format_is_read_as_sglangs_records() -> None:
    s, d = diagnose_text(DYNAMO)
    assert d is None and s.phase == "kv_cache" and s.facts.max_total_num_tokens == 360072
    assert s.facts.model_class == "DeepseekV3ForCausalLM"


def test_a_pd_decode_worker_whose_prefill_peer_is_away_has_not_crashed() -> None:
    lines = [
        f"2025-12-10T13:51:{i:02d}.000000Z  ERROR decode._bootstrap: {m}"
        for i, m in ((5, PEER_AWAY[0]), (9, PEER_AWAY[1]))
    ]
    s, d = diagnose_text(DYNAMO + "\n".join(lines) + "\n")
    assert d is None and not s.crashed and s.phase == "kv_cache" and s.stats.health_check_failures == 1


def test_a_serving_pd_decode_server_behind_a_log_viewers_prefix_has_not_crashed() -> None:
    pre = "May 16, 2026 @ 20:45:{:02d}.560    [2026-05-16 12:45:{:02d} DP2 TP2] "  # sgl-project/sglang#22511's viewer
    lines = [pre.format(i, i) + DECODE for i in (1, 2)]
    lines += [pre.format(i, i).replace(" DP2 TP2", "") + PEER_AWAY[0] for i in (3,)]
    lines += [pre.format(i, i) + PEER_AWAY[1] for i in (4, 5)]
    lines += [pre.format(6, 6) + DECODE]
    s, d = diagnose_text("\n".join(lines) + "\n")
    assert d is None and not s.crashed and s.phase == "serving" and s.stats.health_check_failures == 1


def test_a_pd_decode_nodes_per_request_transfer_timeouts_are_serving_not_a_crash() -> None:
    failed = (  # sgl-project/sglang#11648, a decode node under a 128-concurrency bench
        "[2025-10-15 11:03:35 DP6 TP6 EP6] Decode transfer failed for request rank=6 "
        "decode_req.req.rid='cd00baf7d2fc4dcf8535c3a25f0288a3' decode_req.req.bootstrap_room=8360203925601259718 with "
        "exception KVTransferError(bootstrap_room=8360203925601259718): Request 8360203925601259718 timed out after "
        "600.0s in KVPoll.WaitingForInput\n"
    )
    s, d = diagnose_text(failed * 2)
    assert d is None and not s.crashed and s.phase == "serving"
    assert s.errors and "KVTransferError" in s.errors[-1]

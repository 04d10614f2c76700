"""The diagnosis's rule table: which text (and where it was raised) means which cause, with its one-line summary and fix.

Rules are tried most specific first; each builds the summary from the matched line, so the key
fact (a library, a port, an allocation size) is in it. Pure: no IO.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from console.sglang.logmarkers import LIB_ASSERT
from console.sglang.logstate import CrashInfo, LogSummary
from console.sglang.phase import Phase


@dataclass(frozen=True)
class Diagnosis:
    """The answer shown for a crash: a slug from diagnose.CAUSES, the key fact, the fix, and the line that decided it."""

    cause: str
    summary: str
    hint: str
    error_line: str


@dataclass
class Ctx:
    crash: CrashInfo
    summary: LogSummary
    lines: list[str]
    text: str
    gpus: tuple[int, ...] = ()
    """The physical GPUs behind the process's cuda:0, cuda:1, ... (its CUDA_VISIBLE_DEVICES); () if unknown."""


_Build = Callable[[re.Match[str], Ctx], tuple[str, str]]


@dataclass(frozen=True)
class _Rule:
    cause: str
    pattern: re.Pattern[str]
    build: _Build


def _rx(*alts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alts))


def _const(summary: str, hint: str) -> _Build:
    return lambda m, c: (summary, hint)


def _lib(m: re.Match[str], c: Ctx) -> tuple[str, str]:
    lib = m.group("lib")
    if lib.startswith("libavutil") or lib.startswith(("libavcodec", "libavformat", "libswresample", "libavdevice")):
        return (
            f"missing shared library {lib}, needed by torchcodec (FFmpeg's library)",
            f"{lib} comes from FFmpeg, which torchcodec loads: install a matching FFmpeg on the host "
            "(apt install ffmpeg / conda install -c conda-forge ffmpeg) or `pip uninstall torchcodec` "
            "in the venv if you do not need video/audio input",
        )
    if lib.startswith("libcuda.so"):
        return (
            f"missing shared library {lib}: the NVIDIA driver library is not visible",
            "install the NVIDIA driver on the host (or run the container with the GPU runtime) and make sure "
            "libcuda.so is on the loader path",
        )
    if lib.startswith(("libcudart", "libcublas", "libcudnn", "libnvrtc", "libnccl", "libcusparse", "libnvJitLink")):
        return (
            f"missing shared library {lib} (CUDA toolkit/runtime library)",
            f"install the CUDA runtime that provides {lib} (e.g. the nvidia-*-cu12 wheels in the venv) or add its "
            "directory to LD_LIBRARY_PATH in the host's or preset's env",
        )
    return (
        f"missing shared library {lib}",
        f"install the package that provides {lib} on the host, or add its directory to LD_LIBRARY_PATH "
        "(host or preset env in hosts.toml)",
    )


_MIB = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "TiB": 1024.0 * 1024}
_TORCH_OOM = re.compile(
    r"Tried to allocate ([\d.]+) ([KMGT]iB)\. GPU (\d+) has a total capacity of ([\d.]+ [KMGT]iB) of which ([\d.]+ [KMGT]iB) is free"
)


def _oom_fact(text: str, gpus: tuple[int, ...] = ()) -> str:
    """torch's GPU N counts after CUDA_VISIBLE_DEVICES: named as the physical GPU (nvidia-smi's index) when the
    caller knows the process's GPUs, with torch's index beside it where it differs; else said to be torch's."""
    m = _TORCH_OOM.search(text)
    if not m:
        return "CUDA out of memory"
    mib = float(m.group(1)) * _MIB[m.group(2)]
    dev = int(m.group(3))
    if dev >= len(gpus):
        gpu = f"cuda:{dev} of the process (which physical GPU is not known)"
    else:
        gpu = f"GPU {gpus[dev]}" + ("" if gpus[dev] == dev else f" (cuda:{dev} of the process)")
    return f"CUDA out of memory on {gpu}: asked for {mib:.0f} MiB, {m.group(5)} free of {m.group(4)}"


def _port(m: re.Match[str], c: Ctx) -> tuple[str, str]:
    pm = (
        re.search(r"\('([^']*)', (\d+)\)", m.string)
        or re.search(r"tcp://[^:']+:(\d+)", m.string)
        or re.search(r"(?:port|at) (\d+)", m.string)
    )
    port = pm.group(pm.lastindex or 1) if pm else "?"
    return (
        f"port {port} is already in use (the HTTP server could not bind after loading everything)",
        f"stop whatever holds port {port} (`ss -ltnp 'sport = :{port}'`) or give the preset another port; "
        "the console pre-checks ports before launching",
    )


def _arch(m: re.Match[str], c: Ctx) -> tuple[str, str]:
    fp8 = "fp8" in m.string.lower()
    what = m.string.strip().removeprefix("ValueError(").strip("\"')").split(". The supported")[0]
    return (
        f"this GPU architecture is not supported by a kernel: {what[:120]}",
        "FP8 (e4m3) kernels need an Ada/Hopper/Blackwell GPU (sm89+): drop the FP8 KV cache/quantization "
        "(--kv-cache-dtype auto, a non-FP8 checkpoint) or pick another --attention-backend"
        if fp8
        else "use a build of SGLang/sgl-kernel/flashinfer compiled for this GPU, or another --attention-backend / "
        "--moe-runner-backend that supports it",
    )


def _compile(m: re.Match[str], c: Ctx) -> tuple[str, str]:
    lib = m.groupdict().get("ldlib")
    if lib:
        return (
            f"a JIT kernel build failed to link: the linker cannot find -l{lib}",
            f"install the CUDA toolkit's development libraries (lib{lib}.so) and point LIBRARY_PATH/LD_LIBRARY_PATH "
            "at its lib64 (host env), or use a prebuilt sgl-kernel wheel",
        )
    return (
        f"a kernel failed to compile: {m.group(0).strip()[:120]}",
        "check the compiler toolchain on the host (gcc, nvcc matching the CUDA version, ninja) and the JIT cache "
        "dir; the lines above the error show the compiler's message",
    )


_KERNEL_MODULE_HINTS = {
    "deep_gemm": "SGLang imports DeepGEMM only where it is enabled (SGLANG_ENABLE_JIT_DEEPGEMM, on by default) "
    "and the GPU supports it (not sm_120): unset SGLANG_ENABLE_JIT_DEEPGEMM=0 and install deep_gemm, or run this "
    "model on a GPU / SGLang build whose path does not call DeepGEMM",
    "cutlass": "the `cutlass` package comes from nvidia-cutlass-dsl (CuTe DSL kernels): `pip install "
    "--force-reinstall nvidia-cutlass-dsl` in the preset's venv (an upgrade can drop its .pth file)",
    "sgl_kernel": "install the sgl-kernel wheel SGLang pins (`pip install 'sglang[all]==<version>'`) in the preset's "
    "venv, built for this CUDA version",
}


def _kernel_missing(m: re.Match[str], c: Ctx) -> tuple[str, str]:
    line = m.group(0).strip()
    mod = m.groupdict().get("mod") or m.groupdict().get("name")
    if mod:
        top = mod.split(".")[0]
        return (
            f"a kernel module is missing: {top if top == mod else mod} ({m.string.strip()[:120]})",
            _KERNEL_MODULE_HINTS.get(
                top,
                f"install {top} in the preset's venv at the version SGLang pins "
                "(pip install 'sglang[all]==<version>'), or pick a backend that does not need it",
            ),
        )
    if "Runtime check failed" in line:
        detail = m.string.strip().split(": ", 2)[-1]
        return (
            f"a kernel rejected this model/parallel layout: {detail[:140]}",
            "the quantized kernel does not support this shape at this --tp-size: try another --tp-size, "
            "--moe-runner-backend triton, or a checkpoint with a different group size",
        )
    return (
        f"a required kernel/operator is missing: {line[:140]}",
        "the venv's sgl-kernel/flashinfer/torch builds do not match: reinstall SGLang's pinned versions "
        "(pip install 'sglang[all]==<version>') in the preset's venv",
    )


def _lib_of(path: str) -> str:
    """The package a header belongs to: the directory after site-/dist-packages, else the file's directory."""
    parts = path.split("/")
    for i, p in enumerate(parts[:-1]):
        if p in ("site-packages", "dist-packages") and i + 1 < len(parts) - 1:
            return parts[i + 1]
    return parts[-2] if len(parts) > 1 and parts[-2] not in ("", ".", "..") else parts[-1]


def _lib_assert(m: re.Match[str]) -> tuple[str, str]:
    lib = _lib_of(m.group("file"))
    where = f"{m.group('file').rsplit('/', 1)[-1]}:{m.group('line')}"
    cond = m.group("cond").strip()
    timeout = "timeout" in cond.lower()
    return (
        f"a {lib} kernel hit a device-side assert ({where}: {cond[:100]}); the CUDA context is lost",
        "a grid/barrier sync timeout means the ranks reached the kernel's barrier too far apart (a peer still "
        "JIT-compiling its first kernels, or a hung rank): "
        + ("precompile (python3 -m sglang.compile_deep_gemm with the same args) and " if lib == "deep_gemm" else "")
        + "relaunch; if it repeats, report it to "
        + lib
        if timeout
        else f"relaunch (the process cannot recover); rerun with CUDA_LAUNCH_BLOCKING=1 and report the condition to "
        f"{lib}, or pick a --moe-runner-backend / --attention-backend that does not use it",
    )


_ARGPARSE_RULE = _Rule(
    "invalid_argument",
    _rx(
        r"error: argument [-\w]+",
        r"error: unrecognized arguments",
        r"the following arguments are required",
        r"invalid choice",
        r"Error: --model-path is required",
        r"User-specified context_length \(\d+\) is greater than",
    ),
    lambda m, c: (
        f"SGLang rejected an argument: {m.string.strip()[:160]}",
        "fix the flag in the preset's args (dflash-console check lints them)",
    ),
)

_RULES: tuple[_Rule, ...] = (
    _ARGPARSE_RULE,
    _Rule(
        "mamba_radix_cache_incompatible",
        _rx(
            r"not compatible with radix cache when using --mamba-scheduler-strategy",
            r"mamba.*radix cache.*extra_buffer",
        ),
        _const(
            "speculative decoding on a hybrid Mamba/GDN model with the radix cache needs the extra_buffer mamba strategy",
            "add `--mamba-scheduler-strategy extra_buffer` (with SGLANG_ENABLE_SPEC_V2=1 on 0.5.11), or "
            "`--disable-radix-cache`",
        ),
    ),
    _Rule(
        "spec_args_invalid",
        _rx(
            r"trtllm_mha backend only supports topk = 1",
            r"speculative_eagle_topk > 1 with page_size > 1",
            r"not compatible with overlap schedule, speculative decoding",
            r"(?i:speculative[^\n]{0,80}(?:must|not supported|requires|invalid|should))",
            r"(?:DFLASH|EAGLE|NGRAM|STANDALONE)[^\n]{0,60}(?:requires|not supported|must)",
        ),
        lambda m, c: (
            f"invalid speculative-decoding arguments: {m.string.strip()[:140]}",
            "give all of --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
            "(or none of them), and keep topk 1 with trtllm_mha / paged backends",
        ),
    ),
    _Rule(
        "memory_imbalance",
        _rx(r"memory capacity is unbalanced"),
        _const(
            "GPU memory is unbalanced across the TP ranks: some GPUs are partly used by other processes",
            "free the GPUs (nvidia-smi shows who holds them) or launch on other GPUs; "
            "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 only silences the check",
        ),
    ),
    _Rule(
        "cuda_oom_kv_cache",
        _rx(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        lambda m, c: (
            "not enough GPU memory left for the KV cache after loading the weights",
            "raise --mem-fraction-static (e.g. 0.85 -> 0.9) or spread the model over more GPUs (--tp-size); "
            "a quantized checkpoint also leaves more room",
        ),
    ),
    _Rule(
        "port_in_use",
        _rx(
            r"\[Errno 98\]",
            r"(?i:address already in use)",
            r"is not available in \d+ seconds",
            r"Port is already in use",
        ),
        _port,
    ),
    _Rule(
        "invalid_port_config",
        _rx(
            r"port must be 0-65535",
            r"argument --port: invalid",
            r"\[Errno 99\]",
            r"\[Errno 13\] error while attempting to bind",
        ),
        lambda m, c: (
            f"the bind address/port is not usable: {m.string.strip()[:140]}",
            "use a port in 1024-65535 and a --host that exists on this machine (0.0.0.0 or 127.0.0.1)",
        ),
    ),
    _Rule("missing_shared_library", _rx(r"(?P<lib>[^\s:'\"/]+\.so(?:\.\d+)*): cannot open shared object file"), _lib),
    _Rule(
        "cuda_driver_incompatible",
        _rx(
            r"driver version is insufficient",
            r"NVIDIA driver on your system is too old",
            r"Found no NVIDIA driver",
            r"cudaErrorInsufficientDriver",
            r"forward compatibility was attempted",
            r"unsupported display driver / cuda driver",
            r"CUDA driver initialization failed",
            r"No CUDA GPUs are available",
            r"No accelerator \(CUDA",
            r"undefined symbol: cu[A-Z]\w*",
        ),
        lambda m, c: (
            (
                "no GPU is visible to the server (driver missing, or CUDA_VISIBLE_DEVICES names no usable GPU)",
                "check `nvidia-smi` on the host and the CUDA_VISIBLE_DEVICES the console sets (the preset's gpus); "
                "in a container pass the GPUs through (--gpus)",
            )
            if ("No CUDA GPUs" in m.string or "No accelerator" in m.string)
            else (
                f"the NVIDIA driver does not support this CUDA/torch build: {m.string.strip()[:120]}",
                "upgrade the host's NVIDIA driver to one that supports the venv's CUDA version "
                "(nvidia-smi shows the max CUDA version), or install a torch/SGLang build for an older CUDA",
            )
        ),
    ),
    _Rule(
        "unsupported_gpu_arch",
        _rx(
            r"not supported in this architecture",
            r"no kernel image is available for execution",
            r"(?i:sm_?\d+[^\n]{0,20}not supported)",
            r"only supports? Ampere GPUs or newer",
            r"Unsupported GPU architecture",
            r"requires (?:a GPU with )?compute capability",
            r"Unsupported compute capability",
            r"only supports? sm ?\d+ and above",
            r"(?i:supports? sm ?\d+ (?:and|or) (?:above|newer|later))",
        ),
        _arch,
    ),
    _Rule("kernel_compile_error", _rx(r"ld: cannot find -l(?P<ldlib>\w+)"), _compile),
    _Rule(
        "kernel_compile_error",
        _rx(
            r"ninja exited with status \d+",
            r"CompilationError",
            r"nvcc fatal",
            r"error: command '[^']*' failed",
            r"CalledProcessError: Command '\['[^']*(?:gcc|nvcc|c\+\+)",
            r"fatal error: [\w/.]+\.h: No such file",
            r"Command '\['[^']*(?:gcc|g\+\+|cc|nvcc|c\+\+|ninja)'[^\n]*returned non-zero exit status",
        ),
        _compile,
    ),
    _Rule(
        "kernel_missing",
        _rx(
            r"undefined symbol",
            r"^(?!.*Ignore import error)(?:.*?)No module named '(?P<mod>(?:sgl_kernel|flashinfer|deep_gemm|triton|"
            r"flash_attn|cutlass)[\w.]*)",
            r"NameError: name '(?P<name>deep_gemm|sgl_kernel|flashinfer|flash_attn|cutlass)'",
            r"Runtime check failed at",
            r"No such operator",
            r"Could not run '[^']+' with arguments from the",
            r"torch\.ops\.\w+ has no attribute",
            r"NotImplementedError",
            r"NameError: name '\w*_kernel\w*' is not defined",
        ),
        _kernel_missing,
    ),
    # a library's own device assert is printed by the kernel that trapped: the cause of the NCCL/gloo errors
    # that follow on the other ranks, so it is tried before them
    _Rule("cuda_device_assert", LIB_ASSERT, lambda m, c: _lib_assert(m)),
    _Rule(
        "killed_oom_killer",
        _rx(r"exit code: -9\)", r"exitcode=-9\b", r"^(?:\[[^\]]*\] )?Exit code: -9\b"),
        lambda m, c: (
            "a scheduler was SIGKILLed during start-up (exit code -9): most likely the OS OOM killer (host RAM)",
            "check `dmesg -T | grep -i oom`; loading needs host RAM for the weights: fewer servers loading at "
            "once, more RAM/swap, or fewer loader threads (--model-loader-extra-config)",
        ),
    ),
    _Rule(
        "multinode_rank_load_failure",
        _rx(
            r"remote process exited or there was a network error",
            r"scheduler died during initialization",
            r"could finish the model loading, but there are other ranks",
            r"other ranks that didn't finish loading",
        ),
        lambda m, c: (
            "a peer rank went away during start-up (remote process exited): another node's or rank's launch failed",
            "open the log of the other node(s)/ranks for the real error; check --nnodes/--node-rank/--dist-init-addr "
            "and that every node runs the same command",
        ),
    ),
    _Rule(
        "nccl_error",
        _rx(
            r"NCCL error",
            r"ncclInternalError",
            r"ncclSystemError",
            r"ncclUnhandledCudaError",
            r"ncclInvalidUsage",
            r"ProcessGroupNCCL[^\n]*(?:Watchdog|timed out|error)",
            r"Watchdog caught collective operation timeout",
            r"Process group watchdog thread terminated",
        ),
        lambda m, c: (
            f"NCCL failed: {m.string.strip().split(': ', 1)[-1][:140]}",
            "rerun with NCCL_DEBUG=INFO to see why; common fixes: larger /dev/shm (docker --shm-size), "
            "NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1 on machines without P2P/IB, --disable-custom-all-reduce",
        ),
    ),
    _Rule(
        "distributed_comm_error",
        _rx(
            r"DistNetworkError",
            r"DistStoreError",
            r"DistBackendError",
            r"TCPStore",
            r"connectFullMesh failed",
            r"Socket Timeout",
            r"init_process_group[^\n]*(?:timed out|failed)",
            r"gloo/transport/tcp/pair\.cc",
            r"Connection closed by peer",
        ),
        lambda m, c: (
            f"torch.distributed could not connect the ranks: {m.string.strip()[:120]}",
            "check --dist-init-addr is reachable from every node, that the port is free and not firewalled, "
            "and GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME name the right interface",
        ),
    ),
    _Rule(
        "cuda_device_assert",
        _rx(
            r"device-side assert triggered",
            r"illegal memory access",
            r"unspecified launch failure",
            r"misaligned address",
            r"Assertion `[^`]+` failed",
            r"CUDA error: device-side assert",
            r"cudaErrorAssert",
            r"CUDA_ERROR_ILLEGAL_ADDRESS",
            r"cudaErrorIllegalAddress",
        ),
        lambda m, c: (
            f"a CUDA kernel faulted: {m.group(0).strip()}",
            "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; often an attention backend bug: "
            "try another --attention-backend, or --disable-cuda-graph to confirm",
        ),
    ),
    _Rule(
        "trust_remote_code_required",
        _rx(r"trust_remote_code=True", r"requires you to execute the configuration file", r"--trust-remote-code"),
        _const(
            "the model ships custom code and needs --trust-remote-code",
            "add --trust-remote-code to the preset's args (only for models you trust)",
        ),
    ),
    _Rule(
        "model_not_found",
        _rx(
            r"Repository Not Found",
            r"RepositoryNotFoundError",
            r"is not a local folder and is not a valid model identifier",
            r"does not appear to have a file named config\.json",
            r"HFValidationError",
            r"LocalEntryNotFoundError",
            r"No such file or directory: '[^']*config\.json'",
            r"Cannot find any model weights",
            r"Can't load the configuration of",
            r"Incorrect path_or_model_id",
            r"We couldn't connect to 'https://huggingface\.co'",
        ),
        lambda m, c: (
            f"the model was not found: {m.string.strip()[:140]}",
            "check the preset's model path exists on the host (a directory with config.json and weights) "
            "or that the HF id is right and the host can reach the hub / has HF_HOME set",
        ),
    ),
    _Rule(
        "unsupported_model_arch",
        _rx(
            r"Model architectures? \[[^\]]*\] (?:are|is) not supported",
            r"Cannot find model module\. '(?P<arch>[^']+)' is not a registered model",
            r"does not recognize this architecture",
            r"Unrecognized model in",
            r"not supported for now",
        ),
        lambda m, c: (
            (
                f"neither SGLang nor Transformers has the model class {m.group('arch')} (SGLang's Transformers "
                "fallback found no such model, and config.json's auto_map has no AutoModel)",
                "upgrade SGLang (and transformers) in the venv to a version that supports this architecture; a "
                "custom model needs its code in the checkpoint (auto_map in config.json) and --trust-remote-code",
            )
            if m.groupdict().get("arch")
            else (
                f"this SGLang does not support the model's architecture: {m.string.strip()[:140]}",
                "upgrade SGLang (and transformers) in the venv to a version that lists this architecture",
            )
        ),
    ),
    _Rule(
        "warmup_failed",
        _rx(r"Initialization failed\. warmup error"),
        _const(
            "the server loaded but its warmup request failed",
            "read the warmup error above; if port conflicts, check that no other server owns the port; "
            "--skip-server-warmup only hides the problem",
        ),
    ),
)

CODE = re.compile(
    r"\s|File \"|(?:raise|return|assert|if|for|with|def|async|await|yield) |[\w.\[\]]+ ?[-+*/]?= |[\w.]+\(|\^+$|[~^ ]+$"
)
OOM = re.compile(
    r"CUDA out of memory|HIP out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|"
    r"(?:Prefill|Decode) out of memory"
)


def classify_oom(ctx: Ctx, line: str) -> tuple[str, str, str]:
    text = ctx.text
    fact = _oom_fact(text, ctx.gpus)
    ph = ctx.crash.phase_at_crash
    if (
        "Capture cuda graph failed" in text
        or "cuda_graph_runner" in text
        or "piecewise" in text
        or ph is Phase.CUDA_GRAPH
    ):
        return (
            "cuda_oom_cuda_graph",
            f"{fact} while capturing CUDA graphs",
            "lower --mem-fraction-static (e.g. 0.8 or 0.7) to leave room for the graphs, or a smaller "
            "--cuda-graph-max-bs (e.g. 16); --disable-piecewise-cuda-graph if it failed in the piecewise capture",
        )
    if "init_memory_pool" in text or "memory_pool" in text or ph is Phase.KV_CACHE:
        return (
            "cuda_oom_kv_cache",
            f"{fact} while allocating the KV cache",
            "the KV pool did not fit in the free memory: lower --mem-fraction-static, and check that no other "
            "process holds memory on these GPUs",
        )
    known = bool(ctx.summary.ranks)
    runtime = any(
        w in text for w in ("forward_thread_func", "forward_batch", "run_batch", "event_loop", "process_batch_result")
    )
    if (
        "init_torch_distributed" in text
        or "load_model" in text
        or "load_weights" in text
        or (not runtime and known and ph in (Phase.LAUNCHING, Phase.LOADING_WEIGHTS))
    ):
        where = (
            " during distributed init (the GPU was already full)"
            if "init_torch_distributed" in text
            else " while loading the weights"
        )
        return (
            "cuda_oom_weights",
            fact + where,
            "free the GPU (nvidia-smi: another process may hold it), check CUDA_VISIBLE_DEVICES gives each rank its "
            "own GPU, or spread the weights over more GPUs (--tp-size) / use a quantized checkpoint",
        )
    return (
        "cuda_oom_runtime",
        f"{fact} while serving",
        "leave more headroom for activations: lower --mem-fraction-static slightly, or cap --max-running-requests "
        "/ --chunked-prefill-size",
    )


def by_rules(ctx: Ctx, lines: list[str]) -> Diagnosis | None:
    """The most specific rule any of `lines` matches."""
    for rule in _RULES:
        for line in lines:
            m = rule.pattern.search(line)
            if m:
                s, h = rule.build(m, ctx)
                return Diagnosis(rule.cause, s, h, line.strip())
    return None


_MAMBA_INIT = re.compile(
    r"init_cache_with_memory_pool|mamba_radix_cache\.py\"?, line \d+, in __init__|MambaRadixCache\.__init__"
)
_RUNTIME_FRAMES = (
    "event_loop",
    "process_batch_result",
    "forward_batch",
    "run_batch",
    "cache_finished_req",
    "cache_unfinished_req",
)


def by_location(ctx: Ctx) -> Diagnosis | None:
    """Causes a generic exception only names together with where it was raised."""
    excs, text = ctx.crash.exception_lines, ctx.text
    last = excs[-1] if excs else ""
    if "mamba_radix_cache" in text or "MambaRadixCache" in text:
        ph = ctx.crash.phase_at_crash
        startup = _MAMBA_INIT.search(text) is not None or (
            ph is not None and ph.startup and not any(w in text for w in _RUNTIME_FRAMES)
        )
        if startup:
            return Diagnosis(
                "mamba_radix_cache_incompatible",
                f"the hybrid Mamba radix cache rejected this configuration at start-up: {(last or ctx.crash.marker)[:120]}",
                "use `--mamba-scheduler-strategy extra_buffer` (with SGLANG_ENABLE_SPEC_V2=1 for speculative "
                "decoding on 0.5.11), or `--disable-radix-cache`",
                (last or ctx.crash.marker).strip(),
            )
        if last.startswith(("AssertionError", "KeyError", "IndexError", "RuntimeError")):
            return Diagnosis(
                "mamba_radix_tree_corruption",
                f"the hybrid Mamba radix cache hit an inconsistent state while serving: {last[:120]}",
                "relaunch; to avoid it use `--mamba-scheduler-strategy extra_buffer` or `--disable-radix-cache`, "
                "and report the traceback upstream",
                last,
            )
    for e in excs:
        if e.startswith("KeyError") and ("load_weights" in text or "params_dict[" in text):
            return Diagnosis(
                "checkpoint_weight_mismatch",
                f"the checkpoint has a weight the model class does not expect ({e.removeprefix('KeyError: ')[:100]}): "
                "checkpoint and architecture/quantization do not match",
                "check the model path is the checkpoint you meant, give the --quantization it was exported for, "
                "or use an SGLang version that supports this checkpoint's layout",
                e,
            )
        if e.startswith("TypeError") and ("get_open_port" in text or ".bind(" in text):
            return Diagnosis(
                "invalid_port_config",
                f"a port setting is not a number: {e[:120]}",
                "give --port (and SGLANG_PORT, if set in the preset's env) as a plain integer in 1024-65535",
                e,
            )
    return None

"""Pull the numbers out of SGLang's startup lines (weights, KV pool, graphs, server_args), both 0.5.11 and 0.5.23."""

from __future__ import annotations

import re

from console.sglang.logstate import Facts

SECRET_WORDS = ("api_key", "token", "secret", "password")
"""server_args keys naming these are never kept (the 0.5.11 dump prints api_key in clear); see is_secret_key."""

_GB = r"(-?\d+(?:\.\d+)?) ?GB"
_AVAIL = re.compile(r"avail(?:able)?[ _]mem=" + _GB)
_MEM_USAGE = re.compile(r"mem usage=" + _GB)
_TYPE = re.compile(r"\btype=([\w.]+)")
_DTYPE = re.compile(r"\bdtype=(?:torch\.)?(\w+)")
_QUANT = re.compile(r"\bquant=(\w+)(?:, fmt=(\w+))?")
_KV_TOKENS = re.compile(r"#tokens: (\d+)")
_KV_SIZES = re.compile(r"\b(?:K|V|KV) size: " + _GB)
_KV_DTYPE = re.compile(r"\bdtype: (?:torch\.)?(\w+)")
_URL = re.compile(r"running on (\S+)")
_PID = re.compile(r"process \[(\d+)\]")
_BS_LIST = re.compile(r"\[([\d,\s]*)\]")
_KEYVAL = re.compile(r"(\w+)=([^,]+)")
_ARG = re.compile(r"""(?:\(|, |\{)'?(\w+)'?(?:=|: )('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^,)}]*)""")
_ARG_KEYS = {
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "attention_backend",
    "kv_cache_dtype",
    "quantization",
    "dtype",
    "mem_fraction_static",
    "context_length",
    "max_running_requests",
    "cuda_graph_max_bs",
    "host",
    "port",
    "disable_cuda_graph",
    "mamba_scheduler_strategy",
    "reasoning_parser",
    "tool_call_parser",
    "log_level",
    "enable_metrics",
    "chunked_prefill_size",
    "trust_remote_code",
    "disable_radix_cache",
    "nnodes",
    "node_rank",
}


def gib(pattern: re.Pattern[str], msg: str) -> float | None:
    m = pattern.search(msg)
    return float(m.group(1)) if m else None


def load_weight_end(msg: str) -> tuple[str | None, str | None, str | None, float | None, float | None]:
    """-> (model class, dtype, quant, weight GiB, avail GiB)."""
    t = _TYPE.search(msg)
    d = _DTYPE.search(msg)
    q = _QUANT.search(msg)
    quant = (q.group(1) + (f"/{q.group(2)}" if q.group(2) else "")) if q else None
    return (t.group(1) if t else None, d.group(1) if d else None, quant, gib(_MEM_USAGE, msg), gib(_AVAIL, msg))


def kv_allocated(msg: str, facts: Facts) -> int | None:
    """`KV Cache is allocated. [dtype: X, ]#tokens: N, K size: a GB, V size: b GB` (or `KV size:`)."""
    m = _KV_TOKENS.search(msg)
    tokens = int(m.group(1)) if m else None
    sizes = [float(x) for x in _KV_SIZES.findall(msg)]
    if facts.kv_tokens is None:
        facts.kv_tokens = tokens
    if sizes and facts.kv_size_gib is None:
        facts.kv_size_gib = round(sum(sizes), 2)
    d = _KV_DTYPE.search(msg)
    if d and facts.kv_cache_dtype is None:
        facts.kv_cache_dtype = d.group(1)
    return tokens


def scheduler_limits(msg: str, facts: Facts) -> None:
    """`max_total_num_tokens=N, chunked_prefill_size=.., max_prefill_tokens=.., max_running_requests=.., context_len=.., available_gpu_mem=.. GB`."""
    for k, v in _KEYVAL.findall(msg):
        v = v.strip()
        try:
            if k == "max_total_num_tokens":
                facts.max_total_num_tokens = int(v)
            elif k == "max_running_requests":
                facts.max_running_requests = int(v)
            elif k == "max_prefill_tokens":
                facts.max_prefill_tokens = int(v)
            elif k == "chunked_prefill_size":
                facts.chunked_prefill_size = int(v)
            elif k == "context_len":
                facts.context_len = int(v)
            elif k in ("available_gpu_mem", "available_cpu_mem"):
                facts.available_gpu_mem_gib = float(v.split()[0])
        except ValueError:
            continue


def capture_bs(msg: str) -> list[int] | None:
    m = _BS_LIST.search(msg)
    if not m:
        return None
    try:
        return [int(x) for x in m.group(1).replace(",", " ").split()]
    except ValueError:
        return None


def listen_url(msg: str) -> str | None:
    m = _URL.search(msg)
    return m.group(1) if m else None


def server_pid(msg: str) -> int | None:
    m = _PID.search(msg)
    return int(m.group(1)) if m else None


_WORDS = re.compile(r"[^a-z0-9]+")


def is_secret_key(key: str) -> bool:
    """api_key/admin_api_key/*secret*/*password*, or a `token` word (hf_token, auth_token) but not tokens/tokenizer."""
    k = key.lower()
    if "api_key" in k or "apikey" in k or "secret" in k or "password" in k:
        return True
    return "token" in _WORDS.split(k)


def server_args(msg: str, facts: Facts) -> None:
    """The one-line dump: `server_args=ServerArgs(k=v, ...)` (0.5.11) or `server_args={'k': v, ...}` (0.5.23)."""
    for k, v in _ARG.findall(msg):
        if k not in _ARG_KEYS or is_secret_key(k):
            continue
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        facts.args[k] = v
    a = facts.args
    facts.model_path = a.get("model_path") or facts.model_path
    facts.served_model_name = a.get("served_model_name") or facts.served_model_name
    for name in ("tp_size", "dp_size", "pp_size"):
        try:
            if name in a:
                setattr(facts, name, int(a[name]))
                if name == "tp_size":
                    facts.tp_size_at_least = False
        except ValueError:
            pass
    spec = a.get("speculative_algorithm")
    if spec and spec != "None":
        facts.speculative_algorithm = spec
    ab = a.get("attention_backend")
    if ab and ab != "None":
        facts.attention_backend = ab

"""Synthetic SGLang logs in the exact 0.5.11 / 0.5.23 formats of docs/sglang.md (for phases not in the samples)."""

from __future__ import annotations


def ts(sec: int) -> str:
    return f"2026-01-01 10:{sec // 60:02d}:{sec % 60:02d}"


def startup(
    tp: int = 2, version: str = "0.5.11", *, until: str = "serving", spec: bool = False, lag_rank: int | None = None
) -> str:
    """A TP=`tp` cold start; `until` cuts it after a phase; `lag_rank` stays in loading_weights."""
    out: list[str] = []
    pre = [f" TP{r}" if tp > 1 else "" for r in range(tp)]
    out.append(
        f"[{ts(0)}] server_args=ServerArgs(model_path='/m/Qwen3-8B', tp_size={tp}, dp_size=1, pp_size=1, "
        f"api_key='sk-SECRET', speculative_algorithm={'EAGLE' if spec else None!r}, served_model_name='qwen')"
    )
    for p in pre:
        out.append(f"[{ts(2)}{p}] Init torch distributed begin.")
    for p in pre:
        out.append(f"[{ts(3)}{p}] Init torch distributed ends. elapsed=0.50 s, mem usage=0.13 GB")
    for p in pre:
        out.append(f"[{ts(4)}{p}] Load weight begin. avail mem=78.50 GB")
    out.append(
        "Multi-thread loading shards:   0% Completed | 0/4 [00:00<?, ?it/s]\r"
        "Multi-thread loading shards:  50% Completed | 2/4 [00:03<00:03,  1.52s/it]"
    )
    if until == "loading_weights":
        return "\n".join(out) + "\n"
    out.append("Multi-thread loading shards: 100% Completed | 4/4 [00:06<00:00,  1.52s/it]")
    for r, p in enumerate(pre):
        if r == lag_rank:
            continue
        out.append(
            f"[{ts(14)}{p}] Load weight end. elapsed=10.00 s, type=Qwen3ForCausalLM, quant=fp8, fmt=e4m3, "
            f"avail mem=62.00 GB, mem usage=16.25 GB."
        )
    out.append(f"[{ts(14)}{pre[0]}] Using KV cache dtype: torch.bfloat16")
    for r, p in enumerate(pre):
        if r == lag_rank:
            continue
        if version == "0.5.11":
            out.append(f"[{ts(15)}{p}] KV Cache is allocated. #tokens: 400000, K size: 27.47 GB, V size: 27.47 GB")
        else:
            out.append(
                f"[{ts(15)}{p}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 400000, K size: 27.47 GB, V size: 27.47 GB"
            )
        out.append(f"[{ts(15)}{p}] Memory pool end. avail mem=6.50 GB")
    if until == "kv_cache":
        return "\n".join(out) + "\n"
    for r, p in enumerate(pre):
        if r == lag_rank:
            continue
        if version == "0.5.11":
            out.append(
                f"[{ts(16)}{p}] Capture cuda graph begin. This can take up to several minutes. avail mem=6.40 GB"
            )
        else:
            out.append(
                f"[{ts(16)}{p}] Capture target decode CUDA graph begin. backend=flashinfer, num_tokens_per_req=1, avail mem=6.40 GB"
            )
    out.append(f"[{ts(16)}{pre[0]}] Capture cuda graph bs [1, 2, 4, 8]")
    out.append(
        "Capturing batches (bs=8 avail_mem=6.30 GB):   0%|          | 0/4 [00:00<?, ?it/s]\r"
        "Capturing batches (bs=4 avail_mem=6.20 GB):  50%|█████     | 2/4 [00:01<00:01,  1.85it/s]"
    )
    if until == "cuda_graph":
        return "\n".join(out) + "\n"
    out.append("Capturing batches (bs=1 avail_mem=6.10 GB): 100%|██████████| 4/4 [00:02<00:00,  1.85it/s]")
    for p in pre:
        if version == "0.5.11":
            out.append(
                f"[{ts(20)}{p}] Capture cuda graph end. Time elapsed: 4.00 s. mem usage=0.40 GB. avail mem=6.00 GB."
            )
        else:
            out.append(
                f"[{ts(20)}{p}] Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=4.00 s, mem usage=0.40 GB, avail mem=6.00 GB."
            )
    if spec:
        for p in pre:
            out.append(f"[{ts(21)}{p}] Load weight begin. avail mem=6.00 GB")
        out.append("Multi-thread loading shards:   0% Completed | 0/1 [00:00<?, ?it/s]")
        out.append("Multi-thread loading shards: 100% Completed | 1/1 [00:01<00:00,  1.00s/it]")
        for p in pre:
            out.append(
                f"[{ts(22)}{p}] Load weight end. elapsed=1.00 s, type=LlamaForCausalLMEagle, avail mem=5.50 GB, mem usage=0.50 GB."
            )
            out.append(
                f"[{ts(23)}{p}] Capture draft cuda graph begin. This can take up to several minutes. avail mem=5.40 GB"
            )
            out.append(
                f"[{ts(25)}{p}] Capture draft cuda graph end. Time elapsed: 2.00 s. mem usage=0.10 GB. avail mem=5.30 GB."
            )
    out.append(
        f"[{ts(26)}{pre[0]}] max_total_num_tokens=400000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests=4096, context_len=40960, available_gpu_mem=6.00 GB"
    )
    out.append(f"[{ts(27)}] INFO:     Started server process [4242]")
    out.append(f"[{ts(27)}] INFO:     Waiting for application startup.")
    out.append(f"[{ts(27)}] INFO:     Application startup complete.")
    out.append(f"[{ts(27)}] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)")
    out.append(f'[{ts(28)}] INFO:     127.0.0.1:51234 - "GET /model_info HTTP/1.1" 200 OK')
    out.append(
        f"[{ts(28)}{pre[0]}] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 0.93"
    )
    if until == "warming":
        return "\n".join(out) + "\n"
    out.append(f'[{ts(29)}] INFO:     127.0.0.1:51240 - "POST /generate HTTP/1.1" 200 OK')
    out.append(f"[{ts(29)}] The server is fired up and ready to roll!")
    if until == "ready":
        return "\n".join(out) + "\n"
    for i, g in enumerate((100.0, 200.0, 300.0)):
        out.append(
            f"[{ts(40 + i)}{pre[0]}] Decode batch, #running-req: {i + 1}, #token: 512, token usage: 0.05, "
            + ("accept len: 3.41, accept rate: 0.81, " if spec else "")
            + f"cuda graph: True, gen throughput (token/s): {g:.2f}, #queue-req: {i}"
        )
    return "\n".join(out) + "\n"

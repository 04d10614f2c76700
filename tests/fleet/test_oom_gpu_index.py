"""A CUDA OOM names the physical GPU: torch counts devices after CUDA_VISIBLE_DEVICES, the fleet shows nvidia-smi's."""

from __future__ import annotations

from console.fleet.events import ServerMeta
from console.fleet.state import ServerState
from console.sglang.diagnose import diagnose_text
from console.sim.memory import torch_oom

ROOT = "/venv/lib/python3.11/site-packages/sglang/srt"


def _oom_log(dev: int) -> str:
    """The end of a serving replica's log when torch runs out of memory on its device `dev` (the sim's texts)."""
    return "\n".join(
        [
            '[2026-12-02 03:16:10] INFO:     127.0.0.1:37716 - "GET /health HTTP/1.1" 200 OK',
            "[2026-12-02 03:16:10] Scheduler hit an exception: Traceback (most recent call last):",
            f'  File "{ROOT}/managers/scheduler.py", line 3938, in run_scheduler_process',
            "    scheduler.event_loop_overlap()",
            f'  File "{ROOT}/managers/scheduler.py", line 1182, in event_loop_overlap',
            "    batch_result = self.run_batch(batch)",
            torch_oom(2.0, dev, 95.59, 0.3, 95.29),
            "[2026-12-02 03:16:10] SIGQUIT received. signum=3, frame=<frame at 0x7f>. It usually means one child failed.",
            "",
        ]
    )


def test_the_log_alone_says_its_index_is_torchs() -> None:
    """`diagnose FILE` cannot know CUDA_VISIBLE_DEVICES: torch's index is never called a GPU of nvidia-smi's."""
    _, d = diagnose_text(_oom_log(0))
    assert d is not None and "on cuda:0 of the process (which physical GPU is not known):" in d.summary, d
    assert "GPU 0" not in d.summary, d.summary


def test_diagnose_gpus_names_the_gpu_as_status_does(tmp_path, capsys) -> None:
    """`diagnose --gpus 1` said "GPU 0" where `status` said "GPU 1 (cuda:0 of the process)": one numbering."""
    from console.cli import main

    f = tmp_path / "oom.log"
    f.write_text(_oom_log(0))
    assert main(["diagnose", "--gpus", "1", str(f)]) == 1
    out = capsys.readouterr().out
    assert "CUDA out of memory on GPU 1 (cuda:0 of the process):" in out, out
    assert main(["diagnose", "--gpus", "0", str(f)]) == 1
    assert "CUDA out of memory on GPU 0:" in capsys.readouterr().out
    assert main(["diagnose", "--gpus", "x", str(f)]) == 2


def test_a_replica_on_gpu_1_is_told_oom_on_gpu_1() -> None:
    """qwen36-gen@blackwell:gpu1 (CUDA_VISIBLE_DEVICES=1) printed 'GPU 0': the pane said 'on GPU 0' of a GPU-1 server."""
    s = ServerState(ServerMeta(name="gen@bw:gpu1", host="bw", gpus=(1,), port=31001, preset="gen"))
    s.log.feed(_oom_log(0).encode())
    d = s.log.diagnosis
    assert d is not None and d.cause.startswith("cuda_oom"), d
    assert "on GPU 1 (cuda:0 of the process)" in d.summary and "GPU 0:" not in d.summary, d.summary


def test_tp_ranks_map_through_their_group() -> None:
    s = ServerState(ServerMeta(name="p@bw:gpu2-3", host="bw", gpus=(2, 3), port=30000, preset="p"))
    s.log.feed(_oom_log(1).encode())
    d = s.log.diagnosis
    assert d is not None and "on GPU 3 (cuda:1 of the process)" in d.summary, d.summary


def test_an_external_servers_order_is_unknown_so_the_log_is_quoted() -> None:
    """An external server's GPUs come from nvidia-smi's process list, not its CUDA_VISIBLE_DEVICES order."""
    s = ServerState(ServerMeta(name="external@bw:8000", host="bw", gpus=(1,), port=8000, managed=False))
    s.log.feed(_oom_log(0).encode())
    d = s.log.diagnosis
    assert d is not None and "on cuda:0 of the process (which physical GPU is not known):" in d.summary, d.summary

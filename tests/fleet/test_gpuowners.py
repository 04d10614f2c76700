"""GPU owners from fresh facts, pure: a TP=2 server's ranks are one owner, a stop waits for its own pids only."""

from __future__ import annotations

from console.fleet import gpuowners
from console.fleet.events import ProcInfo, ServerMeta
from console.gpu.readings import ComputeApp, GpuReading

U0, U1 = "GPU-aaaa", "GPU-bbbb"
SRV = ServerMeta(name="qwen@h100:gpu0-1", host="h100", gpus=(0, 1), port=30000, preset="qwen", pid=530, sid=530)
PROCS = [
    ProcInfo(530, 1, 530, "python3 -m sglang.launch_server --tp-size 2"),
    ProcInfo(531, 530, 530, "sglang::scheduler_TP0"),
    ProcInfo(532, 530, 530, "sglang::scheduler_TP1"),
    ProcInfo(698, 1, 698, "python3 hog.py"),
]
ROWS = [GpuReading(0, U0, memory_used_mib=60000, memory_total_mib=81559), GpuReading(1, U1, memory_used_mib=40000)]
APPS = [
    ComputeApp(531, U0, "sglang::scheduler_TP0", 40000),
    ComputeApp(532, U1, "sglang::scheduler_TP1", 40000),
    ComputeApp(698, U0, "/usr/bin/python3", 20000),
]


def test_a_servers_ranks_are_one_owner_and_a_bare_process_another() -> None:
    hs = gpuowners.holders([SRV], PROCS, APPS, {U0: 0, U1: 1})
    assert [(h.key, h.mib) for h in hs] == [("qwen@h100:gpu0-1", {0: 40000, 1: 40000}), ("pid 698", {0: 20000})]
    assert hs[0].label == "qwen@h100:gpu0-1 (pid 530, preset qwen)" and hs[1].short == "python3 pid 698"


def test_a_restart_leaves_its_own_server_out() -> None:
    hs = gpuowners.holders([SRV], PROCS, APPS, {U0: 0, U1: 1}, leaving=SRV)
    assert [h.key for h in hs] == ["pid 698"]


def test_a_stop_waits_for_its_own_ranks_then_names_the_others() -> None:
    own = gpuowners.session_pids(SRV, PROCS)
    assert own == {530, 531, 532}
    r = gpuowners.release(SRV, own, PROCS[1:], ROWS, APPS, [], 1024)
    assert r.waiting and "pid 531" in r.waiting[0]
    gone = gpuowners.release(SRV, own, PROCS[3:], [ROWS[0], GpuReading(1, U1, memory_used_mib=0)], APPS[2:], [], 1024)
    assert not gone.waiting
    assert gone.others == ["GPU 0 still holds 58.6 GiB: python3 pid 698"] and gone.free == ["GPU 1 0 MiB"]


def test_headroom_is_what_mem_fraction_static_leaves() -> None:
    assert gpuowners.headroom_mib(["--mem-fraction-static", "0.75"], 80000) == 20000
    assert gpuowners.headroom_mib(["--mem-fraction-static=0.5"], 80000) == 40000
    assert gpuowners.headroom_mib([], 80000) == int(80000 * (1 - gpuowners.DEFAULT_MEM_FRACTION))

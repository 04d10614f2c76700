"""`nvidia-smi` stand-in: the real tool's query CSV, loop, -L, --version and table formats, from the state file.

Run as `python -m console.sim.nvsmi --host-dir DIR ARGS` by the host's `bin/nvidia-smi`. Header
names, units, `[N/A]`, error texts and the table layout follow the real captures in tests/samples/nvidia-smi/.
Utilisation comes from the sim servers' load; temperature, power and clocks follow it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.sim import state
from console.sim.spec import GpuSpec, SimHostSpec, load_spec

RESERVED_MIB = 598
"""Driver-reserved VRAM: memory.free = total - used - reserved (a real A6000: 49140 - 35 - 48507)."""


@dataclass(frozen=True)
class GpuNow:
    """One GPU's live numbers."""

    index: int
    spec: GpuSpec
    used: int
    util: float
    procs: list[dict[str, Any]]
    t: float

    @property
    def free(self) -> int:
        return max(0, self.spec.memory_mib - self.used - RESERVED_MIB)

    @property
    def mem_util(self) -> int:
        return round(self.util * 0.24)

    @property
    def temp(self) -> int:
        return round(self.spec.idle_temp_c + self.util * 0.3 + (3 if self.procs else 0))

    @property
    def power(self) -> float:
        s = self.spec
        wobble = 1.0 + 0.004 * math.sin(self.t * 7.0 + self.index)
        base = s.idle_power_w * (1.3 if self.procs else 1.0)
        return min(s.power_limit_w, (base + (s.power_limit_w - base) * self.util / 100 * 0.98) * wobble)

    @property
    def sm_clock(self) -> int:
        s = self.spec
        if self.util > 0:
            return round(s.sm_clock_max * (0.82 + 0.0015 * self.util))
        return round(s.sm_clock_max * 0.6) if self.procs else s.sm_clock_idle

    @property
    def pstate(self) -> str:
        return "P2" if self.procs and self.spec.fan else "P0" if self.procs or not self.spec.fan else "P8"


def read_gpus(host_dir: Path, spec: SimHostSpec) -> list[GpuNow]:
    now = time.time()
    totals = state.gpu_totals(host_dir, len(spec.gpus))
    return [
        GpuNow(i, g, g.base_used_mib + used, util, procs, now)
        for i, (g, (used, util, procs)) in enumerate(zip(spec.gpus, totals, strict=True))
    ]


def _mib(v: int, units: bool) -> str:
    return f"{v} MiB" if units else str(v)


def _pct(v: float, units: bool) -> str:
    return f"{round(v)} %" if units else str(round(v))


def _w(v: float, units: bool) -> str:
    return f"{v:.2f} W" if units else f"{v:.2f}"


def _mhz(v: int, units: bool) -> str:
    return f"{v} MHz" if units else str(v)


Getter = Callable[[GpuNow, SimHostSpec, bool], str]
# query name -> (header as printed, getter)
GPU_FIELDS: dict[str, tuple[str, Getter]] = {
    "index": ("index", lambda g, s, u: str(g.index)),
    "uuid": ("uuid", lambda g, s, u: g.spec.uuid),
    "gpu_uuid": ("uuid", lambda g, s, u: g.spec.uuid),
    "name": ("name", lambda g, s, u: g.spec.name),
    "gpu_name": ("name", lambda g, s, u: g.spec.name),
    "pci.bus_id": ("pci.bus_id", lambda g, s, u: g.spec.pci_bus_id),
    "gpu_bus_id": ("pci.bus_id", lambda g, s, u: g.spec.pci_bus_id),
    "count": ("count", lambda g, s, u: str(len(s.gpus))),
    "driver_version": ("driver_version", lambda g, s, u: s.driver_version),
    "persistence_mode": ("persistence_mode", lambda g, s, u: "Enabled" if g.spec.persistence == "On" else "Disabled"),
    "pstate": ("pstate", lambda g, s, u: g.pstate),
    "memory.total": ("memory.total [MiB]", lambda g, s, u: _mib(g.spec.memory_mib, u)),
    "memory.reserved": ("memory.reserved [MiB]", lambda g, s, u: _mib(RESERVED_MIB, u)),
    "memory.used": ("memory.used [MiB]", lambda g, s, u: _mib(g.used, u)),
    "memory.free": ("memory.free [MiB]", lambda g, s, u: _mib(g.free, u)),
    "utilization.gpu": ("utilization.gpu [%]", lambda g, s, u: _pct(g.util, u)),
    "utilization.memory": ("utilization.memory [%]", lambda g, s, u: _pct(g.mem_util, u)),
    "temperature.gpu": ("temperature.gpu", lambda g, s, u: str(g.temp)),
    "temperature.memory": ("temperature.memory", lambda g, s, u: "N/A"),
    "fan.speed": ("fan.speed [%]", lambda g, s, u: _pct(30 + g.util * 0.4, u) if g.spec.fan else "[N/A]"),
    "power.draw": ("power.draw [W]", lambda g, s, u: _w(g.power, u)),
    "power.draw.instant": ("power.draw.instant [W]", lambda g, s, u: _w(g.power, u)),
    "power.limit": ("power.limit [W]", lambda g, s, u: _w(g.spec.power_limit_w, u)),
    "enforced.power.limit": ("enforced.power.limit [W]", lambda g, s, u: _w(g.spec.power_limit_w, u)),
    "clocks.sm": ("clocks.current.sm [MHz]", lambda g, s, u: _mhz(g.sm_clock, u)),
    "clocks.current.sm": ("clocks.current.sm [MHz]", lambda g, s, u: _mhz(g.sm_clock, u)),
    "clocks.max.sm": ("clocks.max.sm [MHz]", lambda g, s, u: _mhz(g.spec.sm_clock_max, u)),
    "compute_mode": ("compute_mode", lambda g, s, u: "Default"),
    "timestamp": (
        "timestamp",
        lambda g, s, u: time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(g.t)) + f".{int(g.t * 1000) % 1000:03d}",
    ),
}

APP_FIELDS: dict[str, str] = {
    "pid": "pid",
    "gpu_uuid": "gpu_uuid",
    "gpu_name": "gpu_name",
    "gpu_bus_id": "gpu_bus_id",
    "process_name": "process_name",
    "name": "process_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
}


class Usage(Exception):
    """A command-line problem: message text and exit status as the real tool."""

    def __init__(self, text: str, rc: int) -> None:
        super().__init__(text)
        self.text, self.rc = text, rc


def _split_fields(spec_text: str) -> list[str]:
    return [f.strip() for f in spec_text.split(",") if f.strip()]


def query_gpu_lines(gpus: list[GpuNow], spec: SimHostSpec, fields: list[str], header: bool, units: bool) -> list[str]:
    for f in fields:
        if f not in GPU_FIELDS:
            raise Usage(f'Field "{f}" is not a valid field to query.\n\n', 2)
    out = [", ".join(GPU_FIELDS[f][0] for f in fields)] if header else []
    out += [", ".join(GPU_FIELDS[f][1](g, spec, units) for f in fields) for g in gpus]
    return out


def query_app_lines(gpus: list[GpuNow], fields: list[str], header: bool, units: bool) -> list[str]:
    for f in fields:
        if f not in APP_FIELDS:
            raise Usage(f'Field "{f}" is not a valid field to query.\n\n', 2)
    out = [", ".join(APP_FIELDS[f] for f in fields)] if header else []
    for g in gpus:
        for p in sorted(g.procs, key=lambda e: e["pid"]):
            vals = {
                "pid": str(p["pid"]),
                "gpu_uuid": g.spec.uuid,
                "gpu_name": g.spec.name,
                "gpu_bus_id": g.spec.pci_bus_id,
                "process_name": p.get("name", "python3"),
                "used_memory": _mib(int(p["gpus"][str(g.index)]), units),
            }
            vals["name"] = vals["process_name"]
            vals["used_gpu_memory"] = vals["used_memory"]
            out.append(", ".join(vals[f] for f in fields))
    return out


def _proc_name(name: str) -> str:
    return name if len(name) <= 32 else "..." + name[-29:]


def table(gpus: list[GpuNow], spec: SimHostSpec, now: float | None = None) -> list[str]:
    """The default `nvidia-smi` view (driver 580 layout, 91 columns)."""
    sep = "+-----------------------------------------+------------------------+----------------------+"
    full = "+" + "-" * 89 + "+"
    out = [
        time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(now or time.time())) + "       ",
        full,
        f"| NVIDIA-SMI {spec.driver_version:<23}Driver Version: {spec.driver_version:<15}"
        f"CUDA Version: {spec.cuda_version:<9}|",
        sep,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for g in gpus:
        s = g.spec
        name = s.name if len(s.name) <= 27 else s.name[:24] + "..."
        fan = f"{round(30 + g.util * 0.4)}%" if s.fan else "N/A"
        ecc, mig, disp = ("Off", "N/A", "On" if s.base_used_mib else "Off") if s.fan else ("0", "Disabled", "Off")
        out += [
            f"| {g.index:>3}  {name:<31}{s.persistence:<3} |   {s.pci_bus_id:<16} {disp:>3} | {ecc:>20} |",
            f"| {fan:>3}   {g.temp:>2}C    {g.pstate:<2}{round(g.power):>15}W / {round(s.power_limit_w):>4}W |"
            f" {g.used:>7}MiB / {s.memory_mib:>6}MiB | {round(g.util):>6}%      Default |",
            f"|                                         |                        | {mig:>20} |",
            sep,
        ]
    out += [
        "",
        full,
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
    ]
    rows = [
        f"|  {g.index:>3}   N/A  N/A  {p['pid']:>14}      C   {_proc_name(p.get('name', 'python3')):<33}"
        f"{int(p['gpus'][str(g.index)]):>10}MiB |"
        for g in gpus
        for p in sorted(g.procs, key=lambda e: e["pid"])
    ]
    out += rows or ["|  No running processes found" + " " * 61 + "|"]
    out.append(full)
    return out


def _kv(indent: int, key: str, val: object) -> str:
    pad = " " * indent
    return f"{pad}{key:<{55 - indent}}: {val}"


def query_long(gpus: list[GpuNow], spec: SimHostSpec, sections: list[str]) -> list[str]:
    """`nvidia-smi -q -d MEMORY,UTILIZATION` (tests/samples/nvidia-smi/h200-real/q-memory-util.txt)."""
    t = gpus[0].t if gpus else time.time()
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        _kv(0, "Timestamp", time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(t))),
        _kv(0, "Driver Version", spec.driver_version),
        _kv(0, "CUDA Version", spec.cuda_version),
        "",
        _kv(0, "Attached GPUs", len(spec.gpus)),
    ]
    for g in gpus:
        out.append(f"GPU {g.spec.pci_bus_id}")
        if not sections or "MEMORY" in sections:
            out += [
                "    FB Memory Usage",
                _kv(8, "Total", f"{g.spec.memory_mib} MiB"),
                _kv(8, "Reserved", f"{RESERVED_MIB} MiB"),
                _kv(8, "Used", f"{g.used} MiB"),
                _kv(8, "Free", f"{g.free} MiB"),
                "    BAR1 Memory Usage",
                _kv(8, "Total", "262144 MiB"),
                _kv(8, "Used", f"{g.used + 1 if g.used else 1} MiB"),
                _kv(8, "Free", f"{262144 - (g.used + 1 if g.used else 1)} MiB"),
                "    Conf Compute Protected Memory Usage",
                _kv(8, "Total", "0 MiB"),
                _kv(8, "Used", "0 MiB"),
                _kv(8, "Free", "0 MiB"),
            ]
        if not sections or "UTILIZATION" in sections:
            u, m = round(g.util), g.mem_util
            out += [
                "    Utilization",
                _kv(8, "GPU", f"{u} %"),
                _kv(8, "Memory", f"{m} %"),
                _kv(8, "Encoder", "0 %"),
                _kv(8, "Decoder", "0 %"),
                _kv(8, "JPEG", "0 %"),
                _kv(8, "OFA", "0 %"),
            ]
            for name, v in (("GPU", u), ("Memory", m), ("ENC", 0), ("DEC", 0), ("JPG", 0), ("OFA", 0)):
                out += [
                    f"    {name} Utilization Samples",
                    _kv(8, "Duration", "14.00 sec"),
                    _kv(8, "Number of Samples", 71),
                    _kv(8, "Max", f"{v} %"),
                    _kv(8, "Min", "0 %"),
                    _kv(8, "Avg", f"{v // 2} %"),
                ]
    return [*out, ""]


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "query_gpu": None,
        "query_apps": None,
        "format": "",
        "loop": None,
        "ids": None,
        "list": False,
        "version": False,
        "long": False,
        "sections": [],
    }
    i = 0
    while i < len(argv):
        a = argv[i]
        key, eq, val = a.partition("=")
        needs = {
            "--query-gpu": "query_gpu",
            "--query-compute-apps": "query_apps",
            "--format": "format",
            "-l": "loop_s",
            "--loop": "loop_s",
            "-lms": "loop_ms",
            "--loop-ms": "loop_ms",
            "-i": "ids",
            "--id": "ids",
        }
        if key in needs:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise Usage(f"Option {key} requires an argument.\n\n", 2)
                val = argv[i]
            name = needs[key]
            if name == "loop_s":
                opts["loop"] = float(val)
            elif name == "loop_ms":
                opts["loop"] = float(val) / 1000
            elif name == "ids":
                opts["ids"] = [v.strip() for v in val.split(",")]
            else:
                opts[name] = val
        elif a in ("-L", "--list-gpus"):
            opts["list"] = True
        elif a == "--version":
            opts["version"] = True
        elif a in ("-q", "--query"):
            opts["long"] = True
        elif key in ("-d", "--display"):
            if not eq:
                i += 1
                val = argv[i] if i < len(argv) else ""
            opts["sections"] = [v.strip().upper() for v in val.split(",") if v.strip()]
        else:
            raise Usage("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2)
        i += 1
    return opts


def select(gpus: list[GpuNow], ids: list[str] | None) -> list[GpuNow]:
    if ids is None:
        return gpus
    out = []
    for want in ids:
        hit = [g for g in gpus if want in (str(g.index), g.spec.uuid, g.spec.pci_bus_id)]
        if not hit:
            raise Usage("No devices were found\n", 6)
        out += hit
    return out


def render(host_dir: Path, spec: SimHostSpec, opts: dict[str, Any]) -> list[str]:
    gpus = select(read_gpus(host_dir, spec), opts["ids"])
    fmt = [f.strip() for f in opts["format"].split(",")]
    header, units = "noheader" not in fmt, "nounits" not in fmt
    if opts["query_gpu"] is not None:
        return query_gpu_lines(gpus, spec, _split_fields(opts["query_gpu"]), header, units)
    if opts["query_apps"] is not None:
        return query_app_lines(gpus, _split_fields(opts["query_apps"]), header, units)
    if opts["long"]:
        return query_long(gpus, spec, opts["sections"])
    if opts["list"]:
        return [f"GPU {g.index}: {g.spec.name} (UUID: {g.spec.uuid})" for g in gpus]
    return table(gpus, spec)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "--host-dir":
        print("usage: python -m console.sim.nvsmi --host-dir DIR [nvidia-smi args]", file=sys.stderr)
        return 2
    host_dir, args = Path(args[1]), args[2:]
    spec = load_spec(host_dir)
    if "nvidia-smi-hang" in spec.faults:
        while True:
            time.sleep(3600)
    if "nvidia-smi-driver" in spec.faults:
        print(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n"
        )
        return 9
    if "nvidia-smi-garbage" in spec.faults:
        print("\x00\x1b[31m??GPU@@ 0xDEADBEEF ,,,, Unknown Error\n%%%")
        return 0
    try:
        opts = parse_args(args)
        if opts["version"]:
            major = spec.driver_version.rsplit(".", 1)[0]
            print(
                f"NVIDIA-SMI version  : {spec.driver_version}\nNVML version        : {major}\n"
                f"DRIVER version      : {spec.driver_version}\nCUDA Version        : {spec.cuda_version}"
            )
            return 0
        first = True
        while True:
            lines = render(host_dir, spec, opts)
            if not first and (opts["query_gpu"] is not None or opts["query_apps"] is not None):
                fmt = opts["format"]
                if "noheader" not in fmt:
                    lines = lines[1:]
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
            first = False
            if opts["loop"] is None:
                return 0
            time.sleep(max(0.01, opts["loop"]))
    except Usage as e:
        sys.stdout.write(e.text)
        sys.stdout.flush()
        return e.rc
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())

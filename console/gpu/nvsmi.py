"""nvidia-smi query building and CSV parsing (pure), so telemetry never trusts a line it cannot read.

The console asks for `--format=csv,noheader,nounits`, but parsing also accepts headers and units
(`143771 MiB`, `100 %`, `690.01 W`) and `[N/A]`/`[Not Supported]`, which become None.
"""

from __future__ import annotations

import shlex

from console.gpu.readings import ComputeApp, GpuReading
from console.linecap import LineCap

GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.used",
    "memory.total",
    "memory.free",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
)
APP_FIELDS = ("pid", "gpu_uuid", "process_name", "used_memory")
_NA = {
    "[n/a]",
    "n/a",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[gpu is lost]",
    "[insufficient permissions]",
    "",
}
_UNITS = (" MiB", " %", " W", " MHz", " C")


class NvsmiParseError(ValueError):
    """A line that is not a CSV row of the fields we asked for."""


def query_gpu_command(interval_ms: int | None = None, exe: str = "nvidia-smi") -> str:
    """`nvidia-smi --query-gpu=... --format=csv,noheader,nounits [-lms N]` (one long-lived process)."""
    cmd = [exe, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"]
    if interval_ms:
        cmd += ["-lms", str(int(interval_ms))]
    return shlex.join(cmd)


def query_apps_command(exe: str = "nvidia-smi") -> str:
    return shlex.join([exe, "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"])


def _cells(line: str) -> list[str]:
    # GPU names never contain commas; process names might, so the caller splits apps specially.
    return [c.strip() for c in line.split(",")]


def _clean(v: str) -> str | None:
    v = v.strip()
    if not v or (v[0] in "[nNuU" and v.lower() in _NA):  # figures (most cells) start with a digit
        return None
    if v.endswith(_UNITS):  # only without `nounits`
        for u in _UNITS:
            if v.endswith(u):
                return v[: -len(u)].strip()
    return v


def _int(v: str) -> int | None:
    c = _clean(v)
    if c is None:
        return None
    if c.isdigit():
        return int(c)
    try:
        return int(float(c))
    except ValueError:
        raise NvsmiParseError(f"not a number: {v!r}") from None


def _float(v: str) -> float | None:
    c = _clean(v)
    if c is None:
        return None
    try:
        return float(c)
    except ValueError:
        raise NvsmiParseError(f"not a number: {v!r}") from None


def is_header(line: str) -> bool:
    return line.lstrip().startswith(("index,", "pid,"))


def parse_gpu_line(line: str, fields: tuple[str, ...] = GPU_FIELDS) -> GpuReading:
    """One `--query-gpu` row (fields in `fields` order) -> GpuReading; raises NvsmiParseError."""
    cells = _cells(line)
    if len(cells) != len(fields):
        raise NvsmiParseError(f"expected {len(fields)} fields, got {len(cells)}: {line[:120]!r}")
    row = dict(zip(fields, cells, strict=True))
    idx = _int(row.get("index", ""))
    if idx is None or idx < 0:
        raise NvsmiParseError(f"no GPU index in {line[:120]!r}")
    text = {k: (_clean(row[k]) or "") for k in ("uuid", "name", "pci.bus_id") if k in row}
    if "uuid" in row and text["uuid"] and not text["uuid"].startswith(("GPU-", "MIG-")):
        raise NvsmiParseError(f"not a GPU uuid: {text['uuid']!r}")

    def i(k: str) -> int | None:
        return _int(row[k]) if k in row else None

    def f(k: str) -> float | None:
        return _float(row[k]) if k in row else None

    return GpuReading(
        index=idx,
        uuid=text.get("uuid", ""),
        name=text.get("name", ""),
        pci_bus_id=text.get("pci.bus_id", ""),
        memory_used_mib=i("memory.used"),
        memory_total_mib=i("memory.total"),
        utilization_pct=i("utilization.gpu"),
        memory_util_pct=i("utilization.memory"),
        temperature_c=i("temperature.gpu"),
        power_w=f("power.draw"),
        power_limit_w=f("power.limit"),
        clocks_sm_mhz=i("clocks.sm"),
    )


def parse_gpu_csv(text: str, fields: tuple[str, ...] = GPU_FIELDS) -> list[GpuReading]:
    """All rows of a `--query-gpu` answer (header lines skipped); raises on any garbage row."""
    return [parse_gpu_line(ln, fields) for ln in text.splitlines() if ln.strip() and not is_header(ln)]


def parse_app_line(line: str) -> ComputeApp:
    """`pid, gpu_uuid, process_name, used_memory`; the name may itself hold commas."""
    cells = _cells(line)
    if len(cells) < 4:
        raise NvsmiParseError(f"expected 4 fields, got {len(cells)}: {line[:120]!r}")
    pid = _int(cells[0])
    uuid = cells[1]
    if pid is None or not uuid.startswith(("GPU-", "MIG-")):
        raise NvsmiParseError(f"not a compute-app row: {line[:120]!r}")
    name = ", ".join(cells[2:-1])
    return ComputeApp(pid=pid, gpu_uuid=uuid, process_name=name, used_mib=_int(cells[-1]))


def parse_apps_csv(text: str) -> list[ComputeApp]:
    """Rows of `--query-compute-apps`; `No running processes found` and headers yield nothing."""
    out = []
    for ln in text.splitlines():
        s = ln.strip()
        if not s or is_header(s) or s.lower().startswith("no running"):
            continue
        out.append(parse_app_line(s))
    return out


def error_text(text: str) -> str | None:
    """The tool's own failure message, if `text` is one (driver down, bad field, not found)."""
    for ln in text.splitlines():
        s = ln.strip()
        low = s.lower()
        if (
            "has failed" in low
            or "is not a valid field" in low
            or "not found" in low
            or "no devices were found" in low
            or "couldn't communicate" in low
        ):
            return s
    return None


MAX_LINE = 64 * 1024
"""A `--query-gpu` CSV line is about 200 characters; nvidia-smi output with no newline stops here."""


class GpuLineBuffer:
    """Groups an `-lms` stream (one line per GPU per tick, no marker) into complete samples.

    A tick ends when a GPU index repeats or goes down (0,1,2,0 → the first tick was 0,1,2), or
    when the caller flushes after a quiet gap.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._partial = ""
        self._cap: LineCap[str] = LineCap(max_line)
        self._tick: list[GpuReading] = []
        self._n = 0
        """GPUs per tick, learned from the first complete tick: lets a tick end without waiting."""

    def feed(self, data: str) -> tuple[list[list[GpuReading]], list[str]]:
        """Returns (complete samples, garbage lines); a line past max_line is garbage at once, its rest dropped."""
        buf = self._partial + self._cap.feed(data)
        lines = buf.split("\n")
        self._partial = lines.pop()
        samples: list[list[GpuReading]] = []
        bad: list[str] = []
        if self._cap.cutting and self._partial:
            bad.append(f"a line longer than {self._cap.limit} characters: {self._partial[:100]}")
            self._partial = ""
        for ln in lines:
            s = ln.strip()
            if not s or is_header(s):
                continue
            try:
                r = parse_gpu_line(s)
            except NvsmiParseError:
                bad.append(s)
                continue
            if self._tick and r.index <= self._tick[-1].index:
                self._n = len(self._tick)
                samples.append(self._tick)
                self._tick = []
            self._tick.append(r)
            if self._n and len(self._tick) >= self._n:
                samples.append(self._tick)
                self._tick = []
        return samples, bad

    def flush(self) -> list[GpuReading] | None:
        tick, self._tick = self._tick, []
        if tick:
            self._n = len(tick)
        return tick or None

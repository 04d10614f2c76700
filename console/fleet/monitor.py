"""Remote monitor loops and their parsers: one long-lived process loop (ps + compute apps) per host.

The loop is a POSIX sh script on one channel: every second it prints the process table of every
session holding an SGLang process (so all TP ranks are joined to their server by session id), and
every few seconds `nvidia-smi --query-compute-apps`, each framed by `==> NAME` markers. Steady
state costs no exec request at all; a dead server is seen within ~1 s.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from console.fleet.events import ProcInfo, ServerMeta
from console.gpu import nvsmi
from console.gpu.readings import ComputeApp

SGLANG_RE = r"sglang[.]launch_server|sglang:[:]|sglang[ ]serve"
"""Matches SGLang's processes but not this text itself (as written in the loop's own argv)."""
_SHELL_C = r"(?:\S*(?:setsid|nohup)\s+)*(?:\S*/)?(?:ba|da|z|k|a)?sh\s+(?:-\w+\s+)*?-\w*c\w*\s"
_MAIN_RE = re.compile(rf"^(?!{_SHELL_C}).*?(?:^|\s)(?:-m\s+sglang\.launch_server|\S*sglang\s+serve)(?:\s|$)")
"""A server's main process: the interpreter running SGLang, not a shell whose `-c` script names it. Such a shell runs
nothing of SGLang: the console's launch script and its gate waiting for meta.json (a launch that fails at meta.json
was shown as an external server until the next sample), or `ssh host 'nohup python -m sglang.launch_server &'`.
A shell that stays as a wrapper leaves its child, the interpreter, as the main process."""


def proc_loop_command(interval_s: float = 1.0, apps_every: int = 3) -> str:
    """The remote process loop, as one `sh -c` command line."""
    apps = nvsmi.query_apps_command()
    script = f"""
T=; command -v timeout >/dev/null 2>&1 && T="timeout 3"
i=0; skip=0
while :; do
  echo "==> ps $(date +%s.%N)"
  ps -ww -eo pid=,ppid=,sid=,args= 2>/dev/null | awk '{{l[NR]=$0; s[NR]=$3; if ($0 ~ /{SGLANG_RE}/) k[$3]=1}} END {{for (j=1;j<=NR;j++) if (s[j] in k) print l[j]}}'
  if [ "$skip" -gt 0 ]; then skip=$((skip-1)); elif [ $((i % {apps_every})) -eq 0 ]; then
    echo "==> apps"
    $T {apps} 2>&1; rc=$?
    echo "==> rc $rc"
    [ "$rc" -ne 0 ] && skip=20
  fi
  echo "==> end"
  i=$((i+1))
  sleep {interval_s:g}
done"""
    return "exec sh -c " + shlex.quote(script)


def parse_ps(text: str) -> list[ProcInfo]:
    """`ps -eo pid=,ppid=,sid=,args=` lines -> ProcInfo (bad lines and zombies, `[name] <defunct>`, skipped:
    an unreaped dead rank keeps SGLang's `sglang::scheduler` name but runs nothing)."""
    out = []
    for ln in text.splitlines():
        parts = ln.split(None, 3)
        if len(parts) < 3:
            continue
        try:
            pid, ppid, sid = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            continue
        args = parts[3] if len(parts) > 3 else ""
        if args.endswith("<defunct>"):
            continue
        out.append(ProcInfo(pid, ppid, sid, args))
    return out


@dataclass
class ProcFrame:
    """One complete loop iteration."""

    procs: list[ProcInfo]
    apps: list[ComputeApp] | None = None
    """None when this iteration did not query apps."""
    apps_error: str | None = None
    remote_time: float | None = None
    """The host's clock when ps ran (`date +%s.%N`); None where date cannot print that."""
    sampled_at: float | None = None
    """Local time the frame's `==> ps` header arrived: ps ran after this (so after any launch before it)."""


@dataclass
class ProcFrameParser:
    """Bytes of the process loop in, complete frames out."""

    _partial: str = ""
    _section: str | None = None
    _lines: dict[str, list[str]] = field(default_factory=dict)
    _rc: int | None = None
    _rtime: float | None = None
    _t_ps: float | None = None

    def feed(self, data: bytes, now: float | None = None) -> list[ProcFrame]:
        buf = self._partial + data.decode("utf-8", "replace")
        lines = buf.split("\n")
        self._partial = lines.pop()
        frames = []
        for ln in lines:
            if ln.startswith("==> "):
                head = ln[4:].split()
                tag = head[0] if head else ""
                if tag == "ps":
                    self._lines, self._rc, self._t_ps = {"ps": []}, None, now
                    self._rtime = _float(head[1]) if len(head) > 1 else None
                    self._section = "ps"
                elif tag == "apps":
                    self._lines["apps"] = []
                    self._section = "apps"
                elif tag == "rc":
                    self._rc = int(head[1]) if len(head) > 1 and head[1].lstrip("-").isdigit() else None
                    self._section = None
                elif tag == "end":
                    f = self._frame()
                    if f is not None:
                        frames.append(f)
                    self._section = None
                continue
            if self._section is not None:
                self._lines.setdefault(self._section, []).append(ln)
        return frames

    def _frame(self) -> ProcFrame | None:
        if "ps" not in self._lines:
            return None
        f = ProcFrame(parse_ps("\n".join(self._lines["ps"])), remote_time=self._rtime, sampled_at=self._t_ps)
        if "apps" in self._lines:
            text = "\n".join(self._lines["apps"])
            err = nvsmi.error_text(text)
            if self._rc == 124:
                f.apps_error = "nvidia-smi --query-compute-apps timed out"
            elif self._rc not in (0, None) or err:
                f.apps_error = (
                    f"nvidia-smi --query-compute-apps failed: {err or text.strip()[:200] or f'exit {self._rc}'}"
                )
            else:
                try:
                    f.apps = nvsmi.parse_apps_csv(text)
                except nvsmi.NvsmiParseError as e:
                    f.apps_error = f"nvidia-smi printed garbage: {e}"
        self._lines = {}
        return f


def _float(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


# -- external servers (ps) ----------------------------------------------------------------------
def flag_value(args: list[str], *names: str) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1 :]
    return None


def sglang_mains(procs: list[ProcInfo]) -> list[ProcInfo]:
    """SGLang server main processes (not their TP/detokenizer children)."""
    mains = [p for p in procs if _MAIN_RE.search(p.args)]
    pids = {p.pid for p in mains}
    return [p for p in mains if p.ppid not in pids]


def external_meta(host: str, p: ProcInfo, gpus: tuple[int, ...]) -> ServerMeta:
    """A server the console did not start, described from its command line."""
    from console.fleet.journal import mask_argv

    try:
        args = shlex.split(p.args)
    except ValueError:
        args = p.args.split()
    port_s = flag_value(args, "--port")
    port = int(port_s) if port_s and port_s.isdigit() else 30000
    model = flag_value(args, "--model-path", "--model") or "?"
    return ServerMeta(
        name=f"external@{host}:{port}",
        host=host,
        gpus=gpus,
        port=port,
        preset=None,
        managed=False,
        pid=p.pid,
        sid=p.sid,
        argv=tuple(mask_argv(args)),
        command=f"model {model}",
        launch_id=f"ext-{p.pid}",
    )


def gpus_of_session(
    sid: int, procs: list[ProcInfo], apps: list[ComputeApp], uuid_index: dict[str, int]
) -> tuple[int, ...]:
    sids = {p.pid: p.sid for p in procs}
    return tuple(sorted({uuid_index[a.gpu_uuid] for a in apps if sids.get(a.pid) == sid and a.gpu_uuid in uuid_index}))


def external_servers(
    host: str,
    procs: list[ProcInfo],
    apps: list[ComputeApp],
    uuid_index: dict[str, int],
    managed_sids: set[int],
    managed_pids: set[int | None],
    shares_process_table: bool,
) -> list[ServerMeta]:
    """The SGLang servers in a process sample that the console did not start (not a managed session or pid), in
    ps order. With a shared process table (several `local` hosts) one holding no GPU of this host is left out."""
    out: list[ServerMeta] = []
    for p in sglang_mains(procs):
        if p.sid in managed_sids or p.pid in managed_pids:
            continue
        gpus = gpus_of_session(p.sid, procs, apps, uuid_index)
        if not gpus and shares_process_table:
            continue  # another local host's server: only the GPUs it holds tell them apart
        out.append(external_meta(host, p, gpus))
    return out


def shares_process_table(transports: list[str], transport: str) -> bool:
    """Several `local` hosts (the demo, sim fleets) see one machine's `ps`; ssh hosts see their own."""
    return transport == "local" and transports.count("local") > 1

"""Preset -> replicas -> the exact, shell-quoted remote launch command (pure).

Every value reaches the remote shell through `shlex.quote`/`shlex.join`, so a model path holding
`$(...)`, backticks, `;` or quotes is passed to SGLang literally and never run. Secrets (`--api-key`,
env vars named like KEY/TOKEN/SECRET/PASSWORD) never go on an argv: `console.sglang.launchscript`
sends them over the SSH channel's stdin into 0600 files.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from console.config import Fleet, Host, Preset
from console.masking import is_secret_name

LAUNCH_MODULE = "sglang.launch_server"
SECRET_FLAGS = ("--api-key", "--admin-api-key")
"""SGLang flags whose value is a secret: given to SGLang through its `--config` YAML file, never on argv."""
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)


def is_secret_env(name: str) -> bool:
    """`HF_TOKEN`, `*_KEY`, `*_SECRET`, `*PASSWORD*`...: a superset of what output masking calls secret
    (`console.masking.is_secret_name`, word-based so that `max_total_num_tokens` shows): whatever is masked in
    output also stays off argv, and a little more stays off argv than is masked (e.g. `TOKENIZERS_PARALLELISM`)."""
    return is_secret_name(name) or bool(_SECRET_ENV.search(name))


def split_secret_args(args: list[str] | tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """(args without secret flags, {"api-key": value, ...}); `--api-key V` and `--api-key=V` both."""
    public: list[str] = []
    secret: dict[str, str] = {}
    i = 0
    while i < len(args):
        flag, eq, val = args[i].partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                secret[flag[2:]] = val
            elif i + 1 < len(args):
                secret[flag[2:]] = args[i + 1]
                i += 1
            i += 1
            continue
        public.append(args[i])
        i += 1
    return public, secret


@dataclass(frozen=True)
class Replica:
    """One server a preset expands into: a TP group of GPUs on one port."""

    name: str
    preset: str
    host: str
    index: int
    gpus: tuple[int, ...]
    port: int
    tp: int


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to start one replica, and the single remote command that does it."""

    replica: Replica
    python: str
    argv: list[str]
    env: dict[str, str]
    log_path: str
    command: str
    bind: str = "127.0.0.1"
    api_key_env: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    public_argv: list[str] = field(default_factory=list)
    """`argv` without secret flags: what the host's process table shows."""
    public_env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)
    secret_args: dict[str, str] = field(default_factory=dict)
    """SGLang `--config` keys (`api-key`) -> values."""

    @property
    def sglang_args(self) -> list[str]:
        """The arguments after `-m sglang.launch_server`."""
        return self.argv[3:]


def gpu_label(gpus: tuple[int, ...] | list[int]) -> str:
    """`0`, `0-3` for a contiguous run, `0_2` otherwise (safe in file names)."""
    g = list(gpus)
    if len(g) > 1 and g == list(range(g[0], g[0] + len(g))):
        return f"{g[0]}-{g[-1]}"
    return "_".join(str(x) for x in g)


def replica_name(preset: str, host: str, gpus: tuple[int, ...] | list[int]) -> str:
    """Replica naming scheme: `PRESET@HOST:gpuLABEL`, e.g. `qwen36-gen@blackwell:gpu2`."""
    return f"{preset}@{host}:gpu{gpu_label(gpus)}"


def preset_ports(preset: Preset, n: int) -> list[int]:
    if isinstance(preset.port, list):
        return list(preset.port)
    return [preset.port + i for i in range(n)]


def expand_replicas(
    name: str, preset: Preset, gpus: list[int] | None = None, ports: list[int] | None = None
) -> list[Replica]:
    """Split a preset's GPUs into TP groups; `gpus` overrides the preset's set, `ports` its ports (chosen free).

    Other GPUs keep the preset's TP (its own GPU count when `tp` is unset): the args were sized for it."""
    use = list(gpus) if gpus is not None else list(preset.gpus)
    tp = preset.tp or len(preset.gpus)
    if tp < 1 or len(use) % tp:
        raise ValueError(f"tp={tp} does not divide {len(use)} GPUs")
    n = len(use) // tp
    ports = list(ports) if ports is not None else preset_ports(preset, n)
    out = []
    for i in range(n):
        group = tuple(use[i * tp : (i + 1) * tp])
        out.append(Replica(replica_name(name, preset.host, group), name, preset.host, i, group, ports[i], tp))
    return out


def render_log_path(preset: Preset, host: Host, replica: Replica, stamp: str) -> str:
    """Fill the log template; a launch always gets a new file (a stamp is inserted if absent)."""
    tmpl = preset.log or "{log_dir}/{preset}_gpu{gpus}_{stamp}.log"
    values = {
        "log_dir": host.effective_log_dir.rstrip("/"),
        "run_dir": host.run_dir.rstrip("/"),
        "preset": replica.preset,
        "host": replica.host,
        "gpus": gpu_label(replica.gpus),
        "port": str(replica.port),
        "replica": str(replica.index),
        "stamp": stamp,
    }
    path = _format(tmpl, values)
    if "{stamp}" not in tmpl:
        base, dot, ext = path.rpartition(".")
        path = f"{base}.{stamp}.{ext}" if dot and "/" not in ext else f"{path}.{stamp}"
    return path


def _format(tmpl: str, values: dict[str, str]) -> str:
    """`str.format`-like, but unknown or malformed fields stay literal (never an exception)."""
    out = []
    i = 0
    while i < len(tmpl):
        if tmpl[i] == "{":
            j = tmpl.find("}", i)
            key = tmpl[i + 1 : j] if j > 0 else None
            if key is not None and key in values:
                out.append(values[key])
                i = j + 1
                continue
        out.append(tmpl[i])
        i += 1
    return "".join(out)


def shell_path(path: str) -> str:
    """Quote a remote path, keeping a leading `~/` meaningful (as "$HOME"/...)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def build_argv(preset: Preset, host: Host, replica: Replica) -> list[str]:
    python = preset.python or host.python
    return [
        python,
        "-m",
        LAUNCH_MODULE,
        "--model-path",
        preset.model,
        "--host",
        preset.bind,
        "--port",
        str(replica.port),
        "--tp-size",
        str(replica.tp),
        *preset.args,
    ]


def build_env(preset: Preset, host: Host, replica: Replica) -> dict[str, str]:
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in replica.gpus)}
    env.update(host.env)
    env.update(preset.env)
    return env


def launch_command(argv: list[str], env: dict[str, str], log_path: str) -> str:
    """`mkdir -p DIR && setsid nohup env K=V ... PY -m sglang.launch_server ... > LOG 2>&1 < /dev/null & echo $!`."""
    log_dir = log_path.rsplit("/", 1)[0] if "/" in log_path else "."
    env_words = [f"{k}={v}" for k, v in env.items()]
    python = argv[0]
    py = shell_path(python) if python.startswith("~") else shlex.quote(python)
    body = (
        " ".join(["setsid", "nohup", "env", shlex.join(env_words), py, shlex.join(argv[1:])])
        if env_words
        else " ".join(["setsid", "nohup", py, shlex.join(argv[1:])])
    )
    return f"mkdir -p {shell_path(log_dir)} && {body} > {shell_path(log_path)} 2>&1 < /dev/null & echo $!"


def plan_launch(
    fleet: Fleet, preset_name: str, stamp: str, gpus: list[int] | None = None, ports: list[int] | None = None
) -> list[LaunchPlan]:
    """Preset -> one LaunchPlan per replica (pure; `stamp` names the new log files)."""
    preset = fleet.presets[preset_name]
    host = fleet.hosts[preset.host]
    plans = []
    for r in expand_replicas(preset_name, preset, gpus, ports):
        argv = build_argv(preset, host, r)
        env = build_env(preset, host, r)
        log = render_log_path(preset, host, r, stamp)
        public_args, secret_args = split_secret_args(argv[3:])
        public_argv = [*argv[:3], *public_args]
        public_env = {k: v for k, v in env.items() if not is_secret_env(k)}
        secret_env = {k: v for k, v in env.items() if is_secret_env(k)}
        command = launch_command(public_argv, public_env, log)
        hidden = [f"--{k}" for k in secret_args] + list(secret_env)
        if preset.api_key_env and "api-key" not in secret_args:  # the console adds it at launch, from local env
            hidden.insert(0, f"${preset.api_key_env} as --api-key")  # worded so masking leaves it whole
        if hidden:  # a shell comment: the printed command still runs by hand, and says what it leaves out
            command += f"  # secrets passed in 0600 files, never on argv: {', '.join(hidden)}"
        plans.append(
            LaunchPlan(
                r,
                argv[0],
                argv,
                env,
                log,
                command,
                bind=preset.bind,
                api_key_env=preset.api_key_env,
                public_argv=public_argv,
                public_env=public_env,
                secret_env=secret_env,
                secret_args=secret_args,
            )
        )
    return plans


def all_replicas(fleet: Fleet) -> list[Replica]:
    return [r for name, p in fleet.presets.items() for r in expand_replicas(name, p)]

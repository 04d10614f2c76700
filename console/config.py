"""hosts.toml: typed fleet config (hosts, launch presets, keymap) with file:line:field errors.

Loading never raises a traceback at the user: every problem becomes a `ConfigIssue` naming the
file, line, column and field path, and `load_fleet` collects all of them before failing.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from console.masking import remember_fleet
from console.router.spec import RouterSpec
from console.router.spec import cross_check as _router_checks
from console.tomlpos import TomlLocator, too_deep

APP_NAME = "dflash-console"
CONSOLE_OWNED_FLAGS = ("--model-path", "--model", "--port", "--host", "--tp-size", "--tp")
MAX_DEPTH = 16
"""Deepest nesting of arrays/inline tables accepted; a real hosts.toml needs 2 (tomllib recurses and dies near 300)."""
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What `env NAME=VALUE` can set: `"X=Y" = "v"` would silently set X to `Y=v`."""


def _env_names(v: dict[str, str]) -> dict[str, str]:
    for k in v:
        if not ENV_NAME.fullmatch(k):
            raise PydanticCustomError("env_name", "invalid environment variable name {name}", {"name": repr(k)})
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Host(_Strict):
    """One GPU machine the console connects to."""

    address: str = "127.0.0.1"
    """IP, DNS name, or an alias from ~/.ssh/config (its HostName/Port/User/IdentityFile apply)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    """SSH port; default: ~/.ssh/config's Port, else 22."""
    user: str | None = None
    """SSH user; default: ~/.ssh/config's User, else the local user."""
    identity: str | list[str] | None = None
    """Private key file(s); default: ~/.ssh/config's IdentityFile and the agent."""
    proxy_jump: str | None = None
    """A jump host ("user@bastion:22"), as OpenSSH's ProxyJump."""
    known_hosts: str | list[str] | None = None
    """known_hosts file(s); default OpenSSH's ~/.ssh/known_hosts. The console's own trust file
    (written by `dflash-console trust`) is always consulted too."""
    python: str = "python3"
    """The remote interpreter of the SGLang venv."""
    run_dir: str = "~/.dflash-console"
    """Remote state dir: servers/NAME/meta.json lives here."""
    log_dir: str | None = None
    """Remote dir for server logs; default `{run_dir}/logs`."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment applied to every launch on this host (e.g. LD_LIBRARY_PATH)."""
    http: Literal["tunnel", "direct"] = "tunnel"
    """How HTTP reaches servers: an SSH local port forward, or straight to address:port."""
    transport: Literal["ssh", "local"] = "ssh"
    """`local` runs commands on this machine (the demo fleet and single-box use)."""
    description: str = ""

    _env = field_validator("env")(classmethod(lambda cls, v: _env_names(v)))

    @property
    def effective_log_dir(self) -> str:
        return self.log_dir or f"{self.run_dir.rstrip('/')}/logs"

    @field_validator("identity", "known_hosts")
    @classmethod
    def _non_empty_paths(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and not v:
            raise ValueError("expected at least one path")
        return v

    def identities(self) -> list[str]:
        return (
            [] if self.identity is None else [self.identity] if isinstance(self.identity, str) else list(self.identity)
        )

    def known_hosts_files(self) -> list[str]:
        kh = self.known_hosts
        return [] if kh is None else [kh] if isinstance(kh, str) else list(kh)


class Preset(_Strict):
    """A stored launch: which GPUs, which model, which SGLang flags."""

    host: str
    """Name of a [hosts.NAME] table."""
    gpus: list[int] = Field(min_length=1)
    """GPU indices on the host (as nvidia-smi numbers them)."""
    tp: int | None = Field(default=None, ge=1)
    """Tensor-parallel size; default all of `gpus`. tp < len(gpus) expands into replicas."""
    model: str
    """Model path on the host (--model-path)."""
    port: int | list[int] = 30000
    """First port (replica i uses port + i), or one port per replica."""
    bind: str = "127.0.0.1"
    """The server's --host."""
    args: list[str] = Field(default_factory=list)
    """The remaining SGLang flags, as written on a command line, one token per item."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for this preset (merged over the host's env)."""
    log: str | None = None
    """Log path template: {log_dir} {preset} {host} {gpus} {port} {replica} {stamp}. A launch
    always gets a new file: without {stamp}, `.{stamp}` is inserted before the extension."""
    ready_timeout: float = Field(default=900.0, gt=0)
    """Seconds to wait for /health 200 before a launch is called failed."""
    description: str = ""
    python: str | None = None
    """Override the host's interpreter for this preset."""
    api_key_env: str | None = None
    """Name of a local environment variable holding the server's API key (sent as Bearer)."""

    _env = field_validator("env")(classmethod(lambda cls, v: _env_names(v)))

    @field_validator("gpus")
    @classmethod
    def _gpu_indices(cls, v: list[int]) -> list[int]:
        for i, g in enumerate(v):
            if g < 0:
                raise ValueError(f"gpus[{i}]: GPU index must be >= 0, got {g}")
        return v


class ConsoleSettings(_Strict):
    """[console]: UI settings."""

    theme: str | None = None
    bell: bool = False
    """Ring the terminal bell on crashes and hosts going down."""
    poll_ms: int = Field(default=1000, ge=100, le=60000)
    """Telemetry interval."""


class Fleet(_Strict):
    """The whole hosts.toml."""

    hosts: dict[str, Host] = Field(default_factory=dict)
    presets: dict[str, Preset] = Field(default_factory=dict)
    routers: dict[str, RouterSpec] = Field(default_factory=dict)
    """[routers.NAME]: SGLang routers in front of presets' replicas (console/router/)."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Binding id -> key(s), e.g. `launch = "ctrl+l"`."""
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    source: str = Field(default="", exclude=True)

    def preset_host(self, preset: Preset) -> Host:
        return self.hosts[preset.host]


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config file, located for a person to fix."""

    file: str
    line: int
    column: int
    field: str
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return _printable(f"{where}: {self.severity}: {self.field or '(file)'}: {self.message}")


def _printable(text: str) -> str:
    """Controls in a config's keys and values shown as `\\u001b`: an error line never drives the terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


class ConfigError(Exception):
    """Raised by load_fleet with every issue found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


def default_search_paths(explicit: str | os.PathLike[str] | None = None) -> list[Path]:
    """--hosts PATH, then ./hosts.toml, then the user config dir."""
    if explicit is not None:
        return [Path(explicit)]
    return [Path("hosts.toml"), Path(platformdirs.user_config_dir(APP_NAME)) / "hosts.toml"]


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    paths = default_search_paths(explicit)
    for p in paths:
        if explicit is not None or p.exists():
            return p
    raise ConfigError(
        [
            ConfigIssue(
                str(paths[0]),
                1,
                1,
                "",
                "no hosts.toml found; looked in "
                + ", ".join(str(p) for p in paths)
                + " (pass --hosts PATH or run `dflash-console sim up`)",
            )
        ]
    )


def load_fleet(path: str | os.PathLike[str] | None = None) -> Fleet:
    """Find, read, parse and validate hosts.toml; raise ConfigError listing every problem."""
    p = find_config(path)
    fname = str(p)
    if p.is_dir():
        raise ConfigError([ConfigIssue(fname, 1, 1, "", "is a directory, expected a TOML file")])
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError([ConfigIssue(fname, 1, 1, "", "file not found")]) from None
    except OSError as e:
        raise ConfigError([ConfigIssue(fname, 1, 1, "", f"cannot read: {e.strerror}")]) from None
    fleet = parse_fleet(raw, fname)
    remember_fleet(fleet)  # its secrets (and the api_key_env values) are masked in every output from now on
    return fleet


def parse_fleet(raw: bytes | str, fname: str = "hosts.toml") -> Fleet:
    """Parse TOML text into a validated Fleet (pure)."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line = raw[: e.start].count(b"\n") + 1
            col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
            raise ConfigError(
                [
                    ConfigIssue(
                        fname, line, col, "", f"not valid UTF-8 (byte 0x{raw[e.start]:02x}); TOML files must be UTF-8"
                    )
                ]
            ) from None
    else:
        text = raw
    if not text.strip():
        raise ConfigError([ConfigIssue(fname, 1, 1, "", "file is empty; expected at least one [hosts.NAME] table")])
    if (deep := too_deep(text, MAX_DEPTH)) is not None:
        raise ConfigError(
            [
                ConfigIssue(
                    fname,
                    *deep,
                    "",
                    f"arrays/inline tables nested more than {MAX_DEPTH} deep; hosts.toml values need at most 2 levels",
                )
            ]
        )
    try:
        data = tomllib.loads(text)
    except RecursionError:  # the depth scan should make this unreachable; never a traceback all the same
        raise ConfigError([ConfigIssue(fname, 1, 1, "", "values nested too deep to parse")]) from None
    except tomllib.TOMLDecodeError as e:
        line, col, msg = _toml_error_position(str(e))
        if line > text.count("\n") + 1:  # "at end of document": point at the last line, not line 10**9
            line, col = text.rstrip("\n").count("\n") + 1, 1
        raise ConfigError([ConfigIssue(fname, line, col, "", f"TOML syntax error: {msg}")]) from None
    loc = TomlLocator(text)
    issues = _validate(data, fname, loc)
    if any(i.severity == "error" for i in issues):
        raise ConfigError(issues)
    fleet = Fleet.model_validate(data)
    return fleet.model_copy(update={"source": fname})


def _toml_error_position(msg: str) -> tuple[int, int, str]:
    import re

    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        return int(m.group(1)), int(m.group(2)), msg[: m.start()].strip()
    m = re.search(r"\(at end of document\)", msg)
    return (1, 1, msg) if not m else (10**9, 1, msg[: m.start()].strip())


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:  # as TOML spells it: a key that is not bare is quoted, its controls escaped (never raw at a terminal)
            key = str(part)
            out += ("." if out else "") + (key if _BARE_KEY.fullmatch(key) else json.dumps(key))
    return out


_MODELS: dict[str, type[BaseModel]] = {
    "hosts": Host,
    "presets": Preset,
    "console": ConsoleSettings,
    "routers": RouterSpec,
}


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    if len(loc) == 1:
        return list(Fleet.model_fields)
    model = _MODELS.get(str(loc[0]))
    if model is None:
        return []
    if loc[0] == "console":
        return list(model.model_fields)
    return list(model.model_fields)


def _validate(data: dict[str, Any], fname: str, loc: TomlLocator) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []

    def add(
        path: tuple[Any, ...], message: str, severity: Literal["error", "warning"] = "error", at_value: bool = False
    ) -> None:
        line, col = loc.find(path, value=at_value)
        issues.append(ConfigIssue(fname, line, col, _field_path(path), message, severity))

    if not data.get("hosts"):
        add(("hosts",), "no hosts defined; expected at least one [hosts.NAME] table")
    try:
        Fleet.model_validate(data)
    except ValidationError as e:
        for err in e.errors():
            path = tuple(err["loc"])
            etype = err["type"]
            if etype == "extra_forbidden":
                key = str(path[-1])
                near = difflib.get_close_matches(key, _known_keys(path), n=1, cutoff=0.6)
                hint = f" — did you mean '{near[0]}'?" if near else ""
                add(path, f"unknown key '{key}'{hint}")
            elif etype == "env_name":
                continue  # _cross_checks names every bad key at its own line
            elif etype == "missing":
                add(path[:-1] or path, f"missing required field '{path[-1]}'")
            elif etype.startswith("value_error"):
                add(path, str(err["msg"]).removeprefix("Value error, "))
            else:
                got = err.get("input")
                shown = type(got).__name__ if not isinstance(got, (str, int, float, bool)) else repr(got)
                if len(shown) > 80:  # a huge value must not become a huge error line
                    shown = f"{shown[:60]}… ({len(shown)} characters)"
                add(path, f"{err['msg'].lower()} (got {shown})", at_value=True)
    issues.extend(_cross_checks(data, add))
    issues.sort(key=lambda i: (i.line, i.column))
    return issues


def _check_ports(name: str, port: Any, n: int, add: Any) -> None:
    path = ("presets", name, "port")
    if isinstance(port, bool):
        return
    if isinstance(port, int):
        if not 1 <= port <= 65535:
            add(path, f"port {port} out of range; expected 1..65535")
        elif port + n - 1 > 65535:
            add(path, f"{n} replicas need ports {port}..{port + n - 1}, above 65535")
        return
    if not isinstance(port, list):
        return
    if len(port) != n:
        add(path, f"{len(port)} ports given for {n} replicas; expected one port per replica")
    seen: dict[int, int] = {}
    for i, pt in enumerate(port):
        if not isinstance(pt, int) or isinstance(pt, bool):
            continue
        if not 1 <= pt <= 65535:
            add((*path, i), f"port {pt} out of range; expected 1..65535")
        elif pt in seen:
            add((*path, i), f"replicas {seen[pt]} and {i} would share port {pt}; expected distinct ports")
        seen.setdefault(pt, i)


def _cross_checks(data: dict[str, Any], add: Any) -> list[ConfigIssue]:
    """Rules that span fields: host references, GPU sets, TP, replica ports."""
    hosts = v if isinstance(v := data.get("hosts"), dict) else {}
    presets = v if isinstance(v := data.get("presets"), dict) else {}
    for section, tables in (("hosts", hosts), ("presets", presets)):
        for name, t in tables.items():
            env = t.get("env") if isinstance(t, dict) else None
            for key in env if isinstance(env, dict) else ():
                if not ENV_NAME.fullmatch(key):
                    add(
                        (section, name, "env", key),
                        f"invalid environment variable name {key!r}; expected letters, "
                        "digits and '_', not starting with a digit (e.g. HF_TOKEN)",
                    )
    for name, p in presets.items():
        if not isinstance(p, dict):
            continue
        host = p.get("host")
        if isinstance(host, str) and host not in hosts:
            near = difflib.get_close_matches(host, list(hosts), n=1, cutoff=0.5)
            hint = f" — did you mean '{near[0]}'?" if near else f" (known hosts: {', '.join(hosts) or 'none'})"
            add(("presets", name, "host"), f"unknown host '{host}'{hint}")
        gpus = p.get("gpus")
        if isinstance(gpus, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
            seen: set[int] = set()
            for i, g in enumerate(gpus):
                if g in seen:
                    add(("presets", name, "gpus", i), f"duplicate GPU {g}; each GPU may appear once")
                seen.add(g)
            tp = p.get("tp", len(gpus))
            if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1 and gpus:
                if len(gpus) % tp:
                    add(
                        ("presets", name, "tp"),
                        f"tp={tp} does not divide the {len(gpus)} GPUs {gpus}; expected a divisor of {len(gpus)}",
                    )
                else:
                    _check_ports(name, p.get("port", 30000), len(gpus) // tp, add)
        args = p.get("args")
        if isinstance(args, list):
            for i, a in enumerate(args):
                if isinstance(a, str):
                    flag = a.split("=", 1)[0]
                    if flag in CONSOLE_OWNED_FLAGS:
                        add(
                            ("presets", name, "args", i),
                            f"'{flag}' is set by the console from the preset's "
                            "model/port/bind/tp fields; remove it from args",
                        )
    _router_checks(data, add)
    return []


def user_state_dir() -> Path:
    return Path(os.environ.get("DFLASH_STATE_DIR") or platformdirs.user_state_dir(APP_NAME))


def user_config_dir() -> Path:
    return Path(os.environ.get("DFLASH_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))

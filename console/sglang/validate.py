"""Authoritative preset validation: run SGLang's own argument parsing/validation on the host, without launching.

`validation_command` builds the remote shell command (the preset's interpreter, env and
CUDA_VISIBLE_DEVICES, the exact launch argv) that calls `prepare_server_args(argv)` (0.5.11; plus
`resolve_once()` on 0.5.23) and `check_server_args()`, then prints one marked JSON line.
`findings_from_result` turns its exit status and output into Findings with SGLang's exact error.
"""

from __future__ import annotations

import re
import shlex

from console import hostjson
from console.config import Fleet
from console.sglang.command import LaunchPlan, plan_launch, shell_path
from console.sglang.lint import Finding

RULE = "sglang-validate"
MARK = "DFLASH_VALIDATE_RESULT "

VALIDATOR = r"""
import json, sys, traceback
MARK = "DFLASH_VALIDATE_RESULT "
argv = sys.argv[1:]
def emit(**kw):
    sys.stdout.write("\n" + MARK + json.dumps(kw) + "\n")
    sys.stdout.flush()
try:
    import sglang
    version = getattr(sglang, "__version__", None)
    from sglang.srt.server_args import prepare_server_args
    sa = prepare_server_args(argv)
    resolve = getattr(sa, "resolve_once", None)
    if callable(resolve):
        resolve()
    check = getattr(sa, "check_server_args", None)
    if callable(check):
        check()
    emit(ok=True, version=version)
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    emit(ok=code == 0, kind="SystemExit", code=code, message=str(e.code) if not isinstance(e.code, int) else "")
    sys.exit(code if code else 0)
except BaseException as e:
    tb = traceback.extract_tb(e.__traceback__)
    last = tb[-1] if tb else None
    emit(ok=False, kind=type(e).__name__, message=str(e),
         where=f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}" if last else "", code_line=(last.line or "") if last else "",
         traceback="".join(traceback.format_exception(e))[-3000:])
    sys.exit(1)
"""


def validation_command(plan: LaunchPlan) -> str:
    """`env CUDA_VISIBLE_DEVICES=.. K=V PY -c VALIDATOR ARGS...` for one replica's plan (shell-quoted).

    Secrets stay off the host's argv here too: secret env vars are left out and a secret flag's value is a
    placeholder (argument validation does not depend on either)."""
    public = bool(plan.public_argv)
    env = plan.public_env if public else plan.env
    args = (
        [*plan.public_argv[3:], *(w for k in plan.secret_args for w in (f"--{k}", "dflash-redacted"))]
        if public
        else plan.sglang_args
    )
    env_words = [f"{k}={v}" for k, v in env.items()]
    py = shell_path(plan.python) if plan.python.startswith("~") else shlex.quote(plan.python)
    head = f"env {shlex.join(env_words)} " if env_words else ""
    return f"{head}{py} -c {shlex.quote(VALIDATOR.strip())} {shlex.join(args)}"


def validation_commands(fleet: Fleet, preset: str) -> list[str]:
    """One command per distinct replica shape of a preset (replicas differ only in port and GPUs: the first suffices)."""
    plans = plan_launch(fleet, preset, "validate")
    return [validation_command(plans[0])] if plans else []


_ADJUST = re.compile(
    r"adjusted to|is reset to|is disabled because|deprecated|Warning:|is not compatible", re.IGNORECASE
)
_ARGPARSE = re.compile(r"^[\w./ -]+: error: (.+)$", re.MULTILINE)


def findings_from_result(preset: str, exit_status: int | None, stdout: str, stderr: str) -> list[Finding]:
    """The validator's output -> Findings: [] when SGLang accepts the args (warnings for its adjustments)."""
    result = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                result = hostjson.loads(line[len(MARK) :], "the validator's report")
            except hostjson.HostJsonError:
                result = None
            if not isinstance(result, dict):
                result = None
    warnings = _adjustments(preset, stderr + "\n" + stdout)
    if result is None:
        tail = next((x.strip() for x in reversed((stderr or stdout).splitlines()) if x.strip()), "")
        if exit_status == 127 or "No such file" in tail or "not found" in tail:
            msg = f"the preset's python could not be run on the host: {tail or f'exit status {exit_status}'}"
        else:
            msg = f"the validator did not report (exit status {exit_status}): {tail or 'no output'}"
        return [Finding(RULE, "error", preset, msg, fix="check the host's/preset's `python` points at the SGLang venv")]
    if result.get("ok"):
        return warnings
    kind = result.get("kind", "")
    if kind == "SystemExit":
        errs = _ARGPARSE.findall(stderr)
        err = errs[-1] if errs else (result.get("message") or f"argparse exited {result.get('code')}")
        return [
            Finding(
                RULE, "error", preset, f"SGLang rejected the arguments: {err}", fix="fix the flag in the preset's args"
            ),
            *warnings,
        ]
    message = result.get("message") or ""
    if kind == "ModuleNotFoundError" and "sglang" in message:
        return [
            Finding(
                RULE,
                "error",
                preset,
                f"{kind}: {message}: SGLang is not installed for the preset's python",
                fix="point the host's/preset's `python` at the SGLang venv",
            )
        ]
    text = (
        f"{kind}: {message}"
        if message
        else f"{kind} (no message) at {result.get('where', '?')}: {result.get('code_line', '').strip()}"
    )
    return [
        Finding(RULE, "error", preset, f"SGLang's validation failed: {text}", fix=_fix_for(kind, message, result)),
        *warnings,
    ]


def _fix_for(kind: str, message: str, result: dict[str, object]) -> str:
    code = str(result.get("code_line", ""))
    if "speculative" in code or "speculative" in message:
        return "give --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens together (or none)"
    if "mamba-scheduler-strategy" in message:
        return "add --mamba-scheduler-strategy extra_buffer, or --disable-radix-cache"
    if "No accelerator" in message:
        return "the validator needs a visible GPU: check CUDA_VISIBLE_DEVICES and the driver on the host"
    if "config.json" in message or "not a valid model identifier" in message:
        return "check the preset's model path on the host"
    return "see SGLang's message; `dflash-console check` lints the common mistakes"


def _adjustments(preset: str, text: str) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(MARK) or not _ADJUST.search(s):
            continue
        s = re.sub(r"^\[[^\]]*\]\s*", "", s)
        if s in seen:
            continue
        seen.add(s)
        out.append(Finding(RULE, "warning", preset, f"SGLang says: {s[:300]}"))
        if len(out) >= 8:
            break
    return out

"""The remote launch script (pure): secrets over stdin into 0600 files, meta.json before the server runs.

The server is started behind a gate: a detached `sh` that waits until `meta.json` names its own pid
and this launch's id, and only then sources the secrets and `exec`s SGLang. So a server never runs
without the console's record of it: if the launching shell dies, or meta.json cannot be written
(full disk), the gate gives up and nothing was started. Secrets never appear on an argv: env
secrets are `export`ed from a 0600 file the gate sources (then deletes), and `--api-key` reaches
SGLang through its own `--config FILE.yaml` (0600), which SGLang merges into its arguments in memory.
"""

from __future__ import annotations

import json
import shlex

from console.sglang.command import LaunchPlan, shell_path

END_MARK = "#dflash-end"
"""Last line of the launch input: a shorter input (a console killed while sending it) is refused."""
GATE_TRIES = 100
"""The gate polls meta.json every 0.1 s this many times (10 s) before giving up without starting."""
GATE_NAME = "dflash-launch"
SECRET_ENV_FILE = ".secret.env"
"""`.secret.env.LAUNCH_ID`: one per launch, so a gate that gives up never removes a later launch's file."""
SECRET_CONFIG_FILE = "secrets.yaml"

GATE = (
    "d=$1; t=$2; n=$3; shift 3; i=0; "
    'until grep -q "^{\\"pid\\": $$, " "$d/meta.json" 2>/dev/null '
    '&& grep -qF "\\"launch_id\\": \\"$t\\"" "$d/meta.json" 2>/dev/null; do '
    'i=$((i+1)); if [ "$i" -gt "$n" ]; then '
    'rm -f "$d/{env}.$t"; '
    'echo "dflash-console: $d/meta.json does not name this launch; the server was not started" >&2; exit 97; fi; '
    "sleep 0.1 2>/dev/null || sleep 1; done; "
    'if [ -f "$d/{env}.$t" ]; then . "$d/{env}.$t" || exit 98; rm -f "$d/{env}.$t"; fi; '
    'exec "$@"'
).replace("{env}", SECRET_ENV_FILE)
"""`sh -c GATE dflash-launch DIR LAUNCH_ID TRIES CMD...`: run CMD only once DIR/meta.json names this pid and launch."""


def secret_env_file(secret_env: dict[str, str]) -> str:
    """A sh-sourceable file of `export K='v'` lines (values quoted, names validated by the config)."""
    lines = [f"export {k}={shlex.quote(v)}" for k, v in secret_env.items()]
    return "".join(ln + "\n" for ln in lines)


def secret_config(secret_args: dict[str, str]) -> str:
    """SGLang's `--config` YAML as one line: a JSON object is a YAML flow mapping (`{"api-key": "..."}`)."""
    return json.dumps(secret_args, ensure_ascii=False) if secret_args else ""


def launch_input(meta_body: str, secret_args: dict[str, str], secret_env: dict[str, str]) -> str:
    """The launch script's stdin: meta.json minus its pid, the --config line, the env file, END_MARK."""
    if "\n" in meta_body:
        raise ValueError("meta body must be one line")
    return f"{meta_body}\n{secret_config(secret_args)}\n{secret_env_file(secret_env)}{END_MARK}\n"


def server_command(plan: LaunchPlan, meta_dir: str, launch_id: str, gate_tries: int = GATE_TRIES) -> str:
    """`setsid nohup sh -c GATE ... env K=V PY -m sglang.launch_server ... [--config D/secrets.yaml] > LOG ...`."""
    argv, env = plan.public_argv or plan.argv, plan.public_env or plan.env
    py = shell_path(argv[0]) if argv[0].startswith("~") else shlex.quote(argv[0])
    words = [*(["env", shlex.join([f"{k}={v}" for k, v in env.items()])] if env else []), py, shlex.join(argv[1:])]
    if plan.secret_args:
        words.append(f'--config "$d"/{SECRET_CONFIG_FILE}')
    gate = shlex.join(["sh", "-c", GATE, GATE_NAME])
    return (
        f'setsid nohup {gate} "$d" {shlex.quote(launch_id)} {int(gate_tries)} {" ".join(words)} '
        f"> {shell_path(plan.log_path)} 2>&1 < /dev/null &"
    )


def launch_script(
    plan: LaunchPlan, meta_dir: str, lock_file: str, lock_token: str, launch_id: str, gate_tries: int = GATE_TRIES
) -> str:
    """One remote command: check the host lock, store secrets (0600), start the gated server, write meta.json.

    Prints the pid and the host's clock; any failure exits non-zero with the reason on stderr and
    leaves no server (the gate never saw meta.json)."""
    log_dir = plan.log_path.rsplit("/", 1)[0] if "/" in plan.log_path else "."
    return "\n".join(
        [
            f"# dflash-console: launch {_comment(plan.replica.name)} (setsid nohup, gated on meta.json; secrets on stdin)",
            "umask 077",
            f"d={shell_path(meta_dir)}; lk={shell_path(lock_file)}",
            f'e="$d"/{SECRET_ENV_FILE}.{shlex.quote(launch_id)}',
            'fail() { printf \'dflash-console: %s\\n\' "$1" >&2; rm -f "$e"; exit "$2"; }',
            f'grep -q {shlex.quote("^" + lock_token + " ")} "$lk" 2>/dev/null '
            '|| fail "the launch lock ($lk) is not held by this console" 75',
            f'mkdir -p {shell_path(log_dir)} "$d" && chmod 700 "$d" || fail "cannot create $d" 73',
            f'rm -f "$d"/{SECRET_ENV_FILE}.*  # an earlier launch that died before its gate ran',
            'IFS= read -r body && IFS= read -r cfg || fail "launch input truncated" 65',
            'cat > "$e" || fail "cannot write $e (disk full?)" 74',
            f'[ "$(tail -n 1 "$e")" = {shlex.quote(END_MARK)} ] || fail "launch input truncated" 65',
            f'rm -f "$d/{SECRET_CONFIG_FILE}"',
            f'if [ -n "$cfg" ]; then printf \'%s\\n\' "$cfg" > "$d/{SECRET_CONFIG_FILE}" '
            f'|| fail "cannot write $d/{SECRET_CONFIG_FILE} (disk full?)" 74; fi',
            server_command(plan, meta_dir, launch_id, gate_tries),
            "pid=$!",
            '{ printf \'{"pid": %s, "sid": %s, \' "$pid" "$pid" && printf \'%s\\n\' "$body"; } > "$d/meta.json.tmp" '
            '&& mv -f "$d/meta.json.tmp" "$d/meta.json" '
            '|| { kill -KILL "$pid" 2>/dev/null; rm -f "$d/meta.json.tmp"; '
            'fail "cannot write $d/meta.json (disk full?); the server was not started" 74; }',
            'cat "$d/meta.json" >> "$d/history.jsonl" 2>/dev/null',
            'echo "$pid"; date +%s.%N',
        ]
    )


def _comment(text: str) -> str:
    """Text safe inside a one-line shell comment."""
    return "".join(c if c.isprintable() else "?" for c in text)


def meta_body(doc: str) -> str:
    """A meta.json document without pid/sid and its opening brace: the script puts the real pid first."""
    d = json.loads(doc)
    d.pop("pid", None)
    d.pop("sid", None)
    return json.dumps(d, ensure_ascii=False)[1:]

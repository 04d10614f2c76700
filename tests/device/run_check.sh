#!/usr/bin/env bash
# Stop and restart on a shared real GPU, and a real CUDA OOM, with the console's `local` transport.
#
# On a GPU box with python3 + torch (no network): `bash tests/device/run_check.sh`. The console's dependencies come
# from tests/device/wheels (git-ignored; fill it here first with `bash tests/device/fetch_wheels.sh`). It installs
# the console into a venv (system site-packages, for torch), writes a hosts.toml with transport = "local" whose host
# env puts the stand-in `sglang.launch_server` (tests/device/standin) first, and runs, beside a torch process of its
# own holding VRAM on GPU 0:
#   1 launch --wait beside the external process      2 restart --wait: succeeds, names the external owner
#   3 stop: confirmed, names what else holds GPU 0     4 restart while another process takes the VRAM the preset
#   needs: refused before the stop, owner named         5 the same with --force: stopped and relaunched
#   6 a real CUDA OOM in rank 0 ends the server; status/diagnose name the rank and GPU; restart keeps the crashed log
# Results: $OUT/device-check.txt (PASS/FAIL per step with the commands' output), $OUT/logs/ (server logs,
# nvidia-smi). Exit 0 when every step passed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT/logs"
RES=$OUT/device-check.txt
: >"$RES"
W=$(mktemp -d /tmp/dfc-device.XXXXXX)
FAILS=0
EXT_PIDS=()

say() { echo "$*" | tee -a "$RES"; }
step() {  # step NAME OK(0/1) OUTPUT
  if [ "$2" -eq 0 ]; then say "PASS $1"; else say "FAIL $1"; FAILS=$((FAILS + 1)); fi
  printf '%s\n' "$3" | sed 's/^/    /' | tail -n 40 >>"$RES"
}
cleanup() {
  for p in "${EXT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "${PY:-}" ] && [ -f "$W/hosts.toml" ] && "$PY" -m console stop "$NAME" --hosts "$W/hosts.toml" >/dev/null 2>&1
  cp -r "$W/logs" "$OUT/logs/servers" 2>/dev/null
  nvidia-smi >"$OUT/logs/nvidia-smi-end.txt" 2>&1
}
trap cleanup EXIT

# -- the box -------------------------------------------------------------------------------------------
say "device check $(date -u +%FT%TZ) on $(hostname); tree $(git -C "$ROOT" log -1 --oneline 2>/dev/null || echo '?')"
nvidia-smi -L 2>&1 | tee -a "$RES"
if ! TORCH=$(python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA"; print(torch.__version__)' 2>&1); then
  say "NOT RUN: python3 has no torch with CUDA here: $(printf '%s' "$TORCH" | tail -n 1)"
  exit 2
fi
say "python3 $(python3 -c 'import sys; print(sys.version.split()[0])'), torch $TORCH"

# -- the console, from the carried wheels ------------------------------------------------------------------
WHEELS=$ROOT/tests/device/wheels
if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  say "NOT RUN: no wheels in tests/device/wheels (run tests/device/fetch_wheels.sh where there is network)"
  exit 2
fi
if python3 -m venv --system-site-packages "$W/venv" >"$W/venv.log" 2>&1 \
  && "$W/venv/bin/python3" -m pip install -q --no-index --find-links "$WHEELS" "$ROOT" >>"$W/venv.log" 2>&1; then
  PY=$W/venv/bin/python3
  say "console installed into $W/venv"
else  # no venv module or no build backend: the dependencies into a folder, the console from the tree
  python3 -m pip install -q --no-index --find-links "$WHEELS" --target "$W/site" \
    $(python3 -c "import tomllib; print(' '.join(repr(d)[1:-1] for d in tomllib.load(open('$ROOT/pyproject.toml', 'rb'))['project']['dependencies']))") \
    >>"$W/venv.log" 2>&1 || { say "NOT RUN: cannot install the console's wheels"; tail -n 20 "$W/venv.log" >>"$RES"; exit 2; }
  mkdir -p "$W/bin"
  printf '#!/bin/sh\nPYTHONPATH=%s:%s${PYTHONPATH:+:$PYTHONPATH} exec python3 "$@"\n' "$W/site" "$ROOT" >"$W/bin/python3"
  chmod +x "$W/bin/python3"
  PY=$W/bin/python3
  say "console run from the tree with its wheels in $W/site (venv: $(tail -n 1 "$W/venv.log"))"
fi

# -- the host, the preset, a model directory ---------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" -c "
from pathlib import Path
from console.sim.hostdir import write_model
from console.sim.spec import QWEN3_06B
write_model(Path('$W/models'), QWEN3_06B)
"
cat >"$W/hosts.toml" <<EOF
[console]
poll_ms = 500

[hosts.gpu]
transport = "local"
python = "$PY"
run_dir = "$W/run"
log_dir = "$W/logs"
env = { PYTHONPATH = "$ROOT/tests/device/standin", DFC_STANDIN_DIR = "$W/control", DFC_STANDIN_WEIGHTS_GIB = "2" }

[presets.qwen]
host = "gpu"
gpus = [0]
model = "$W/models/Qwen3-0.6B"
port = $PORT
args = ["--mem-fraction-static", "0.5", "--enable-metrics"]
ready_timeout = 300
EOF
NAME="qwen@gpu:gpu0"
dfc() { timeout 400 "$PY" -m console "$@" --hosts "$W/hosts.toml" 2>&1; }
has() { printf '%s' "$1" | grep -qF -- "$2"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
phase_of() { dfc status --json | "$PY" -c "import json, sys; print(*[s['phase'] for s in json.load(sys.stdin)['servers'] if s['name'] == '$NAME'])" 2>/dev/null; }

# a torch process of our own holding GiB on GPU 0 (`fill`: all but that many GiB of what is free)
external() {  # external GIB|fill:GIB -> pid
  setsid python3 -c "
import sys, time, torch
want = sys.argv[1]
free, _ = torch.cuda.mem_get_info(0)
gib = free / 2**30 - float(want[5:]) if want.startswith('fill:') else float(want)
x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device='cuda:0')
print(f'{gib:.1f}', flush=True)
time.sleep(3600)
" "$1" >"$W/ext-$1.out" 2>&1 &
  local pid=$!
  EXT_PIDS+=("$pid")
  for _ in $(seq 60); do [ -s "$W/ext-$1.out" ] && break; sleep 0.5; done
  echo "$pid"
}

# -- 1..3: beside a small external process ---------------------------------------------------------------------
EXT1=$(external 4)
say "external process pid $EXT1 holds $(cat "$W/ext-4.out") GiB on GPU 0"
out=$(dfc launch qwen --wait); rc=$?
step "1 launch --wait beside pid $EXT1 (rc $rc)" "$([ $rc -eq 0 ] && has "$out" "is ready" && echo 0 || echo 1)" "$out"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$OUT/logs/apps-after-launch.csv" 2>&1
out=$(dfc status --json); echo "$out" >"$OUT/logs/status-after-launch.json"
t0=$(now_ms)
out=$(dfc restart "$NAME" --wait); rc=$?
t1=$(now_ms)
step "2 restart --wait beside pid $EXT1 succeeds and names it (rc $rc, $((t1 - t0)) ms)" \
  "$([ $rc -eq 0 ] && has "$out" "pid $EXT1" && has "$out" "is ready" && echo 0 || echo 1)" "$out"
t0=$(now_ms)
out=$(dfc stop "$NAME"); rc=$?
t1=$(now_ms)
step "3 stop confirmed, naming what else holds GPU 0 (rc $rc, $((t1 - t0)) ms)" \
  "$([ $rc -eq 0 ] && has "$out" "GPU 0 still holds" && has "$out" "pid $EXT1" && echo 0 || echo 1)" "$out"

# -- 4..5: another process takes the VRAM the relaunch needs ------------------------------------------------
out=$(dfc launch qwen --wait); rc=$?
[ $rc -eq 0 ] || step "relaunch before step 4 (rc $rc)" 1 "$out"
EXT2=$(external fill:1)
say "external process pid $EXT2 holds $(cat "$W/ext-fill:1.out") GiB on GPU 0 (all but 1 GiB of what was free)"
out=$(dfc restart "$NAME"); rc=$?
alive=$(phase_of)
step "4 restart refused before the stop, naming pid $EXT2 (rc $rc; server phase after: $alive)" \
  "$([ $rc -eq 1 ] && has "$out" "pid $EXT2" && has "$out" "was not stopped" \
    && printf '%s' "$alive" | grep -qE 'ready|serving' && echo 0 || echo 1)" "$out"
out=$(dfc restart "$NAME" --force --wait); rc=$?
step "5 restart --force: stopped and relaunched beside pid $EXT2 (rc $rc: its relaunch may run out of memory)" \
  "$(has "$out" "(forced)" && has "$out" "stopped $NAME" && echo 0 || echo 1)" "$out"
kill "$EXT2" 2>/dev/null
sleep 2

# -- 6: a real CUDA OOM in rank 0 ---------------------------------------------------------------------------
out=$(dfc restart "$NAME" --wait); rc=$?
[ $rc -eq 0 ] || step "relaunch before step 6 (rc $rc)" 1 "$out"
"$PY" -c "from console.sim.control import inject; inject('$W/control', $PORT, 'crash', kind='oom', rank=0)"
phase=""
for _ in $(seq 60); do
  phase=$(phase_of)
  [ "$phase" = "crashed" ] && break
  sleep 1
done
st=$(dfc status); echo "$st" >"$OUT/logs/status-after-oom.txt"
js=$(dfc status --json); echo "$js" >"$OUT/logs/status-after-oom.json"
field() { printf '%s' "$js" | "$PY" -c "import json, sys; print(*[s['$1'] for s in json.load(sys.stdin)['servers'] if s['name'] == '$NAME'])" 2>/dev/null; }
crashed_log=$(field log_path)
summary="$(field cause): $(field summary)"
diag=$(dfc diagnose "$crashed_log" --exit-status 137)
step "6a OOM in rank 0 ends the server (phase $phase; status: $summary)" \
  "$([ "$phase" = crashed ] && printf '%s' "$summary" | grep -qiE 'memory|oom' && echo 0 || echo 1)" "$st"
step "6b diagnose names the OOM, the rank and the GPU" \
  "$(has "$diag" "GPU 0" && printf '%s' "$diag" | grep -qiE 'out of memory|oom' && echo 0 || echo 1)" "$diag"
out=$(dfc restart "$NAME" --wait); rc=$?
prev=$(dfc logs "$NAME" --previous -n 0)
step "6c relaunch keeps the crashed log (rc $rc)" \
  "$([ $rc -eq 0 ] && [ -s "$crashed_log" ] && has "$prev" "OutOfMemoryError" && echo 0 || echo 1)" \
  "$out
--- logs --previous (tail) ---
$(printf '%s' "$prev" | tail -n 8)"
out=$(dfc stop "$NAME"); rc=$?
step "7 final stop (rc $rc)" "$([ $rc -eq 0 ] && echo 0 || echo 1)" "$out"
say "$FAILS step(s) failed"
[ "$FAILS" -eq 0 ]

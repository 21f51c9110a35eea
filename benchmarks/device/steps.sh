# Sourced by the device scripts: `step NAME SECONDS COMMAND...` runs COMMAND under `timeout`
# (SIGKILL 20 s after SIGTERM), writes NAME.out/.err into $work, and logs to $log the exit status,
# the seconds, the call's elapsed seconds (from $t0) and the last lines of its output; a step given
# 0 seconds or fewer is skipped. Needs $work, $log and $t0 set by the script.
step() {
  local name=$1 limit=$2
  shift 2
  if [ "$limit" -le 0 ]; then
    echo "== $name: skipped" | tee -a "$log"
    return
  fi
  local start=$(date +%s)
  timeout -k 20 "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local rc=$?
  echo "== $name: exit=$rc seconds=$(($(date +%s) - start)) (limit $limit, call at $(($(date +%s) - t0)) s)" | tee -a "$log"
  tail -4 "$work/$name.out" | tee -a "$log"
  [ "$rc" -eq 0 ] || tail -3 "$work/$name.err" | tee -a "$log"
}

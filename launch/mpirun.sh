#!/usr/bin/env bash
# mpirun.sh: mpirun for minimax-train jobs, its arguments unchanged:
#   bash launch/mpirun.sh -np N build/minimax-train RECIPE.toml [--set table.key=value]...
# A clean stop (a stop signal: the ranks save a checkpoint and exit 75) ends the way the
# trainer reports it: its "stopped by a signal ... continue with --resume DIR" line and exit
# code 75, without the two banners Open MPI 4 prints after any non-zero exit ("Per
# user-direction, the job has been aborted", "mpirun detected that one or more processes exited
# with non-zero status"). Any other exit keeps them, and mpirun's own errors show as they are
# (mpirun --quiet would hide the banners, but also those errors: "not enough slots" exits 1
# without a word).
# SIGUSR1, SIGTERM and SIGINT (kill, Ctrl-C) to this script become one SIGUSR1 for mpirun, which
# forwards it to every rank (SIGTERM or SIGINT to mpirun itself kill the ranks a second later,
# exit 1); a second one ends the job at once. mpirun runs in a process group of its own (set -m),
# so a Ctrl-C reaches this script alone.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 MPIRUN_ARGS... (as mpirun's)" >&2; exit 2; }

fifo_dir="$(mktemp -d)"
trap 'rm -rf "$fifo_dir"' EXIT
mkfifo "$fifo_dir/stderr"
# The filter of mpirun's stderr: Open MPI's help blocks (between two lines of 74 dashes) pass
# when they close, but the two it prints after a non-zero exit are held to the end, where the
# script's last line to the filter (after the marker) gives mpirun's exit code: 75 drops them.
# Every other line passes at once (bash's read takes a pipe byte by byte: no line waits).
marker="mpirun.sh exit code $$ $RANDOM:"
filter() {
  local line block="" open=0 held="" code="" dashes
  printf -v dashes '%74s' ''
  dashes=${dashes// /-}
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line == "$marker "* ]]; then
      code=${line#"$marker "}
    elif [ "$line" = "$dashes" ]; then
      block+="$line"$'\n'
      if [ "$open" = 0 ]; then
        open=1
        continue
      fi
      open=0
      if [[ $block == *"Per user-direction, the job has been aborted"* ||
        $block == *"exited with non-zero status"* ]]; then
        held+="$block"
      else
        printf '%s' "$block"
      fi
      block=""
    elif [ "$open" = 1 ]; then
      block+="$line"$'\n'
    else
      printf '%s\n' "$line"
    fi
  done
  [ "$code" = 75 ] || printf '%s' "$held"
  printf '%s' "$block"
}
set -m # the filter and mpirun in process groups of their own: a Ctrl-C reaches this script alone
filter < "$fifo_dir/stderr" >&2 &
filter=$!
exec 3> "$fifo_dir/stderr" # held open: the filter ends after the exit code, not with mpirun

job="" stops=0
# shellcheck disable=SC2317 # called by the trap
stop() {
  stops=$((stops + 1))
  [ -n "$job" ] || return 0
  if [ "$stops" -eq 1 ]; then kill -USR1 "$job"; else kill -TERM "$job"; fi 2> /dev/null || true
}
trap stop USR1 TERM INT
mpirun "$@" 2>&3 &
job=$!
while :; do
  rc=0
  wait "$job" || rc=$?
  kill -0 "$job" 2> /dev/null || break # else a trapped signal ended the wait
done
echo "$marker $rc" >&3
exec 3>&-
wait "$filter" 2> /dev/null || true
exit "$rc"

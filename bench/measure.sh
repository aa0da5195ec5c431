# measure.sh: sourced by the bench scripts (bench/train_vs_torch.sh, bench/profile_step.sh):
# bench_measured NAME COMMAND... runs the command with /usr/bin/time, its output into
# $out/NAME.log, and sets $bench_share to how much of the machine's CPUs other processes took
# meanwhile: the CPU time the whole machine spent (/proc/stat: user, nice, system, irq, softirq,
# steal) minus what the command and its children used, as a share of all CPUs (above ~5 % the
# times are not results). A failing command ends the script with its log's tail.
# shellcheck shell=bash disable=SC2154,SC2034 # $out is the sourcing script's, bench_share for it
bench_hz="$(getconf CLK_TCK)"
bench_ncpu="$(nproc)"
bench_cpu_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
bench_measured() {
  local name="$1" b0 b1 t0 t1 rc=0
  shift
  b0="$(bench_cpu_busy)"
  t0="$(date +%s.%N)"
  /usr/bin/time -f "%U %S %M" -o "$out/$name.time" "$@" > "$out/$name.log" 2>&1 || rc=$?
  t1="$(date +%s.%N)"
  b1="$(bench_cpu_busy)"
  if [ "$rc" -ne 0 ]; then
    tail -20 "$out/$name.log" >&2
    echo "$0: $name failed (log: $out/$name.log)" >&2
    exit 1
  fi
  bench_share="$(awk -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v hz="$bench_hz" \
    -v n="$bench_ncpu" 'NR == 1 { own = $1 + $2; wall = t1 - t0;
      o = (b1 - b0) / hz - own; if (o < 0) o = 0;
      p = 100 * o / (wall * n);
      printf "%.0f s wall, own CPU %.0f s, other processes %.0f%% of the %d CPUs, max RSS %.0f MiB%s",
             wall, own, p, n, $3 / 1024, (p > 5 ? "  <- disturbed: the times are not reliable" : "") }' \
    "$out/$name.time")"
}

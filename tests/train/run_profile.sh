#!/usr/bin/env bash
# run_profile.sh: the op profile of minimax-train (MT_PROFILE=1, --profile; docs/training.md,
# "Op profile") on the tiny models of three families (tests/recipes/dist.toml, dist-m2.toml,
# dist-m3.toml; one layer's rows of 64 tokens, 4 steps, 1 rank, and the m3 one on 2 ranks):
#   - the profile does not change the numbers: loss.csv's step, loss, lr and grad_norm columns
#     equal the unprofiled run's, byte for byte;
#   - profile.tsv is written (no .tmp left): a header and ten tab-separated fields per row, the
#     forward and backward rows of matmul, the optimizer's and the gathers' rows, a "(step)" row
#     counting 3 steps (the first is warm-up), shares within [0, 1] that sum to 1 with
#     "(untimed)", and the table printed on stdout by rank 0 only;
#   - off by default: no profile.tsv and no table without it.
#   run_profile.sh BIN train   (run by ctest from the source directory; MT_TEST_TMPDIR set)
. "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"

check_tsv() { # check_tsv DIR: profile.tsv's form
  local f="$1/profile.tsv"
  [ -f "$f" ] || { echo "FAIL: no $f"; exit 1; }
  [ ! -e "$f.tmp" ] || { echo "FAIL: $f.tmp left behind"; exit 1; }
  awk -F'\t' '
    NR == 1 { if ($0 != "op\tdir\tcalls_per_step\tms_per_step\tshare\tgflop_per_step\tgbyte_per_step\tgflops\tgbps\tupper_bound") { print "FAIL: header: " $0; bad = 1 } next }
    NF != 10 { print "FAIL: line " NR " has " NF " fields"; bad = 1 }
    $1 != "(step)" { if ($5 < -1e-9 || $5 > 1 + 1e-9) { print "FAIL: share " $5 " on line " NR; bad = 1 } share += $5 }
    $1 == "matmul" { mm[$2] = 1 }
    $1 == "optim_adamw" { opt = 1 }
    $1 == "zero_gather" { gat = 1 }
    $1 == "(step)" { steps = $3 }
    END {
      if (!mm["fwd"] || !mm["bwd"]) { print "FAIL: no matmul fwd and bwd rows"; bad = 1 }
      if (!opt || !gat) { print "FAIL: no optim_adamw or zero_gather row"; bad = 1 }
      if (steps != 3) { print "FAIL: (step) counts " steps " steps, not 3"; bad = 1 }
      if (share < 1 - 1e-4 || share > 1 + 1e-4) { print "FAIL: the shares sum to " share; bad = 1 }
      exit bad
    }' "$f" || { cat "$f"; exit 1; }
}

case "$mode" in
train)
  for fam in "" m2 m3; do
    r=tests/recipes/dist${fam:+-$fam}.toml
    np=1
    [ "$fam" != m3 ] || np=2
    name="profile${fam:+-$fam}"
    args=("${fast[@]}")
    # M3: all three layers (dense, then MoE with MSA) on rows of 128 tokens, where the top-4
    # blocks of 16 drop some
    [ "$fam" != m3 ] || args=(--set data.max_length=128 --set data.truncation=truncate)
    args+=(--set train.max_steps=4 --set train.per_device_train_batch_size=$((2 / np))
      --set "data.cache_dir=$tmp/profile-cache${fam:+-$fam}")
    recipe="$r" run "$np" "$tmp/$name-off" "${args[@]}"
    MT_PROFILE=1 recipe="$r" run "$np" "$tmp/$name-env" "${args[@]}"
    recipe="$r" run "$np" "$tmp/$name-flag" "${args[@]}" --profile
    [ ! -e "$tmp/$name-off/profile.tsv" ] || { echo "FAIL: $name-off wrote profile.tsv"; exit 1; }
    ! grep -q "^op profile" "$tmp/$name-off.log" || { echo "FAIL: $name-off printed a table"; exit 1; }
    for on in env flag; do
      cmp <(cut -d, -f1-4 "$tmp/$name-off/loss.csv") <(cut -d, -f1-4 "$tmp/$name-$on/loss.csv") ||
        { echo "FAIL: $name: the profile ($on) changed loss.csv"; exit 1; }
      check_tsv "$tmp/$name-$on"
      [ "$(grep -c "^op profile" "$tmp/$name-$on.log")" = 1 ] ||
        { echo "FAIL: $name-$on: not one table on stdout"; tail -30 "$tmp/$name-$on.log"; exit 1; }
    done
    want=(matmul rmsnorm linear_cross_entropy)
    [ -n "$fam" ] || want+=(lightning moe_route moe_experts)
    [ -z "$fam" ] || want+=(attention)
    [ "$fam" != m2 ] || want+=(moe_route_sigmoid moe_experts)
    [ "$fam" != m3 ] || want+=(moe_dispatch moe_expert_ffn moe_combine msa_select msa_attention msa_kl)
    for op in "${want[@]}"; do
      grep -q "^$op	" "$tmp/$name-env/profile.tsv" || { echo "FAIL: $name: no $op row"; exit 1; }
    done
    echo "== $name (np $np)"
    sed -n '/^op profile/,/(untimed)/p' "$tmp/$name-env.log"
  done
  ;;
*)
  echo "run_profile.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac

#!/usr/bin/env bash
# eval_config.sh: a config.json that disagrees with itself or with the weights is refused in
# one line naming the config key, by the tools that load a model:
#   eval_config.sh HELPER BINDIR    (ctest eval_config_refusals; HELPER: test_eval_verify, for a
#                                    model; BINDIR: the minimax-* binaries; point BINDIR at
#                                    another build to compare)
# MT_TEST_TMPDIR set. On a random 4-layer MiniMax-Text-01 export (3 lightning layers, then a
# softmax one):
#   - "max_position_embeddings": 0 is named as that key (it used to load, and the context of 0
#     positions surfaced later as a cache size);
#   - num_hidden_layers 3 with the first three layer types (every tensor it asks for is there)
#     is named as the layer count against the 4 layers of tensors, not as the lightning slope of
#     layer 1 that the layer count changes; 5 layers likewise, not as a missing tensor;
#   - a head model (tests/fixtures/models/head_text01_seq3) is refused by minimax-generate at
#     start: it has no lm_head.
set -euo pipefail
helper="$1"
bin="$2"
tmp="${MT_TEST_TMPDIR:?}/eval_config"
rm -rf "$tmp"
mkdir -p "$tmp"
"$helper" make "$tmp/m" 4
model="$tmp/m/model"
echo '[[1, 2, 3]]' > "$tmp/ids.json"
lin='"linear_attention"'
full='"full_attention"'
variant() { # variant NAME SED: a copy of the model whose config.json SED edits
  cp -r "$model" "$tmp/$1"
  sed -i "$2" "$tmp/$1/config.json"
}
refused() { # refused NAME PATTERN: minimax-forward and -generate refuse NAME saying PATTERN
  local name="$1" want="$2" t rc
  for t in forward generate; do
    rc=0
    if [ "$t" = forward ]; then
      "$bin/minimax-forward" --model "$tmp/$name" --ids "$tmp/ids.json" \
        --out "$tmp/out.safetensors" > "$tmp/$name-$t.log" 2>&1 || rc=$?
    else
      "$bin/minimax-generate" --model "$tmp/$name" --ids "$tmp/ids.json" --max-new-tokens 2 \
        > "$tmp/$name-$t.log" 2>&1 || rc=$?
    fi
    [ "$rc" -ne 0 ] || { echo "FAIL: $t $name: exit 0"; tail -3 "$tmp/$name-$t.log"; exit 1; }
    grep -qF -- "$want" "$tmp/$name-$t.log" ||
      { echo "FAIL: $t $name: want '$want'"; tail -3 "$tmp/$name-$t.log"; exit 1; }
    echo "ok: $t $name: $(grep -m1 -F -- "$want" "$tmp/$name-$t.log" | cut -c1-300)"
  done
}

variant pos0 's/"max_position_embeddings":\t4096/"max_position_embeddings":\t0/'
refused pos0 'key "max_position_embeddings": 0 must be positive'
variant layers3 "s/\"num_hidden_layers\":\t4/\"num_hidden_layers\":\t3/; s/\[$lin, $lin, $lin, $full\]/[$lin, $lin, $lin]/"
refused layers3 "the checkpoint's tensors hold 4 decoder layers (model.layers.0 to model.layers.3) but config.json's num_hidden_layers is 3"
variant layers5 "s/\"num_hidden_layers\":\t4/\"num_hidden_layers\":\t5/; s/\[$lin, $lin, $lin, $full\]/[$lin, $lin, $lin, $full, $full]/"
refused layers5 "the checkpoint's tensors hold 4 decoder layers (model.layers.0 to model.layers.3) but config.json's num_hidden_layers is 5"
# a head model (sequence classification, no lm_head): minimax-generate refuses it at start,
# naming the head (minimax-serve and minimax-chat: tests/train/run_head.sh reward-layouts)
head=tests/fixtures/models/head_text01_seq3
if [ -f "$head/config.json" ]; then
  rc=0
  "$bin/minimax-generate" --model "$head" --ids "$tmp/ids.json" --max-new-tokens 2 \
    > "$tmp/head.log" 2>&1 || rc=$?
  want="a sequence_classification model (config.json's architectures) has no lm_head"
  [ "$rc" -ne 0 ] && grep -qF -- "$want" "$tmp/head.log" ||
    { echo "FAIL: generate of a head model: exit $rc, want '$want'"; tail -3 "$tmp/head.log"; exit 1; }
  echo "ok: generate of a head model: $(grep -m1 -F -- "$want" "$tmp/head.log" | cut -c1-200)"
fi
rm -rf "$tmp"

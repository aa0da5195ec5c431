#!/usr/bin/env bash
# data_chat_tokens.sh: a tokenizer that cannot encode the chat template's control tokens as
# single ids is refused, naming the token, by the data pipeline and by every tool:
#   data_chat_tokens.sh HELPER BINDIR   (ctest data_chat_control_tokens; HELPER:
#                                        test_eval_verify, for a model; BINDIR: the minimax-*
#                                        binaries; point BINDIR at another build to compare)
# MT_TEST_TMPDIR set. The test tokenizer (MiniMax-Text-01's template) less its
# "<end_of_sentence>" added token (the string stays in the BPE vocabulary, so it encodes as 9
# byte-level tokens), and Text-01's tokenizer.json under MiniMax-M2's tokenizer_config.json and
# a template of M2's markup (another model's vocabulary: no "]~!b[" bos_token):
# minimax-data tokenize must refuse both, naming the token; and minimax-train (its data path),
# minimax-generate --prompt, -chat, -eval and -serve the first. The intact tokenizer passes.
set -euo pipefail
helper="$1"
bin="$2"
tmp="${MT_TEST_TMPDIR:?}/data_chat_tokens"
rm -rf "$tmp"
mkdir -p "$tmp"
fix=tests/fixtures
mkdir -p "$tmp/no-eos" "$tmp/other"
cp "$fix/tokenizer/tokenizer_config.json" "$tmp/no-eos/"
sed 's/{"id":2,"content":"<end_of_sentence>"[^}]*},//' "$fix/tokenizer/tokenizer.json" \
  > "$tmp/no-eos/tokenizer.json"
! grep -q '"content":"<end_of_sentence>"' "$tmp/no-eos/tokenizer.json" ||
  { echo "FAIL: the added token is still there"; exit 1; }
cp "$fix/tokenizer_m2/tokenizer_config.json" "$tmp/other/"
cp "$fix/tokenizer/tokenizer.json" "$tmp/other/"
printf '%s' '{% for m in messages %}]~b]{{ m.role }}\n{{ m.content }}[e~[\n{% endfor %}' \
  > "$tmp/m2.jinja"
data="$fix/formats/messages.jsonl"

fail() {
  echo "FAIL: $1"
  tail -5 "$2"
  exit 1
}
refused() { # refused NAME PATTERN CMD...: CMD exits non-zero saying PATTERN, nothing written
  local name="$1" want="$2" rc=0
  shift 2
  "$@" > "$tmp/$name.log" 2>&1 < /dev/null || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: exit 0" "$tmp/$name.log"
  grep -qF -- "$want" "$tmp/$name.log" || fail "$name: want '$want'" "$tmp/$name.log"
  echo "ok: $name: $(grep -m1 -F -- "$want" "$tmp/$name.log" | cut -c1-300)"
}

"$bin/minimax-data" tokenize --data "$data" --tokenizer "$fix/tokenizer" --out "$tmp/ok.h5" \
  > "$tmp/ok.log" 2>&1 || fail "the intact tokenizer was refused" "$tmp/ok.log"
echo "ok: the intact tokenizer tokenizes"
want='control token "<end_of_sentence>" (eos_token of tokenizer_config.json) encodes as'
refused data-no-eos "$tmp/no-eos/tokenizer.json: the chat template's $want 9 tokens" \
  "$bin/minimax-data" tokenize --data "$data" --tokenizer "$tmp/no-eos" --out "$tmp/a.h5"
[ ! -e "$tmp/a.h5" ] || fail "a cache was written" "$tmp/data-no-eos.log"
refused train "$tmp/no-eos/tokenizer.json: the chat template's $want 9 tokens" \
  "$bin/minimax-train" tests/recipes/dist.toml --set "output.dir=$tmp/run" \
  --set "data.cache_dir=$tmp/cache" --set "data.tokenizer_dir=$tmp/no-eos" \
  --set "data.path=$data" --set data.max_length=512 --set train.max_steps=1
refused data-other "$tmp/other/tokenizer.json: the chat template's control token \"]~!b[\" (bos_token" \
  "$bin/minimax-data" tokenize --data "$data" --tokenizer "$tmp/other" --out "$tmp/b.h5" \
  --chat-template "$tmp/m2.jinja"

"$helper" make "$tmp/m"
model="$tmp/m/model"
printf '{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\\n#### 2"}\n' > "$tmp/q.jsonl"
want="$tmp/no-eos/tokenizer.json: the chat template's $want 9 tokens"
refused generate "$want" "$bin/minimax-generate" --model "$model" --tokenizer "$tmp/no-eos" \
  --prompt hello --max-new-tokens 2
refused chat "$want" "$bin/minimax-chat" --model "$model" --tokenizer "$tmp/no-eos" \
  --max-new-tokens 2
refused eval "$want" "$bin/minimax-eval" --model "$model" --tokenizer "$tmp/no-eos" \
  --data "$tmp/q.jsonl" --max-new-tokens 2
refused serve "$want" timeout 60 "$bin/minimax-serve" --model "$model" --tokenizer "$tmp/no-eos" \
  --port 0
rm -rf "$tmp"

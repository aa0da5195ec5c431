/* synth.h: synthetic GSM8K-style word problems, and agentic conversations and preference pairs
 * built on them, deterministic from a seed.
 *
 * The project does not ship GSM8K; the demo and the tests train on these instead. Each problem
 * is a templated multi-step arithmetic story with integer quantities; the answer has one line
 * per step in GSM8K's format, "text a*b = <<a*b=c>>c text", and ends with "#### N". Every step
 * is computed exactly (divisions come out even), so N is the correct answer. Problem i of
 * seed s depends on (s, i) only. */
#pragma once
#include <stdint.h>

#include "core/file_io.h"

/* Problem `index` of the stream `seed`: question and answer replace the buffers' contents. */
void mt_synth_problem(uint64_t seed, int64_t index, mt_strbuf *question, mt_strbuf *answer);

/* Writes problems 0..n-1 as jsonl ({"question": ..., "answer": ...} per line) to path, through
 * a temporary file renamed at the end. Returns 0, or -1 with err set (nothing left behind). */
int mt_synth_write_jsonl(const char *path, uint64_t seed, int64_t n, char *err);

/* Writes n agentic conversations (data/synth_chat.c) as jsonl in the messages format
 * ({"messages", "tools"}), the same way: problem i of the stream solved with a calculator tool,
 * one assistant turn per step ("reasoning_content", a tool call "calculate" with arguments as an
 * object or as JSON text), the tool's {"result": value}, then the final answer with its
 * reasoning; every other one has a system prompt, every third a follow-up question with its
 * answer. */
int mt_synth_write_chat_jsonl(const char *path, uint64_t seed, int64_t n, char *err);

/* Writes n preference pairs (data/synth_pairs.c) as jsonl, the same way, in TRL's
 * conversational implicit-prompt format: {"chosen": [user, assistant], "rejected": [user,
 * assistant]}, the user message problem i's question, the chosen reply its worked answer (no
 * calculator annotations, ending "#### N"), the rejected one a worse reply (no final line, cut
 * halfway, a refusal or a wrong final number, mixed by i) that differs near its end. */
int mt_synth_write_pairs_jsonl(const char *path, uint64_t seed, int64_t n, char *err);

/* Records 0..n-1 of record(state, i) (a cJSON object each, deleted after use) as jsonl into
 * path, as mt_synth_write_file writes. 0, or -1 with err set. */
struct cJSON;
typedef struct {
    uint64_t seed;
    mt_strbuf q, a, b; /* a record's work buffers, freed at the end */
} mt_synth_state;
int mt_synth_write_records(const char *path, int64_t n,
                           struct cJSON *(*record)(mt_synth_state *st, int64_t i), uint64_t seed,
                           char *err);

/* text[0, len) into path through a temporary file renamed at the end. 0, or -1 with err. */
int mt_synth_write_file(const char *path, const char *text, size_t len, char *err);

// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json, encoding exactly like the
// HF `tokenizers` library (GPT-2 byte<->unicode map, ByteLevel/Split/Sequence pre-tokenizers,
// BPE merges, added tokens matched before pre-tokenization). Components it does not implement
// are rejected by name at load time (docs/tokenizer.md lists what is supported).
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_tokenizer mt_tokenizer;

// Growable output of mt_tokenizer_encode. offsets holds 2 per token: byte [start,end) in the
// input text. Zero-initialise ({0}) before the first encode; mt_token_buf_free releases it.
typedef struct {
    int32_t *ids;
    int64_t *offsets;
    int64_t n, cap;
} mt_token_buf;

// Loads tokenizer.json; dies (MT_DIE) with a clear error naming the file and the bad or
// unsupported component.
mt_tokenizer *mt_tokenizer_load(const char *tokenizer_json_path);
void mt_tokenizer_free(mt_tokenizer *tok);
void mt_token_buf_free(mt_token_buf *b);

// Appends the tokens of UTF-8 text[0,len) (added tokens matched first, like HF `tokenizers`
// encode(text, add_special_tokens=False)) with byte offsets into text. Returns the number of
// tokens appended. Invalid UTF-8: returns -1 and appends nothing (caller reports file/line).
// Offsets of an added token are its bytes; those of a BPE token are the bytes of the piece
// in the original text (a token that covers part of a multi-byte character gets the whole
// character's span, like HF).
// A pre-tokenizer regex that fails on the text (PCRE2's match limit: catastrophic
// backtracking, or a run of millions of spaces, where HF stops too) ends the process with a
// message naming the tokenizer file, the pre-tokenizer step, the pattern and the text offset.
int64_t mt_tokenizer_encode(const mt_tokenizer *tok, const char *text, size_t len,
                            mt_token_buf *out);
// The same, returning -1 with the reason in err (errlen bytes) for both failures, invalid
// UTF-8 ("byte N") and a failed regex; nothing is appended then.
int64_t mt_tokenizer_encode_err(const mt_tokenizer *tok, const char *text, size_t len,
                                mt_token_buf *out, char *err, size_t errlen);

int32_t mt_tokenizer_token_to_id(const mt_tokenizer *tok, const char *token); // -1 if absent
const char *mt_tokenizer_id_to_token(const mt_tokenizer *tok, int32_t id);    // NULL if absent
// Size including added tokens: max id + 1 (equals HF get_vocab_size(with_added_tokens=True)
// when the ids have no holes).
int32_t mt_tokenizer_vocab_size(const mt_tokenizer *tok);

// Decodes ids to UTF-8 (byte-level inverse; added tokens verbatim, or dropped when
// skip_special and the token is special). Returns a malloc'ed NUL-terminated string.
char *mt_tokenizer_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n,
                          bool skip_special);

// ---- additions beyond the base API ----

// Like mt_tokenizer_load but returns NULL and writes "<file>: <reason>" into err instead of
// dying.
mt_tokenizer *mt_tokenizer_try_load(const char *path, char *err, size_t errlen);
// Loads from a tokenizer.json held in memory; name is used in messages.
mt_tokenizer *mt_tokenizer_load_json(const char *json, size_t len, const char *name, char *err,
                                     size_t errlen);

// true when id is an added token marked special.
bool mt_tokenizer_is_special(const mt_tokenizer *tok, int32_t id);
// The same as mt_tokenizer_encode_err with the special added tokens encoded as text (HF
// encode(..., split_special_tokens=True): tokenizers' encode_special_tokens; the added tokens
// not marked special are still matched).
int64_t mt_tokenizer_encode_plain(const mt_tokenizer *tok, const char *text, size_t len,
                                  mt_token_buf *out, char *err, size_t errlen);
// The added tokens: how many, and the i-th's content (len bytes, not NUL-terminated), id and
// special flag (NULL when i is out of range).
int32_t mt_tokenizer_n_added(const mt_tokenizer *tok);
const char *mt_tokenizer_added(const mt_tokenizer *tok, int32_t i, size_t *len, int32_t *id,
                               bool *special);
// Clears the buffer (n = 0) keeping its memory.
void mt_token_buf_clear(mt_token_buf *b);

/* data_util.h: helpers shared by the data pipeline tests (temporary directories, files, the
 * fixture locations). Header-only: each test binary includes it once. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "data/chat_template.h"
#include "core/file_io.h"
#include "tests/support/harness.h"

/* A fresh directory under $TMPDIR (or /tmp); removed with rm_tree. */
static inline void make_tmpdir(char *out, size_t n) {
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/mt_data_XXXXXX", base && *base ? base : "/tmp");
    MT_CHECK(mkdtemp(out), "cannot create a temporary directory %s", out);
}

static inline void rm_tree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    MT_CHECK(system(cmd) == 0, "cannot remove %s", dir);
}

static inline void write_bytes(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f, "cannot write %s", path);
    MT_CHECK(fwrite(s, 1, n, f) == n, "short write to %s", path);
    fclose(f);
}
static inline void write_text(const char *path, const char *s) { write_bytes(path, s, strlen(s)); }

static inline bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Number of entries of dir whose name contains `part` (e.g. ".tmp."). */
static inline int count_entries(const char *dir, const char *part) {
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "ls -a '%s' | grep -c -F -- '%s'", dir, part);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = 0;
        pclose(p);
    }
    return n;
}

/* The repository root (ctest sets MT_SOURCE_DIR and runs in it). */
static inline const char *source_dir(void) {
    const char *s = getenv("MT_SOURCE_DIR");
    return s && *s ? s : ".";
}

/* The test tokenizer (tests/fixtures/tokenizer: tokenizer.json + tokenizer_config.json);
 * MT_TEST_TOKENIZER_DIR points the tests at another Hugging Face model directory. */
static inline const char *tokenizer_dir(void) {
    static char dir[4096];
    const char *o = getenv("MT_TEST_TOKENIZER_DIR");
    if (o && *o) return o;
    snprintf(dir, sizeof(dir), "%s/tests/fixtures/tokenizer", source_dir());
    return dir;
}

/* ../shared/data/gsm8k/train.jsonl, or NULL when this checkout has no shared data. */
static inline const char *gsm8k_path(void) {
    static char p[4096];
    const char *s = getenv("MT_SHARED_DIR");
    snprintf(p, sizeof(p), "%s/data/gsm8k/train.jsonl", s && *s ? s : "../shared");
    return file_exists(p) ? p : NULL;
}

/* true when haystack contains needle (for checking error messages). */
static inline bool has(const char *haystack, const char *needle) {
    return haystack && strstr(haystack, needle) != NULL;
}

/* A tokenizer_config.json holding `tmpl` (as a plain string) in dir. */
static inline void write_config(const char *dir, const char *tmpl) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    cJSON *o = cJSON_CreateObject();
    if (tmpl) cJSON_AddStringToObject(o, "chat_template", tmpl);
    char *s = cJSON_Print(o);
    write_text(path, s);
    free(s);
    cJSON_Delete(o);
}

/* The parsed JSON of fixture file `rel` (relative to the repository root), or NULL after a
 * failed check when it does not read or parse. */
static inline cJSON *read_json_fixture(const char *rel) {
    char path[4200], err[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/%s", source_dir(), rel);
    size_t len;
    char *text = mt_file_read(path, &len, err);
    const bool read = text != NULL;
    cJSON *root = read ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    EXPECT(root, "%s", read ? "not JSON" : err); /* err names the file */
    return root;
}

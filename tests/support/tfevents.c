/* tfevents.c: see tfevents.h. */
#include "tests/support/tfevents.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"

uint32_t mt_tfe_crc32c(const void *data, size_t n) {
    const uint8_t *p = data;
    uint32_t crc = ~0u;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
    }
    return ~crc;
}

uint32_t mt_tfe_masked(const void *data, size_t n) {
    const uint32_t c = mt_tfe_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ------------------------------------------------------------------------------------------ */
/* protobuf wire format */

typedef struct {
    const uint8_t *p;
    size_t n, i;
    bool bad;
} wire;

static uint64_t wire_varint(wire *w) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (w->i >= w->n) break;
        const uint8_t b = w->p[w->i++];
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return x;
    }
    w->bad = true;
    return 0;
}

static uint64_t wire_fixed(wire *w, int bytes) {
    uint64_t x = 0;
    if (w->n - w->i < (size_t)bytes) return w->bad = true, 0;
    for (int k = 0; k < bytes; k++) x |= (uint64_t)w->p[w->i + k] << (8 * k);
    w->i += bytes;
    return x;
}

/* The next field: its number and wire type; a length-delimited one's bytes in *sub. */
static bool wire_next(wire *w, int *field, int *type, uint64_t *x, wire *sub) {
    if (w->bad || w->i >= w->n) return false;
    const uint64_t key = wire_varint(w);
    *field = (int)(key >> 3), *type = (int)(key & 7);
    switch (*type) {
    case 0:
        *x = wire_varint(w);
        break;
    case 1:
        *x = wire_fixed(w, 8);
        break;
    case 5:
        *x = wire_fixed(w, 4);
        break;
    case 2: {
        const uint64_t len = wire_varint(w);
        if (w->bad || len > w->n - w->i) return !(w->bad = true);
        *sub = (wire){.p = w->p + w->i, .n = (size_t)len};
        w->i += (size_t)len;
        break;
    }
    default:
        w->bad = true;
    }
    return !w->bad;
}

static void text_of(const wire *s, char *out, size_t n) {
    const size_t k = s->n < n - 1 ? s->n : n - 1;
    memcpy(out, s->p, k);
    out[k] = 0;
}

static bool decode_summary(wire *s, mt_tfevent *e) {
    int f, t;
    uint64_t x;
    wire v, vv;
    e->kind = MT_TFE_OTHER;
    while (wire_next(s, &f, &t, &x, &v)) {
        if (f != 1 || t != 2) continue;
        e->n_values++;
        while (wire_next(&v, &f, &t, &x, &vv)) {
            if (f == 1 && t == 2) text_of(&vv, e->text, sizeof(e->text));
            if (f == 2 && t == 5) {
                const uint32_t bits = (uint32_t)x;
                memcpy(&e->value, &bits, sizeof(bits));
                e->kind = MT_TFE_SCALAR;
            }
        }
        if (v.bad) return false;
    }
    return !s->bad;
}

static bool decode_event(const uint8_t *p, size_t n, mt_tfevent *e) {
    memset(e, 0, sizeof(*e));
    e->kind = MT_TFE_OTHER;
    wire w = {.p = p, .n = n}, s, ss;
    int f, t;
    uint64_t x;
    while (wire_next(&w, &f, &t, &x, &s)) {
        if (f == 1 && t == 1) memcpy(&e->wall_time, &x, sizeof(x));
        if (f == 2 && t == 0) e->step = (int64_t)x;
        if (f == 3 && t == 2) e->kind = MT_TFE_VERSION, text_of(&s, e->text, sizeof(e->text));
        if (f == 5 && t == 2 && !decode_summary(&s, e)) return false;
        if (f == 7 && t == 2) {
            e->kind = MT_TFE_SESSION;
            while (wire_next(&s, &f, &t, &x, &ss))
                if (f == 1 && t == 0) e->status = (int)x;
            if (s.bad) return false;
        }
    }
    return !w.bad;
}

/* ------------------------------------------------------------------------------------------ */
/* records */

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int mt_tfevents_read(const char *path, mt_tfevent **out, char *err, size_t n) {
    size_t len = 0;
    char why[MT_ERR_LEN];
    uint8_t *text = (uint8_t *)mt_file_read(path, &len, why);
    *out = NULL;
    if (!text) return snprintf(err, n, "%s", why), -1;
    int count = 0, cap = 0;
    mt_tfevent *ev = NULL;
    for (size_t at = 0; at < len;) {
        const char *bad = NULL;
        uint64_t dlen = 0;
        if (len - at < 12) {
            bad = "a record shorter than its 12-byte header";
        } else {
            for (int k = 0; k < 8; k++) dlen |= (uint64_t)text[at + k] << (8 * k);
            if (mt_tfe_masked(text + at, 8) != get32(text + at + 8))
                bad = "the length's CRC does not match";
            else if (dlen > len - at - 12 || len - at - 12 - dlen < 4)
                bad = "the record runs past the end of the file";
            else if (mt_tfe_masked(text + at + 12, dlen) != get32(text + at + 12 + dlen))
                bad = "the data's CRC does not match";
        }
        if (!bad && count == cap) {
            cap = cap ? 2 * cap : 64;
            ev = realloc(ev, (size_t)cap * sizeof(*ev));
        }
        if (!bad && !decode_event(text + at + 12, dlen, &ev[count])) bad = "not an Event protobuf";
        if (bad) {
            snprintf(err, n, "%s: record %d at byte %zu: %s", path, count + 1, at, bad);
            free(text);
            free(ev);
            return -1;
        }
        count++;
        at += 12 + dlen + 4;
    }
    free(text);
    *out = ev;
    return count;
}

/* ------------------------------------------------------------------------------------------ */
/* against metrics.jsonl */

static int is_events(const struct dirent *e) { return strstr(e->d_name, "tfevents") != NULL; }

#define FAIL(...) (snprintf(err, n, __VA_ARGS__), false)

/* All events of dir's event files in name order into *all; each file's first the version. */
static bool read_dir(const char *dir, mt_tfevent **all, int *count, int *files, char *err,
                     size_t n) {
    struct dirent **names = NULL;
    const int nf = scandir(dir, &names, is_events, alphasort);
    if (nf < 0) return FAIL("cannot read %s", dir);
    bool ok = true;
    *all = NULL, *count = 0, *files = nf;
    for (int i = 0; i < nf; i++) {
        char path[4300];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        mt_tfevent *ev = NULL;
        const int k = ok ? mt_tfevents_read(path, &ev, err, n) : 0;
        if (k < 0) ok = false;
        if (ok && (k == 0 || ev[0].kind != MT_TFE_VERSION || strcmp(ev[0].text, "brain.Event:2")))
            ok = FAIL("%s: the first record is not file_version \"brain.Event:2\"", path);
        if (ok) {
            *all = realloc(*all, (size_t)(*count + k) * sizeof(**all));
            memcpy(*all + *count, ev, (size_t)k * sizeof(*ev));
            *count += k;
        }
        free(ev);
        free(names[i]);
    }
    free(names);
    return ok;
}

/* The one scalar event of tag at step that is not used yet; -1 when none; twice: -2. */
static int find_scalar(const mt_tfevent *ev, int count, const bool *used, const char *tag,
                       long step) {
    int at = -1;
    for (int i = 0; i < count; i++)
        if (ev[i].kind == MT_TFE_SCALAR && ev[i].step == step && !strcmp(ev[i].text, tag))
            at = (at >= 0 || used[i]) ? -2 : i;
    return at;
}

static bool match_line(const cJSON *o, int lineno, const mt_tfevent *ev, int count, bool *used,
                       int *matched, char *err, size_t n) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(o, "time");
    if (!cJSON_IsString(type) || !cJSON_IsNumber(step) || !cJSON_IsNumber(time))
        return FAIL("metrics.jsonl:%d: no type, step or time", lineno);
    for (const cJSON *c = o->child; c; c = c->next) {
        if (!strcmp(c->string, "type") || !strcmp(c->string, "step") || !strcmp(c->string, "time"))
            continue;
        if (!cJSON_IsNumber(c) && !cJSON_IsNull(c))
            return FAIL("metrics.jsonl:%d: \"%s\" is no number", lineno, c->string);
        char tag[160];
        snprintf(tag, sizeof(tag), "%s/%s", type->valuestring, c->string);
        const long s = (long)step->valuedouble;
        const int at = find_scalar(ev, count, used, tag, s);
        if (at == -1) return FAIL("metrics.jsonl:%d: no event %s at step %ld", lineno, tag, s);
        if (at == -2) return FAIL("the events hold %s at step %ld twice", tag, s);
        const float want = cJSON_IsNull(c) ? NAN : (float)c->valuedouble;
        const float got = ev[at].value;
        if (!(got == want || (isnan(got) && isnan(want))))
            return FAIL("%s at step %ld: event %.9g, metrics.jsonl:%d %.17g (float32 %.9g)", tag, s,
                        got, lineno, c->valuedouble, want);
        if (ev[at].wall_time != time->valuedouble)
            return FAIL("%s at step %ld: wall_time %.17g, metrics.jsonl:%d time %.17g", tag, s,
                        ev[at].wall_time, lineno, time->valuedouble);
        used[at] = true;
        (*matched)++;
    }
    return true;
}

bool mt_tfevents_match(const char *dir, int *files, int *scalars, char *err, size_t n) {
    mt_tfevent *ev = NULL;
    int count = 0;
    *scalars = 0;
    if (!read_dir(dir, &ev, &count, files, err, n)) return free(ev), false;
    if (*files == 0) return FAIL("%s: no event file", dir);
    char path[4300], why[MT_ERR_LEN];
    snprintf(path, sizeof(path), "%s/metrics.jsonl", dir);
    char *text = mt_file_read(path, NULL, why);
    if (!text) return free(ev), FAIL("%s", why);
    bool *used = calloc((size_t)count + 1, sizeof(bool));
    bool ok = true;
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); ok && line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        lineno++;
        ok = cJSON_IsObject(o) ? match_line(o, lineno, ev, count, used, scalars, err, n)
                               : FAIL("metrics.jsonl:%d: not a JSON object", lineno);
        cJSON_Delete(o);
    }
    for (int i = 0; ok && i < count; i++) {
        if (ev[i].kind == MT_TFE_SCALAR && ev[i].n_values != 1)
            ok = FAIL("an event of step %lld holds %d values (one a scalar)", (long long)ev[i].step,
                      ev[i].n_values);
        else if (ev[i].kind == MT_TFE_SCALAR && !used[i])
            ok = FAIL("event %s at step %lld is in no metrics.jsonl line", ev[i].text,
                      (long long)ev[i].step);
        else if (ev[i].kind == MT_TFE_OTHER || (ev[i].kind == MT_TFE_SESSION && ev[i].status != 1))
            ok = FAIL("event %d (step %lld) is neither a version, a scalar nor a START", i,
                      (long long)ev[i].step);
    }
    free(used);
    free(text);
    free(ev);
    return ok;
}

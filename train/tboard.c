/* tboard.c: TensorBoard event files (see tboard.h for the format). */
#include "tboard.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/file_io.h"

#define FILE_VERSION "brain.Event:2"

/* ------------------------------------------------------------------------------------------ */
/* CRC-32C */

uint32_t mt_tboard_crc32c(const void *data, size_t n) {
    static uint32_t table[256];
    static bool ready = false;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
        ready = true;
    }
    const uint8_t *p = data;
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

uint32_t mt_tboard_crc_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

bool mt_tboard_is_events_file(const char *name) { return strstr(name, "tfevents") != NULL; }

/* ------------------------------------------------------------------------------------------ */
/* encoding: protobuf wire format by hand (field key = number << 3 | wire type) */

typedef struct {
    uint8_t b[512];
    size_t n;
} pbuf;

static void put_byte(pbuf *p, uint8_t x) {
    MT_CHECK(p->n < sizeof(p->b), "tensorboard: an event over %zu bytes", sizeof(p->b));
    p->b[p->n++] = x;
}

static void put_varint(pbuf *p, uint64_t x) {
    for (; x >= 0x80; x >>= 7) put_byte(p, (uint8_t)(x | 0x80));
    put_byte(p, (uint8_t)x);
}

static void put_le(pbuf *p, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; i++) put_byte(p, (uint8_t)(x >> (8 * i)));
}

static void put_bytes(pbuf *p, int field, const void *data, size_t n) {
    put_varint(p, (uint64_t)field << 3 | 2);
    put_varint(p, n);
    for (size_t i = 0; i < n; i++) put_byte(p, ((const uint8_t *)data)[i]);
}

/* Event's wall_time (1, fixed64) and step (2, varint). */
static void put_event_head(pbuf *p, double wall_time, long step) {
    uint64_t bits;
    memcpy(&bits, &wall_time, sizeof(bits));
    put_varint(p, 1 << 3 | 1);
    put_le(p, bits, 8);
    put_varint(p, 2 << 3 | 0);
    put_varint(p, (uint64_t)(int64_t)step);
}

/* One record: length, its masked CRC, the data, its masked CRC. */
static void tboard_record(mt_tboard *tb, const pbuf *data) {
    uint8_t head[12];
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)data->n >> (8 * i));
    uint32_t c = mt_tboard_crc_mask(mt_tboard_crc32c(head, 8));
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(c >> (8 * i));
    uint8_t tail[4];
    c = mt_tboard_crc_mask(mt_tboard_crc32c(data->b, data->n));
    for (int i = 0; i < 4; i++) tail[i] = (uint8_t)(c >> (8 * i));
    const bool ok = fwrite(head, 1, 12, tb->f) == 12 &&
                    fwrite(data->b, 1, data->n, tb->f) == data->n && fwrite(tail, 1, 4, tb->f) == 4;
    MT_CHECK(ok, "%s: write failed: %s", tb->path, strerror(errno));
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mt_tboard_scalar(mt_tboard *tb, long step, double wall_time, const char *tag, double value) {
    if (!tb->f) return;
    pbuf v = {.n = 0}, s = {.n = 0}, e = {.n = 0};
    const float f = (float)value;
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    put_bytes(&v, 1, tag, strlen(tag));
    put_varint(&v, 2 << 3 | 5);
    put_le(&v, bits, 4);
    put_bytes(&s, 1, v.b, v.n);
    put_event_head(&e, wall_time, step);
    put_bytes(&e, 5, s.b, s.n);
    tboard_record(tb, &e);
}

void mt_tboard_flush(mt_tboard *tb) {
    if (!tb->f) return;
    MT_CHECK(fflush(tb->f) == 0 && !ferror(tb->f), "%s: write failed: %s", tb->path,
             strerror(errno));
}

void mt_tboard_close(mt_tboard *tb) {
    if (!tb->f) return;
    mt_tboard_flush(tb);
    fclose(tb->f);
    tb->f = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* reading records back (for a resume's cut) */

/* The step of an Event (its field 2) and whether it is the file version (field 3); false when
 * the data is no well-formed protobuf. */
static bool event_step(const uint8_t *p, size_t n, long *step, bool *version) {
    *step = 0, *version = false;
    for (size_t i = 0; i < n;) {
        uint64_t key = 0, x = 0;
        for (int shift = 0;; shift += 7) {
            if (i >= n || shift > 63) return false;
            key |= (uint64_t)(p[i] & 0x7f) << shift;
            if (!(p[i++] & 0x80)) break;
        }
        switch (key & 7) {
        case 0:
            for (int shift = 0;; shift += 7) {
                if (i >= n || shift > 63) return false;
                x |= (uint64_t)(p[i] & 0x7f) << shift;
                if (!(p[i++] & 0x80)) break;
            }
            if (key >> 3 == 2) *step = (long)(int64_t)x;
            break;
        case 1:
            i += 8;
            break;
        case 5:
            i += 4;
            break;
        case 2:
            for (int shift = 0;; shift += 7) {
                if (i >= n || shift > 63) return false;
                x |= (uint64_t)(p[i] & 0x7f) << shift;
                if (!(p[i++] & 0x80)) break;
            }
            if (x > n - i) return false;
            if (key >> 3 == 3) *version = true;
            i += x;
            break;
        default:
            return false;
        }
        if (i > n) return false;
    }
    return true;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct {
    size_t at, len; /* the whole record's bytes in the file */
    long step;
    bool version;
} record_span;

/* The next whole record at *pos of text (len bytes) into r; false at the end or at a torn last
 * record; a CRC or protobuf that does not match stops with an error into err (*bad true). */
static bool record_next(const char *path, const uint8_t *text, size_t len, size_t *pos,
                        record_span *r, bool *bad, char *err, size_t n) {
    *bad = false;
    const size_t at = *pos;
    if (len - at < 12) return false;
    uint64_t dlen = 0;
    for (int i = 0; i < 8; i++) dlen |= (uint64_t)text[at + i] << (8 * i);
    if (mt_tboard_crc_mask(mt_tboard_crc32c(text + at, 8)) != le32(text + at + 8)) {
        snprintf(err, n, "%s: the record at byte %zu has a wrong length CRC", path, at);
        return !(*bad = true);
    }
    if (dlen > len - at - 12 || len - at - 12 - dlen < 4) return false; /* torn */
    const uint8_t *d = text + at + 12;
    if (mt_tboard_crc_mask(mt_tboard_crc32c(d, dlen)) != le32(d + dlen) ||
        !event_step(d, dlen, &r->step, &r->version)) {
        snprintf(err, n, "%s: the record at byte %zu has a wrong data CRC or is no event", path,
                 at);
        return !(*bad = true);
    }
    r->at = at, r->len = 12 + dlen + 4;
    *pos = at + r->len;
    return true;
}

long mt_tboard_records_after(const char *path, long step) {
    size_t len = 0, pos = 0;
    char why[MT_ERR_LEN];
    char *text = mt_file_read(path, &len, why);
    if (!text) return -1;
    long count = 0;
    record_span r;
    bool bad;
    while (record_next(path, (const uint8_t *)text, len, &pos, &r, &bad, why, sizeof(why)))
        count += !r.version && r.step > step;
    free(text);
    return bad ? -1 : count;
}

/* path's bytes, written through a temporary file beside it (.tboard-cut-<pid>.tmp: no event
 * file's name, which TensorBoard would read; --overwrite removes one left by a crash) and
 * renamed over it. */
static bool write_whole(const char *path, const void *data, size_t len, char *err, size_t n) {
    char tmp[1300];
    const char *slash = strrchr(path, '/');
    snprintf(tmp, sizeof(tmp), "%.*s.tboard-cut-%d.tmp", slash ? (int)(slash - path + 1) : 0, path,
             (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return snprintf(err, n, "cannot write %s: %s", tmp, strerror(errno)), false;
    const bool ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int e = errno;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        snprintf(err, n, "cannot write %s: %s", path, strerror(ok ? errno : e));
        return false;
    }
    return true;
}

bool mt_tboard_cut(const char *path, long step, const char *aside, char *err, size_t n) {
    size_t len = 0, pos = 0;
    char why[MT_ERR_LEN];
    char *text = mt_file_read(path, &len, why);
    if (!text) return snprintf(err, n, "%s", why), false;
    uint8_t *keep = mt_malloc(len + 1, "tensorboard: kept records");
    uint8_t *moved = mt_malloc(len + 1, "tensorboard: moved records");
    size_t nk = 0, nm = 0;
    long n_moved = 0;
    record_span r;
    bool bad;
    const uint8_t *u = (const uint8_t *)text;
    while (record_next(path, u, len, &pos, &r, &bad, err, n)) {
        const bool later = !r.version && r.step > step;
        if (r.version || !later) memcpy(keep + nk, u + r.at, r.len), nk += r.len;
        if (r.version || later) memcpy(moved + nm, u + r.at, r.len), nm += r.len;
        n_moved += later;
    }
    bool ok = !bad;
    if (ok && aside && n_moved) ok = write_whole(aside, moved, nm, err, n);
    if (ok && nk != len) ok = write_whole(path, keep, nk, err, n);
    free(text);
    free(keep);
    free(moved);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* opening */

/* Cuts (resume_step > 0) or removes (0) the event files in dir; the largest Unix-seconds field
 * of their names into *newest (0: none). */
static void tboard_existing(const char *dir, int resume_step, long *newest) {
    *newest = 0;
    DIR *d = opendir(dir);
    MT_CHECK(d, "cannot read %s: %s", dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        if (!mt_tboard_is_events_file(e->d_name)) continue;
        char path[1200], err[MT_ERR_LEN];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (resume_step > 0) {
            MT_CHECK(mt_tboard_cut(path, resume_step, NULL, err, sizeof(err)),
                     "%s (move the file out of output.dir to resume without it)", err);
            const char *t = strstr(e->d_name, "tfevents.");
            const long secs = t ? strtol(t + 9, NULL, 10) : 0;
            if (secs > *newest) *newest = secs;
        } else {
            MT_CHECK(unlink(path) == 0, "cannot remove %s: %s", path, strerror(errno));
        }
    }
    closedir(d);
}

void mt_tboard_open(mt_tboard *tb, const char *dir, int resume_step) {
    memset(tb, 0, sizeof(*tb));
    long newest;
    tboard_existing(dir, resume_step, &newest);
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    /* this run's file sorts after the files it continues, whatever the clocks say */
    long secs = (long)time(NULL);
    if (secs <= newest) secs = newest + 1;
    for (int k = 0; !tb->f && k < 1000; k++) {
        snprintf(tb->path, sizeof(tb->path), "%s/events.out.tfevents.%010ld.%s.%d.%d", dir, secs,
                 host, (int)getpid(), k);
        tb->f = fopen(tb->path, "wbx");
        MT_CHECK(tb->f || errno == EEXIST, "cannot write %s: %s", tb->path, strerror(errno));
    }
    MT_CHECK(tb->f, "cannot create an event file in %s", dir);
    const double now = wall_now();
    pbuf e = {.n = 0};
    put_event_head(&e, now, 0);
    put_bytes(&e, 3, FILE_VERSION, strlen(FILE_VERSION));
    tboard_record(tb, &e);
    if (resume_step > 0) {
        const uint8_t start[2] = {1 << 3 | 0, 1}; /* SessionLog.status = START */
        e.n = 0;
        put_event_head(&e, now, resume_step + 1L);
        put_bytes(&e, 7, start, sizeof(start));
        tboard_record(tb, &e);
    }
    mt_tboard_flush(tb);
}

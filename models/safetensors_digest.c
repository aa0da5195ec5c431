/* safetensors_digest.c: the digest the writer records in every file's header, computed at
 * once (mt_digest64) or fed in pieces while the data is read (mt_digest_update), and checked
 * against the header (see safetensors.h). */
#include <stdio.h>
#include <string.h>

#include "models/safetensors.h"

#define DG_PRIME 0x100000001b3ull
#define DG_BASIS 0xcbf29ce484222325ull

/* Four FNV-1a lanes over little-endian 64-bit words (lane k takes words k, k + 4, ...), the
 * remaining bytes into lane 0 one by one, then the lanes and the length folded with FNV-1a.
 * Each step is a bijection of the lane, so a change within one 8-byte word is always seen;
 * memory-bound where byte-wise FNV-1a is not. */
void mt_digest_init(mt_digest *d) {
    memset(d, 0, sizeof(*d));
    for (int k = 0; k < 4; k++) d->h[k] = DG_BASIS ^ (uint64_t)k;
}

static void dg_blocks(uint64_t h[4], const uint8_t *p, size_t n_blocks) {
    uint64_t h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
    for (size_t i = 0; i < n_blocks; i++, p += 32) {
        uint64_t w[4];
        memcpy(w, p, 32);
        h0 = (h0 ^ w[0]) * DG_PRIME;
        h1 = (h1 ^ w[1]) * DG_PRIME;
        h2 = (h2 ^ w[2]) * DG_PRIME;
        h3 = (h3 ^ w[3]) * DG_PRIME;
    }
    h[0] = h0, h[1] = h1, h[2] = h2, h[3] = h3;
}

void mt_digest_update(mt_digest *d, const void *data, size_t n) {
    const uint8_t *p = data;
    d->n += n;
    if (d->n_part > 0) { /* complete the pending block first */
        const size_t take = n < (size_t)(32 - d->n_part) ? n : (size_t)(32 - d->n_part);
        memcpy(d->part + d->n_part, p, take);
        d->n_part += (int)take;
        p += take, n -= take;
        if (d->n_part < 32) return;
        dg_blocks(d->h, d->part, 1);
        d->n_part = 0;
    }
    dg_blocks(d->h, p, n / 32);
    memcpy(d->part, p + n / 32 * 32, n % 32);
    d->n_part = (int)(n % 32);
}

uint64_t mt_digest_final(const mt_digest *d) {
    uint64_t h0 = d->h[0];
    for (int i = 0; i < d->n_part; i++) h0 = (h0 ^ d->part[i]) * DG_PRIME;
    uint64_t r = DG_BASIS;
    r = (r ^ h0) * DG_PRIME;
    for (int k = 1; k < 4; k++) r = (r ^ d->h[k]) * DG_PRIME;
    return (r ^ d->n) * DG_PRIME;
}

uint64_t mt_digest64(const void *data, size_t n) {
    mt_digest d;
    mt_digest_init(&d);
    mt_digest_update(&d, data, n);
    return mt_digest_final(&d);
}

bool mt_safetensors_digest_check(const mt_safetensors *st, int file, uint64_t digest, char *err,
                                 size_t n) {
    const char *want = mt_safetensors_file_digest(st, file);
    if (!want[0]) return true;
    char now[40];
    snprintf(now, sizeof(now), MT_ST_DIGEST_ALGO ":%016llx", (unsigned long long)digest);
    if (!strcmp(now, want)) return true;
    snprintf(err, n,
             "%s: the data does not match the digest its header records (%s, the data gives "
             "%s): the file is damaged",
             mt_safetensors_file_path(st, file), want, now);
    return false;
}

bool mt_safetensors_verify(const mt_safetensors *st, int file, bool *checked, char *err, size_t n) {
    *checked = mt_safetensors_file_digest(st, file)[0] != 0;
    if (!*checked) return true;
    uint64_t len;
    const uint8_t *data = mt_safetensors_file_data(st, file, &len);
    return mt_safetensors_digest_check(st, file, mt_digest64(data, (size_t)len), err, n);
}

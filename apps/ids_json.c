/* ids_json.c: token id batches as JSON (apps/ids_json.h). */
#include "apps/ids_json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/check.h"
#include "core/file_io.h"

static char *ids_read_file(const char *path) {
    char err[1024];
    char *buf = mt_file_read_max(path, NULL, 0, err, sizeof(err));
    MT_CHECK(buf, "%s", err);
    return buf;
}

int32_t *mt_ids_json_load(const char *path, int *B, int *T) {
    char *text = ids_read_file(path);
    cJSON *root = cJSON_Parse(text);
    MT_CHECK(root, "%s: not valid JSON (near byte %ld)", path,
             cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - text) : -1L);
    MT_CHECK(cJSON_IsArray(root) && cJSON_GetArraySize(root) > 0,
             "%s: expected a non-empty list of lists of token ids", path);
    const int rows = cJSON_GetArraySize(root);
    const cJSON *first = cJSON_GetArrayItem(root, 0);
    MT_CHECK(cJSON_IsArray(first) && cJSON_GetArraySize(first) > 0,
             "%s: row 0 is not a non-empty list", path);
    const int cols = cJSON_GetArraySize(first);
    int32_t *ids = mt_malloc((size_t)rows * (size_t)cols * sizeof(int32_t), path);
    int r = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, root) {
        MT_CHECK(cJSON_IsArray(row) && cJSON_GetArraySize(row) == cols,
                 "%s: row %d is not a list of %d ids (all rows need the same length)", path, r,
                 cols);
        int j = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, row) {
            MT_CHECK(cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
                         fabs(v->valuedouble) <= 2147483647.0,
                     "%s: row %d column %d is not an int32", path, r, j);
            ids[(size_t)r * (size_t)cols + (size_t)j] = (int32_t)v->valuedouble;
            j++;
        }
        r++;
    }
    cJSON_Delete(root);
    free(text);
    *B = rows;
    *T = cols;
    return ids;
}

void mt_ids_check_range(const int32_t *ids, int B, int T, int V, int allowed, const char *what,
                        const char *path) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t x = ids[(size_t)b * (size_t)T + (size_t)t];
            MT_CHECK((x >= 0 && x < V) || (allowed != 0 && x == allowed),
                     "%s: %s row %d column %d = %d is outside [0, %d)%s", path, what, b, t, x, V,
                     allowed != 0 ? " and not the ignore index" : "");
        }
}

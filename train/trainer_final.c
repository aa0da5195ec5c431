/* trainer_final.c: the model-only <output.dir>/final/ a finished run ends with
 * (output.export_final; docs/checkpoints.md, "What a run ships"). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_io.h"
#include "train/trainer_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* final/ */

/* A checkpoint's entry that final/ takes: the export, not the training state nor the recipe. */
static bool final_takes(const char *name) {
    if (name[0] == '.') return false;
    if (!strncmp(name, "state", 5) && strstr(name, ".h5")) return false;
    return strcmp(name, "recipe.toml") != 0;
}

/* src into dst: a hard link (same file system: no copy, and a checkpoint pruned later leaves
 * final/'s files in place), else a copy. */
static void final_link(const char *src, const char *dst) {
    if (link(src, dst) == 0) return;
    char err[MT_ERR_LEN + MT_PATH_MAX];
    size_t len;
    char *data = mt_file_read_max(src, &len, (size_t)1 << 40, err, sizeof(err));
    MT_CHECK(data, "%s", err);
    mt_file_write_atomic(dst, data, len);
    free(data);
}

/* The export's files of src (a checkpoint) into dst, one directory level below too. */
static void final_take_dir(const char *src, const char *dst, bool top) {
    DIR *d = opendir(src);
    MT_CHECK(d, "cannot read %s: %s", src, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        if (top ? !final_takes(e->d_name) : e->d_name[0] == '.') continue;
        char from[MT_PATH_MAX + 512], to[MT_PATH_MAX + 512], err[MT_ERR_LEN + MT_PATH_MAX];
        snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
        snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
        struct stat sb;
        if (stat(from, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode) && top) {
            MT_CHECK(mt_dir_make(to, err, sizeof(err)), "%s", err);
            final_take_dir(from, to, false);
        } else if (S_ISREG(sb.st_mode)) {
            final_link(from, to);
        }
    }
    closedir(d);
}

void trainer_final_write(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                         const trainer_data *data, trainer_out *out, int step) {
    if (!rc->output_export_final) return;
    char dir[MT_PATH_MAX + 64], tmp[MT_PATH_MAX + 80], ckpt[MT_PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/final", rc->output_dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
    snprintf(ckpt, sizeof(ckpt), "%s/checkpoint-%d", rc->output_dir, step);
    mt_cleanup_add(tmp);
    if (d->comm->rank == 0) {
        char err[MT_ERR_LEN + MT_PATH_MAX];
        mt_remove_tree(tmp);
        MT_CHECK(mt_dir_make(tmp, err, sizeof(err)), "%s", err);
    }
    d->comm->barrier(d->comm);
    if (rc->output_export) { /* the last checkpoint's export, linked */
        if (d->comm->rank == 0) final_take_dir(ckpt, tmp, true);
    } else {
        trainer_export(rc, d, m, data->tokenizer_dir, &out->export_stage, tmp);
    }
    if (d->comm->rank == 0) {
        MT_CHECK(mt_remove_tree(dir), "cannot remove %s: %s", dir, strerror(errno));
        MT_CHECK(rename(tmp, dir) == 0, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
        LOG0(d->comm, "saved %s: the model of step %d, without optimizer state (%s export)\n", dir,
             step, rc->output_export_dtype);
    }
    d->comm->barrier(d->comm);
    mt_cleanup_remove(tmp);
}

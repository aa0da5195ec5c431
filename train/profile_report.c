/* profile_report.c: see profile_report.h. */
#include "train/profile_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool mt_profile_wanted(bool flag) {
    const char *e = getenv("MT_PROFILE");
    return flag || (e && e[0] && strcmp(e, "0") != 0);
}

static const char *dir_name(int dir) {
    return dir == MT_PROFILE_FWD ? "fwd" : dir == MT_PROFILE_BWD ? "bwd" : "step";
}

int mt_profile_rows(const mt_profile *p, mt_profile_row *rows, int max) {
    int n = 0;
    for (int op = 0; op < MT_OP_COUNT; op++)
        for (int d = 0; d < 2; d++)
            if (p->op[op][d].calls > 0 && n < max)
                rows[n++] = (mt_profile_row){mt_op_name((mt_op)op), dir_name(d), p->op[op][d]};
    for (int i = 0; i < p->n_extra && n < max; i++)
        rows[n++] = (mt_profile_row){p->extra_name[i], dir_name(p->extra_dir[i]), p->extra[i]};
    /* by time, longest first; ties by name and direction (a stable order for equal rows) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const mt_profile_row *a = &rows[j - 1], *b = &rows[j];
            int c = a->s.sec < b->s.sec ? 1 : a->s.sec > b->s.sec ? -1 : strcmp(a->op, b->op);
            if (!c) c = strcmp(a->dir, b->dir);
            if (c <= 0) break;
            const mt_profile_row t = rows[j - 1];
            rows[j - 1] = rows[j];
            rows[j] = t;
        }
    return n;
}

/* The seconds the rows account for. */
static double rows_sec(const mt_profile_row *rows, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += rows[i].s.sec;
    return s;
}

void mt_profile_print(FILE *out, const mt_profile *p, const char *what) {
    mt_profile_row rows[2 * MT_OP_COUNT + MT_PROFILE_MAX_EXTRA];
    const int n = mt_profile_rows(p, rows, (int)(sizeof(rows) / sizeof(rows[0])));
    const double steps = p->steps > 0 ? p->steps : 1, step = p->step_sec / steps;
    fprintf(out,
            "op profile (%s): %d steps, %.1f ms per step; FLOPs and bytes from the shapes "
            "(docs/training.md, \"Op profile\"; * = upper bound)\n",
            what, p->steps, 1e3 * step);
    fprintf(out, "  %-22s %-4s %9s %10s %7s %10s %9s %9s\n", "op", "dir", "calls", "ms/step",
            "share", "GFLOP/s", "GB/s", "GFLOP");
    for (int i = 0; i < n; i++) {
        const mt_profile_stat *s = &rows[i].s;
        const double sec = s->sec > 0 ? s->sec : 1e-30;
        fprintf(out, "  %-22s %-4s %9.1f %10.3f %6.1f%% %9.2f%s %9.2f %9.3f\n", rows[i].op,
                rows[i].dir, (double)s->calls / steps, 1e3 * s->sec / steps,
                p->step_sec > 0 ? 100 * s->sec / p->step_sec : 0, 1e-9 * s->flops / sec,
                s->upper ? "*" : " ", 1e-9 * s->bytes / sec, 1e-9 * s->flops / steps);
    }
    const double other = p->step_sec - rows_sec(rows, n);
    fprintf(out, "  %-22s %-4s %9s %10.3f %6.1f%%\n", "(untimed)", "-", "-", 1e3 * other / steps,
            p->step_sec > 0 ? 100 * other / p->step_sec : 0);
    fflush(out);
}

bool mt_profile_write_tsv(const char *path, const mt_profile *p, char *err, size_t errlen) {
    mt_profile_row rows[2 * MT_OP_COUNT + MT_PROFILE_MAX_EXTRA];
    const int n = mt_profile_rows(p, rows, (int)(sizeof(rows) / sizeof(rows[0])));
    const double steps = p->steps > 0 ? p->steps : 1;
    char tmp[1200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return false;
    }
    fprintf(f, "op\tdir\tcalls_per_step\tms_per_step\tshare\tgflop_per_step\tgbyte_per_step\t"
               "gflops\tgbps\tupper_bound\n");
    for (int i = 0; i < n; i++) {
        const mt_profile_stat *s = &rows[i].s;
        const double sec = s->sec > 0 ? s->sec : 1e-30;
        fprintf(f, "%s\t%s\t%.3f\t%.6f\t%.6f\t%.6g\t%.6g\t%.6g\t%.6g\t%d\n", rows[i].op,
                rows[i].dir, (double)s->calls / steps, 1e3 * s->sec / steps,
                p->step_sec > 0 ? s->sec / p->step_sec : 0, 1e-9 * s->flops / steps,
                1e-9 * s->bytes / steps, 1e-9 * s->flops / sec, 1e-9 * s->bytes / sec,
                s->upper ? 1 : 0);
    }
    const double other = p->step_sec - rows_sec(rows, n);
    fprintf(f, "(untimed)\t-\t0\t%.6f\t%.6f\t0\t0\t0\t0\t0\n", 1e3 * other / steps,
            p->step_sec > 0 ? other / p->step_sec : 0);
    fprintf(f, "(step)\t-\t%d\t%.6f\t1\t0\t0\t0\t0\t0\n", p->steps, 1e3 * p->step_sec / steps);
    const bool ok = !ferror(f);
    const int e = errno;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno ? errno : e));
        unlink(tmp);
        return false;
    }
    return true;
}

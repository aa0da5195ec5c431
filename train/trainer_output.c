/* trainer_output.c: what a run settles before any model is built about its batch and its
 * output directory (docs/training.md, "Outputs" and "Resume"): the global batch, the inputs
 * that output.dir must not hold, a resume's train.max_steps against the checkpoint's step, and
 * output.dir itself (its lock, another run's results, --overwrite, --rewind; output_dir.h),
 * with the resolved recipe written into it; and the refusal that stops every rank when rank 0
 * found a reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/safetensors.h"
#include "train/trainer_internal.h"

void trainer_resolve_batch(mt_recipe *rc, const mt_comm *comm, char *why, size_t n) {
    const int64_t G = rc->train_global_batch_size, B = rc->train_per_device_train_batch_size,
                  N = comm->size;
    if (G > 0) {
        if (G % (B * N)) {
            snprintf(why, n,
                     "train.global_batch_size = %lld is not a multiple of "
                     "train.per_device_train_batch_size x ranks = %lld x %lld: choose a "
                     "per-device batch or a rank count whose product divides it",
                     (long long)G, (long long)B, (long long)N);
            return;
        }
        if (rc->train_gradient_accumulation_steps != 1 &&
            rc->train_gradient_accumulation_steps != G / (B * N))
            LOG0(comm,
                 "note: train.gradient_accumulation_steps = %d is replaced by %lld, from "
                 "train.global_batch_size\n",
                 rc->train_gradient_accumulation_steps, (long long)(G / (B * N)));
        rc->train_gradient_accumulation_steps = (int)(G / (B * N));
    }
}

/* The global batch (trainer_resolve_batch's), once nothing refused the run: the refusal is the
 * first line of a run that does not start. */
static void trainer_batch_print(const mt_recipe *rc, int64_t N) {
    const int64_t B = rc->train_per_device_train_batch_size;
    const int A = rc->train_gradient_accumulation_steps;
    printf("global batch: %lld samples per step = %lld rank%s x %lld row%s x %d accumulation "
           "step%s%s\n",
           (long long)(B * N * A), (long long)N, N == 1 ? "" : "s", (long long)B, B == 1 ? "" : "s",
           A, A == 1 ? "" : "s",
           rc->train_global_batch_size > 0 ? " (train.global_batch_size)" : "");
}

/* The inputs of the run as the recipe names them (what output.dir must not hold). */
static int trainer_inputs(const mt_recipe *rc, mt_outdir_input *in) {
    int n = 0;
    in[n++] = (mt_outdir_input){"model.path", rc->model_path};
    in[n++] = (mt_outdir_input){"model.config", rc->model_config};
    if (strcmp(rc->data_path, "synthetic")) in[n++] = (mt_outdir_input){"data.path", rc->data_path};
    for (int i = 0; i < rc->data_n_paths; i++)
        in[n++] = (mt_outdir_input){"data.paths", rc->data_paths[i]};
    in[n++] = (mt_outdir_input){"data.eval_path", rc->data_eval_path};
    in[n++] = (mt_outdir_input){"data.tokenizer_dir", rc->data_tokenizer_dir};
    in[n++] = (mt_outdir_input){"data.chat_template", rc->data_chat_template};
    if (strcmp(rc->eval_generate_data, "synthetic"))
        in[n++] = (mt_outdir_input){"eval.generate_data", rc->eval_generate_data};
    in[n++] = (mt_outdir_input){"eval.generate_shots_file", rc->eval_generate_shots_file};
    return n;
}

/* A resume's step from the checkpoint's manifest (-1: none; trainer_resume_check_recipe says
 * so), and train.max_steps against it when the recipe gives the steps (train.num_train_epochs
 * gives them once the data is read: trainer_resume checks them then). */
static long trainer_resume_step(const mt_recipe *rc, const char *resume, char *why, size_t n) {
    mt_train_state *st = mt_malloc(sizeof(mt_train_state), "the checkpoint's manifest");
    const long step = mt_checkpoint_read_state(resume, st) ? (long)st->step : -1;
    free(st);
    if (step >= 0 && rc->train_num_train_epochs == 0 && rc->train_max_steps <= step)
        trainer_resume_steps_refusal(resume, rc->train_max_steps, step, why, n);
    return step;
}

void trainer_open_output(const mt_recipe *rc, const mt_comm *comm, mt_outdir *od,
                         const char *resume, bool overwrite, bool rewind, bool verbose, char *why,
                         size_t n) {
    if (comm->rank != 0 || why[0]) return;
    mt_outdir_input in[16 + MT_DATA_FILES];
    if (!mt_outdir_inputs_check(rc->output_dir, in, trainer_inputs(rc, in), why, n)) return;
    mt_outdir_mode mode = {.resume = resume, .overwrite = overwrite, .rewind = rewind};
    if (resume) mode.resume_step = trainer_resume_step(rc, resume, why, n);
    if (why[0] || !mt_outdir_open(od, rc->output_dir, &mode, why, n)) return;
    char text[16384], path[MT_PATH_MAX + 32];
    mt_recipe_format(rc, text, sizeof(text));
    snprintf(path, sizeof(path), "%s/recipe.toml", rc->output_dir);
    mt_file_write_atomic(path, text, strlen(text));
    if (verbose)
        printf("# minimax-train: resolved recipe (%d ranks)\n%s\n", comm->size, text);
    else
        printf("recipe: the resolved recipe is %s (--verbose prints it)\n", path);
    trainer_batch_print(rc, comm->size);
}

void trainer_refuse_if(const trainer_device *d, mt_outdir *od, const char *why) {
    int64_t bad = d->comm->rank == 0 && why[0];
    d->host->bcast(d->host, &bad, sizeof(bad), 0);
    if (!bad) return;
    if (d->comm->rank == 0) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", why);
        mt_outdir_close(od);
    }
    mt_comm_finalize(d->host);
    exit(2);
}

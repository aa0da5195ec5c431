/* trainer_run.c: the training loop, after the setup (train/trainer_setup.c): the resume, then
 * per step the optimizer step (train/trainer_step.c), loss.csv's row, the evaluations
 * (train.eval_steps and at the end: train/trainer_eval.c; eval.generate_*:
 * train/trainer_generate.c), the checkpoints (output.save_steps and at the end:
 * train/trainer_checkpoint.c), the watchdog's limit (train/trainer_watch.c), and the stop
 * signals.
 *
 * SIGUSR1, SIGTERM or SIGINT on any rank (mpirun forwards SIGUSR1 to every rank; Slurm sends
 * SIGUSR1 before the time limit with --signal=USR1@SECONDS, SIGTERM on scancel) stops the job
 * after the step in progress, with a checkpoint: each step ends with one small all-reduce that
 * asks whether a rank got one. */
#include "train/trainer_run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* stop signals: finish the step, checkpoint, exit MT_EXIT_STOPPED */

static volatile sig_atomic_t trainer_stop_signal = 0;

/* The first signal asks for the stop; a second SIGTERM or SIGINT ends the process at once, as
 * by default (launchers escalate that way, and a rank stuck in a collective must still go). */
static void trainer_on_stop_signal(int sig) {
    if (trainer_stop_signal && (sig == SIGTERM || sig == SIGINT)) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    trainer_stop_signal = sig;
}

/* SIGUSR1/SIGTERM/SIGINT: stop after the step (trainer_on_stop_signal); SIGXFSZ: ignored. */
static void trainer_set_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = trainer_on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    MT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGTERM, &sa, NULL) == 0 &&
                 sigaction(SIGINT, &sa, NULL) == 0,
             "cannot install the SIGUSR1/SIGTERM/SIGINT handlers: %s", strerror(errno));
    /* A file size limit (ulimit -f, set by some batch systems) then fails the write with EFBIG,
     * which the writers report naming the file, instead of killing the rank with no word */
    signal(SIGXFSZ, SIG_IGN);
}

/* Whether a rank got a stop signal: asked by every rank after every step, so all stop after
 * the same one. */
static bool trainer_stop_requested(mt_comm *host) {
    int64_t got = trainer_stop_signal != 0;
    host->allreduce_i64(host, &got, 1);
    return got > 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the log */

/* Each rank's memory after the first step: the counters hold its collectives (a resume gathers
 * none). */
static void trainer_report_memory(const trainer_device *d, const trainer_model *m) {
    const mt_zero *z = &m->zero;
    double mib = 1.0 / (1 << 20);
    double owned = (double)mt_zero_owned_bytes(z), slots = (double)mt_zero_slot_bytes(z);
    int64_t total = 0;
    for (int b = 0; b < m->model.n_buckets; b++) total += m->model.bucket_numel[b];
    char offload[128] = "";
    if (z->offload)
        snprintf(offload, sizeof(offload), " (moments%s offloaded: %.2f MiB of host memory)",
                 z->master_on_host ? " and master weights" : "",
                 (double)mt_zero_host_bytes(z) * mib);
    char node[96] = "";
    if (z->node)
        snprintf(node, sizeof(node), " + the node's shared parameters %.2f MiB",
                 (double)mt_zero_node_bytes(z) * mib);
    printf("memory[rank %d, %s]: owned params+grads%s %.2f MiB%s (%lld of %lld parameters), "
           "gathered buffers peak %.2f MiB%s, activation arena %.0f MiB (peak use %.2f MiB, "
           "%.2f MiB without kernel scratch%s); step collectives: %lld all-gathers, %lld "
           "reduce-scatters\n",
           d->comm->rank, d->be->name, z->offload ? "" : "+moments", owned * mib, offload,
           (long long)z->total_shard, (long long)total, slots * mib, node,
           (double)m->ctx.arena.cap * mib, (double)m->ctx.arena.peak * mib,
           (double)m->ctx.arena.peak_live * mib,
           m->model.gradient_checkpointing ? ", layers recomputed" : "", (long long)z->gathers,
           (long long)z->reduce_scatters);
    fflush(stdout);
}

/* The model and the steps to run, printed; rank 0 opens the logs (loss.csv, metrics.jsonl,
 * eval.csv), keeping a resume's earlier rows. */
static void trainer_run_open(trainer *t, int first) {
    const mt_recipe *rc = &t->rc;
    const trainer_model *m = &t->m;
    /* counted as transformers and minimax-info count: buffers apart, no alignment gaps */
    int64_t n_params = 0, n_buffers = 0;
    for (int p = 0; p < m->model.n_params; p++)
        *(m->model.info[p].buffer ? &n_buffers : &n_params) += m->model.info[p].numel;
    char buffers[64] = "";
    if (n_buffers)
        snprintf(buffers, sizeof(buffers), " (+%lld buffer elements)", (long long)n_buffers);
    LOG0(t->dev.comm,
         "model: %d layers, %lld parameters%s in %d buckets; %lld steps per epoch; steps %d..%d\n",
         m->cfg.num_hidden_layers, (long long)n_params, buffers, m->model.n_buckets,
         (long long)mt_sampler_steps_per_epoch(&t->data.sampler), first, rc->train_max_steps);
    if (t->dev.comm->rank == 0) {
        /* the model's auxiliary terms, then a head objective's metrics (TRL's names) */
        const char *aux_names[MT_AUX_MAX + 2];
        for (int k = 0; k < m->n_aux; k++) aux_names[k] = m->aux_terms[k].name;
        const int head = trainer_head_columns(&t->data);
        const char *head_names[2] = {"accuracy", "margin"};
        for (int k = 0; k < head; k++) aux_names[m->n_aux + k] = head_names[k];
        mt_logger_open(&t->out.log, rc->output_dir, aux_names, m->n_aux + head, t->data.evaluates,
                       t->gen.generates, head, (int)t->out.state.step);
        if (mt_recipe_reports_to(rc, "tensorboard"))
            mt_logger_tensorboard(&t->out.log, (int)t->out.state.step);
    }
}

/* Rank 0: loss.csv's and metrics.jsonl's row of step (dt seconds, the run's since t_start). */
static void trainer_run_log(trainer *t, int step, const step_result *r, double dt, double t_start) {
    if (t->dev.comm->rank != 0) return;
    mt_log_row row = {.step = step,
                      .loss = r->loss,
                      .lr = r->lr,
                      .grad_norm = r->grad_norm,
                      .tokens = r->tokens,
                      .tokens_per_s = (double)r->tokens / (dt > 0 ? dt : 1e-9),
                      .elapsed_s = mt_time_now() - t_start,
                      .step_s = dt,
                      .arena_peak_bytes = (int64_t)t->m.ctx.arena.peak,
                      .state_bytes =
                          mt_zero_owned_bytes(&t->m.zero) + mt_zero_slot_bytes(&t->m.zero)};
    for (int k = 0; k < t->m.n_aux; k++) row.aux[k] = r->aux[k];
    const double n = r->head.count > 0 ? r->head.count : 1;
    const double head[2] = {r->head.correct / n, r->head.margin / n};
    for (int k = 0; k < t->out.log.n_aux - t->m.n_aux; k++) row.aux[t->m.n_aux + k] = head[k];
    mt_logger_row(&t->out.log, &row, t->rc.train_max_steps);
}

/* The evaluation after step (0: before the first): the eval loss (loss) and/or the accuracy by
 * generation (gen), into one row of eval.csv and metrics.jsonl, and the log. */
static void trainer_run_eval(trainer *t, int step, bool loss, bool gen) {
    mt_eval_row row = {.step = step};
    if (loss) {
        trainer_eval_loss(&row, t->dev.comm, &t->m.sharded, &t->data, &t->batch);
        char when[32] = "at the start"; /* step 0: train.eval_on_start */
        if (step > 0) snprintf(when, sizeof(when), "after step %d", step);
        if (t->batch.objective == MT_OBJECTIVE_SFT)
            LOG0(t->dev.comm, "eval %s: loss %.6f over %lld labelled eval tokens (%.1f s)\n", when,
                 row.loss, (long long)t->data.eval_targets, row.seconds);
        else
            LOG0(t->dev.comm,
                 "eval %s: loss %.6f over %lld eval loss terms, accuracy %.4f of %.0f, mean "
                 "margin %.4f (%.1f s)\n",
                 when, row.loss, (long long)t->data.eval_targets,
                 row.head_count > 0 ? row.head_correct / row.head_count : 0, row.head_count,
                 row.head_count > 0 ? row.head_margin / row.head_count : 0, row.seconds);
    }
    if (gen) trainer_generate(&t->rc, &t->dev, &t->m, &t->gen, &t->watch, step, &row);
    if (t->dev.comm->rank == 0) mt_logger_eval_row(&t->out.log, &row);
}

/* The checkpoint dir resumed: checked against this run (a refusal stops every rank), then
 * loaded. */
static void trainer_run_resume(trainer *t, const char *dir) {
    mt_train_state st;
    char why[4096] = "";
    trainer_resume_read(&t->rc, t->dev.comm, &t->out.state, dir, &st, why, sizeof(why));
    trainer_refuse_if(&t->dev, &t->out.outdir, why);
    trainer_resume_load(t->dev.comm, &t->m, &t->data.sampler, &t->out.state, &st, dir);
}

/* Rank 0: the op profile's table on stdout and in output.dir/profile.tsv (a failed write is
 * said, not fatal: the run's results are written). */
static void trainer_run_profile(const trainer *t, const mt_profile *prof, int first) {
    if (t->dev.comm->rank != 0) return;
    char what[160], path[1100], err[1300];
    snprintf(what, sizeof(what), "rank 0 of %d, %s backend, steps %d..%d", t->dev.comm->size,
             t->dev.be->name, first == t->rc.train_max_steps ? first : first + 1,
             t->rc.train_max_steps);
    mt_profile_print(stdout, prof, what);
    snprintf(path, sizeof(path), "%s/profile.tsv", t->rc.output_dir);
    if (!mt_profile_write_tsv(path, prof, err, sizeof(err)))
        fprintf(stderr, "warning: op profile not written: %s\n", err);
}

/* ------------------------------------------------------------------------------------------ */
/* the loop */

int trainer_run(trainer *t, const char *resume) {
    const mt_recipe *rc = &t->rc;
    if (resume) trainer_run_resume(t, resume);
    int first = (int)t->out.state.step + 1;
    trainer_run_open(t, first);
    trainer_set_signals();
    double t_start = mt_time_now();
    int stopped_after = 0; /* the step a stop signal ended the run with, else 0 */
    if (t->data.evaluates && rc->train_eval_on_start && t->out.state.step == 0)
        trainer_run_eval(t, 0, true, false);
    mt_profile prof = {0};
    for (int step = first; step <= rc->train_max_steps; step++) {
        /* the profile skips the run's first step (warm-up), unless it is the only one */
        const bool profiled = t->profile && (step > first || first == rc->train_max_steps);
        t->m.ctx.prof = profiled ? &prof : NULL;
        double t0 = mt_time_now();
        step_result r =
            trainer_step_run(&t->m, t->dev.comm, &t->data.sampler, &t->batch, &t->step, step);
        double dt = mt_time_now() - t0;
        t->m.ctx.prof = NULL; /* evaluations and checkpoints are not profiled */
        if (profiled) {
            prof.steps++;
            prof.step_sec += dt;
        }
        trainer_watch_timed(&t->watch, &t->dev, false, dt);
        t->out.state.tokens_seen += r.tokens;
        if (step == first) trainer_report_memory(&t->dev, &t->m);
        trainer_run_log(t, step, &r, dt, t_start);
        const bool last = step == rc->train_max_steps;
        const bool eval_due =
            t->data.evaluates &&
            (last || (rc->train_eval_steps > 0 && step % rc->train_eval_steps == 0));
        const bool gen_due = trainer_generate_due(rc, &t->gen, step, last);
        if (eval_due || gen_due) trainer_run_eval(t, step, eval_due, gen_due);
        const bool stop = !last && trainer_stop_requested(t->dev.host);
        if (last || stop || (rc->output_save_steps > 0 && step % rc->output_save_steps == 0)) {
            trainer_watch_arm(&t->watch, &t->dev, true);
            const double s0 = mt_time_now();
            trainer_checkpoint_save(rc, &t->dev, &t->m, &t->data, &t->out, step);
            /* a finished run's model (not a stopped one's: its resume writes it) */
            if (last) trainer_final_write(rc, &t->dev, &t->m, &t->data, &t->out, step);
            trainer_watch_timed(&t->watch, &t->dev, true, mt_time_now() - s0);
        }
        if (stop) {
            stopped_after = step;
            break;
        }
    }
    if (t->dev.comm->rank == 0) mt_logger_close(&t->out.log);
    if (t->profile && prof.steps > 0) trainer_run_profile(t, &prof, first);
    if (stopped_after)
        LOG0(t->dev.comm,
             "stopped by a signal (SIGUSR1, SIGTERM or SIGINT) after step %d of %d, %.1f s; "
             "continue with --resume %s/checkpoint-%d (exit code 75: a clean stop, not a "
             "failure)\n",
             stopped_after, rc->train_max_steps, mt_time_now() - t_start, rc->output_dir,
             stopped_after);
    else
        LOG0(t->dev.comm, "done: %d steps in %.1f s; outputs in %s\n",
             rc->train_max_steps - first + 1, mt_time_now() - t_start, rc->output_dir);
    return stopped_after;
}

/* trainer.c: the training job behind `minimax-train RECIPE`, its main: the command line, the
 * recipe (checked before anything is allocated), then in order, on every rank alike, what
 * settles the batch and output.dir (train/trainer_output.c; a resume's recipe:
 * train/trainer_resume.c), the model, its ZeRO-3 shards and the data (train/trainer_setup.c),
 * the loop (train/trainer_run.c) or --eval-only's one evaluation (train/trainer_eval.c), and
 * the teardown.
 *
 * Every rank runs the same code and issues the same collectives. Rank 0 holds output.dir's lock
 * from the start to the exit, and a fresh run refuses to write over another run's results
 * (train/output_dir.h). The watchdog (dist.timeout) ends the job when a collective waits too
 * long; by default its limit follows the slowest step and the slowest checkpoint so far
 * (train/trainer_watch.c).
 *
 * The loss of a step is the token-level mean over every labelled token of the global batch:
 * each micro-batch's cross-entropy is a sum divided by the global count, so neither the number
 * of ranks nor the split into micro-batches changes the update. */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/version.h"
#include "train/trainer_run.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minimax-train RECIPE.toml [--set table.key=value]... [--resume DIR "
            "[--rewind]] [--overwrite] [--eval-only] [--verbose] [--profile]\n"
            "       minimax-train --resume DIR [--rewind] [--set table.key=value]...\n"
            "       minimax-train --help | --version\n"
            "  runs under mpirun: mpirun -np N minimax-train RECIPE.toml (launch/mpirun.sh:\n"
            "    the same, a clean stop without mpirun's abort banner)\n"
            "  recipe keys: docs/recipes.md; relative paths in RECIPE.toml name files next to it\n"
            "    (output.dir and data.cache_dir, and --set values: the working directory)\n"
            "  --resume DIR: continue from the checkpoint DIR (<output.dir>/checkpoint-<step>);\n"
            "    without RECIPE.toml with the checkpoint's own recipe (DIR/recipe.toml) and\n"
            "    output.dir the directory DIR is in; a key that changes the numerics must\n"
            "    keep the checkpoint's value (docs/training.md, \"Resume\"); another output.dir\n"
            "    must hold no other run's results (or take --overwrite)\n"
            "  --rewind: with --resume DIR from a checkpoint older than its run's newest: move\n"
            "    the later checkpoints, log rows and eval-generate files aside, into\n"
            "    <output.dir>/rewound-<time>/, and continue from DIR (refused without it)\n"
            "  --overwrite: remove another run's results from output.dir first\n"
            "  --verbose: print the resolved recipe (always written to output.dir/recipe.toml)\n"
            "  --profile (or MT_PROFILE=1): time every op kind of the steps after the first,\n"
            "    forward and backward, with FLOPs and bytes from the shapes; a table at the end\n"
            "    and output.dir/profile.tsv (docs/training.md, \"Op profile\")\n"
            "  --eval-only: no training: the eval loss of the model as the recipe builds it\n"
            "    (model.path, e.g. --set model.path=EXPORT_DIR, or model.config's random\n"
            "    init) over the eval set (data.eval_samples or data.eval_path), and its accuracy\n"
            "    by generation (eval.generate_data), into output.dir's eval.csv and\n"
            "    metrics.jsonl; no step, checkpoint or export\n"
            "  SIGUSR1, SIGTERM or SIGINT to a rank (kill -USR1 on mpirun): stop after the "
            "current step with a checkpoint, exit 75\n");
}

/* The command line. */
typedef struct {
    const char *recipe_path, *resume;
    bool overwrite, eval_only, rewind, verbose, profile;
    const char **sets; /* --set's overrides, in order */
    int n_sets;
} trainer_args;

/* Parses argv into a; -1 when the run goes on, else the exit code (--help, --version: 0; a
 * flag it does not know: 2, with the usage on rank 0). */
static int trainer_args_parse(int argc, char **argv, const mt_comm *host, trainer_args *a) {
    a->sets = mt_calloc((size_t)argc, sizeof(char *), "overrides");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            a->sets[a->n_sets++] = argv[++i];
        } else if (!strncmp(argv[i], "--set=", 6)) {
            a->sets[a->n_sets++] = argv[i] + 6;
        } else if (!strcmp(argv[i], "--resume") && i + 1 < argc) {
            a->resume = argv[++i];
        } else if (!strcmp(argv[i], "--overwrite")) {
            a->overwrite = true;
        } else if (!strcmp(argv[i], "--rewind")) {
            a->rewind = true;
        } else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v")) {
            a->verbose = true;
        } else if (!strcmp(argv[i], "--profile")) {
            a->profile = true;
        } else if (!strcmp(argv[i], "--eval-only")) {
            a->eval_only = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            if (host->rank == 0) usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            if (host->rank == 0) mt_version_print(stdout, "minimax-train");
            return 0;
        } else if (argv[i][0] != '-' && !a->recipe_path) {
            a->recipe_path = argv[i];
        } else {
            if (host->rank == 0) {
                fprintf(stderr, "minimax-train: unexpected argument '%s'\n", argv[i]);
                usage(stderr);
            }
            return 2;
        }
    }
    return -1;
}

/* The recipe of a's command line into rc (RECIPE.toml, or the checkpoint's with --resume DIR
 * alone), its --set overrides on top; flags that do not go together and an --eval-only with no
 * eval set refused. Every rank reads the same recipe and fails the same way: one message on
 * rank 0 (or the usage, with no recipe at all), no model; false then. */
static bool trainer_recipe_read(const trainer_args *a, const mt_comm *host, mt_recipe *rc) {
    char err[4096] = "";
    if (a->rewind && !a->resume)
        snprintf(err, sizeof(err),
                 "--rewind goes with --resume CHECKPOINT (the run's step to "
                 "go back to)");
    else if (a->resume && a->eval_only)
        snprintf(err, sizeof(err),
                 "--eval-only evaluates the model of the recipe (model.path: "
                 "give a checkpoint's export there), not a --resume");
    bool ok = !err[0] && (a->recipe_path || a->resume);
    if (ok && a->recipe_path)
        ok = mt_recipe_load(rc, a->recipe_path, a->sets, a->n_sets, err, sizeof(err));
    else if (ok)
        ok = trainer_resume_recipe_load(rc, a->resume, a->sets, a->n_sets, err, sizeof(err));
    if (ok && a->eval_only && !rc->data_eval_samples && !rc->data_eval_path[0] &&
        !rc->eval_generate_data[0]) {
        snprintf(err, sizeof(err),
                 "--eval-only: no eval set: set data.eval_samples (samples held "
                 "out of the data) or data.eval_path (a file of its own), or eval.generate_data");
        ok = false;
    }
    if (!ok && host->rank == 0) {
        if (err[0])
            fprintf(stderr, "error: %s\n", err);
        else
            usage(stderr);
    }
    return ok;
}

/* Everything the run allocated, freed; every rank meets the others (a watched barrier:
 * MPI_Finalize waits for every rank too, but unwatched), and rank 0 releases output.dir. */
static void trainer_free(trainer *t) {
    trainer_data_free(&t->data);
    trainer_generate_free(&t->gen);
    trainer_model_free(&t->m);
    trainer_batch_free(&t->batch);
    free(t->out.export_stage);
    trainer_device_free(&t->dev);
    t->dev.host->barrier(t->dev.host);
    if (t->dev.host->rank == 0) mt_outdir_close(&t->out.outdir);
    mt_comm_finalize(t->dev.host);
    free(t);
}

int mt_train_main(int argc, char **argv) {
    trainer *t = mt_calloc(1, sizeof(trainer), "trainer");
    t->dev.host = t->dev.comm = mt_comm_mpi_init(&argc, &argv);
    trainer_args a = {0};
    const int code = trainer_args_parse(argc, argv, t->dev.host, &a);
    if (code >= 0 || !trainer_recipe_read(&a, t->dev.host, &t->rc)) {
        mt_comm_finalize(t->dev.host);
        return code >= 0 ? code : 2;
    }
    free(a.sets);
    mt_recipe *rc = &t->rc;
    if (!a.recipe_path)
        LOG0(t->dev.comm, "recipe: %s/recipe.toml, the checkpoint's (output.dir %s)\n", a.resume,
             rc->output_dir);
    t->out.outdir.lock_fd = -1;
    trainer_watch_init(&t->watch, rc->dist_timeout);
    trainer_watch_start(&t->watch, &t->dev);
    char why[4096] = "";
    trainer_resolve_batch(rc, t->dev.comm, why, sizeof(why));
    if (a.resume) trainer_resume_check_recipe(rc, t->dev.comm, a.resume, why, sizeof(why));
    trainer_generate_read(rc, t->dev.comm, &t->gen, why, sizeof(why));
    trainer_open_output(rc, t->dev.comm, &t->out.outdir, a.resume, a.overwrite, a.rewind, a.verbose,
                        why, sizeof(why));
    trainer_refuse_if(&t->dev, &t->out.outdir, why);
    trainer_setup_model(&t->dev, &t->m, rc);
    /* from here a failing rank removes its temporary files (after the communicators' setup,
     * whose abort then follows) */
    mt_cleanup_install(&t->out.outdir);
    trainer_setup_data(rc, &t->dev, &t->m, &t->watch, a.eval_only, &t->data, &t->out.state);
    trainer_batch_init(&t->batch, t->dev.be, rc->train_per_device_train_batch_size,
                       rc->data_max_length, rc->data_trim_padding, rc->data_padding_free,
                       mt_objective_parse(rc->train_objective), t->m.cfg.num_labels);
    t->batch.cp_size = t->m.cp.C; /* each rank's chunks of every row (train/context_parallel.h) */
    t->batch.cp_rank = t->m.cp.C > 1 ? t->m.cp.group->rank : 0;
    trainer_generate_setup(rc, &t->dev, &t->m, t->data.tokenizer_dir, &t->gen);
    int stopped_after = 0; /* the step a stop signal ended the run with */
    if (a.eval_only) {
        trainer_eval_only(rc, &t->dev, &t->m, &t->data, &t->batch, &t->gen, &t->watch, &t->out.log);
    } else {
        trainer_setup_schedule(rc, t->dev.comm, &t->data.sampler, &t->step);
        t->profile = mt_profile_wanted(a.profile);
        stopped_after = trainer_run(t, a.resume);
    }
    trainer_free(t);
    return stopped_after ? MT_EXIT_STOPPED : 0;
}

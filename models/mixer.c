/* mixer.c: the token mixer kinds' tables (models/block.h, mt_mixer), one per mt_mixer_kind. */
#include "models/block.h"

const mt_mixer *mt_mixer_of(mt_mixer_kind kind) {
    static const mt_mixer *const table[] = {
        [MT_MIXER_LIGHTNING] = &mt_mixer_lightning,
        [MT_MIXER_SOFTMAX] = &mt_mixer_softmax,
        [MT_MIXER_MSA] = &mt_mixer_msa,
    };
    const int n = (int)(sizeof(table) / sizeof(table[0]));
    MT_CHECK((int)kind >= 0 && (int)kind < n && table[kind], "minimax: no mixer of kind %d",
             (int)kind);
    return table[kind];
}

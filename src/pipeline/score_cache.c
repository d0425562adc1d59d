/* score_cache.c - the score stage's verdict cache (pipeline.h): a hash table of
 * chained entries, each the full key bytes and either a verdict (label,
 * value, detail JSON) or an embedding. One mutex guards the table: lookups
 * are a hash and a memcmp, negligible beside an evaluation (a sandboxed
 * program, a guard batch, an embedding), so the matrix's worker threads
 * share it without contention that matters.
 *
 *   buckets[hash % n] -> entry -> entry ...   (grown x2 at load 1) */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/score_internal.h"
#include "util/util.h"

typedef struct cache_entry {
    struct cache_entry *next;
    uint64_t hash;
    size_t key_len;
    unsigned char *key;
    int label;
    double value;
    char *detail;              /* verdicts: the detail JSON (may be NULL) */
    float *vec;                /* embeddings: (dim,) */
    int dim;
} cache_entry;

struct drift_score_cache {
    pthread_mutex_t mu;
    cache_entry **buckets;
    size_t n_buckets, n_entries;
    drift_score_cache_stats stats;
};

#define CACHE_SEED 0x6c6162ULL

drift_score_cache *drift_score_cache_new(void) {
    drift_score_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->n_buckets = 1024;
    c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void drift_score_cache_free(drift_score_cache *c) {
    if (!c) return;
    for (size_t b = 0; b < c->n_buckets; b++) {
        cache_entry *e = c->buckets[b];
        while (e) {
            cache_entry *next = e->next;
            free(e->key);
            free(e->detail);
            free(e->vec);
            free(e);
            e = next;
        }
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void drift_score_cache_stats_get(drift_score_cache *c, drift_score_cache_stats *out) {
    memset(out, 0, sizeof *out);
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    out->entries = c->n_entries;
    pthread_mutex_unlock(&c->mu);
}

/* The entry of key (NULL if none); called with the mutex held. */
static cache_entry *find(drift_score_cache *c, uint64_t h, const void *key, size_t key_len) {
    for (cache_entry *e = c->buckets[h % c->n_buckets]; e; e = e->next)
        if (e->hash == h && e->key_len == key_len && !memcmp(e->key, key, key_len)) return e;
    return NULL;
}

/* Doubles the table when it is as full as it has buckets (mutex held; a
 * failed allocation keeps the old table). */
static void grow(drift_score_cache *c) {
    if (c->n_entries < c->n_buckets) return;
    size_t n = c->n_buckets * 2;
    cache_entry **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t b = 0; b < c->n_buckets; b++) {
        cache_entry *e = c->buckets[b];
        while (e) {
            cache_entry *next = e->next;
            e->next = nb[e->hash % n];
            nb[e->hash % n] = e;
            e = next;
        }
    }
    free(c->buckets);
    c->buckets = nb;
    c->n_buckets = n;
}

/* Inserts a filled entry unless its key is held (mutex taken here); frees
 * it when not inserted. */
static void insert(drift_score_cache *c, cache_entry *e) {
    pthread_mutex_lock(&c->mu);
    if (find(c, e->hash, e->key, e->key_len)) {
        pthread_mutex_unlock(&c->mu);
        free(e->key);
        free(e->detail);
        free(e->vec);
        free(e);
        return;
    }
    grow(c);
    e->next = c->buckets[e->hash % c->n_buckets];
    c->buckets[e->hash % c->n_buckets] = e;
    c->n_entries++;
    pthread_mutex_unlock(&c->mu);
}

static cache_entry *entry_new(const void *key, size_t key_len) {
    cache_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->key = malloc(key_len ? key_len : 1);
    if (!e->key) {
        free(e);
        return NULL;
    }
    memcpy(e->key, key, key_len);
    e->key_len = key_len;
    e->hash = util_fnv1a64(key, key_len, CACHE_SEED);
    return e;
}

static void count(drift_score_cache *c, int wl, int hit) {
    if (wl < 0 || wl >= DRIFT_WL_COUNT) return;
    if (hit) c->stats.hits[wl]++;
    else c->stats.misses[wl]++;
}

int score_cache_get(drift_score_cache *c, int wl, const void *key, size_t key_len, drift_eval_result *out) {
    if (!c) return 0;
    uint64_t h = util_fnv1a64(key, key_len, CACHE_SEED);
    pthread_mutex_lock(&c->mu);
    cache_entry *e = find(c, h, key, key_len);
    int hit = 0;
    if (e && !e->vec) {
        char *d = e->detail ? util_strdup(e->detail) : NULL;
        if (!e->detail || d) {
            memset(out, 0, sizeof *out);
            out->label = e->label;
            out->value = e->value;
            out->detail_json = d;
            hit = 1;
        }
    }
    count(c, wl, hit);
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void score_cache_put(drift_score_cache *c, const void *key, size_t key_len, const drift_eval_result *res) {
    if (!c || res->label == DRIFT_LABEL_ERROR) return;
    cache_entry *e = entry_new(key, key_len);
    if (!e) return;
    e->label = res->label;
    e->value = res->value;
    if (res->detail_json && !(e->detail = util_strdup(res->detail_json))) {
        free(e->key);
        free(e);
        return;
    }
    insert(c, e);
}

int score_cache_get_vec(drift_score_cache *c, int wl, const void *key, size_t key_len, float **vec, int *dim) {
    if (!c) return 0;
    uint64_t h = util_fnv1a64(key, key_len, CACHE_SEED);
    pthread_mutex_lock(&c->mu);
    cache_entry *e = find(c, h, key, key_len);
    int hit = 0;
    if (e && e->vec) {
        float *v = malloc((size_t)e->dim * sizeof *v);
        if (v) {
            memcpy(v, e->vec, (size_t)e->dim * sizeof *v);
            *vec = v;
            *dim = e->dim;
            hit = 1;
        }
    }
    count(c, wl, hit);
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void score_cache_put_vec(drift_score_cache *c, const void *key, size_t key_len, const float *vec, int dim) {
    if (!c || !vec || dim <= 0) return;
    cache_entry *e = entry_new(key, key_len);
    if (!e) return;
    e->vec = malloc((size_t)dim * sizeof *e->vec);
    if (!e->vec) {
        free(e->key);
        free(e);
        return;
    }
    memcpy(e->vec, vec, (size_t)dim * sizeof *e->vec);
    e->dim = dim;
    e->value = NAN;
    e->label = DRIFT_LABEL_NONE;
    insert(c, e);
}

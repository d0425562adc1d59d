/* test_chat.c - semantic drift rate (SDR = 1 - cosine) and the embedder.
 *
 * 1. Hand-computed cosines: identical -> 0, orthogonal -> 1, opposite -> 2,
 *    a zero vector -> NAN, 45 degrees -> 1 - 1/sqrt(2).
 * 2. The paper's 100 human-annotated chat pairs
 *    ($DRIFT_SHARED/driftbench-ae/annotations/semantic_drift_100_human_annotations.csv).
 *    Columns: cos_sim = cosine of the two answers' all-mpnet-base-v2
 *    embeddings (float32), sdr = 1 - cos_sim, manual_judgment = the human
 *    label (identical / minor_diff / moderate_diff / major_diff /
 *    contradictory). We cannot run all-mpnet-base-v2 here, so the fixture is
 *    a pair of 768-d float32 vectors per row with exactly that cosine:
 *    a = s1 u, b = s2 (c u + sqrt(1 - c^2) v) for random orthonormal u, v
 *    (a random 2-plane of R^768) and random scales. drift_sdr must give the
 *    CSV's sdr to 1e-6, and SDR > 0.30 must flag the same 30 pairs.
 * 3. The HTTP embedder against tests/server/fakeserver (skipped when the
 *    helper is not built). */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "driftbench/eval.h"
#include "util/util.h"
#include "support/fake_server.h"

#define DIM 768

static void test_sdr_hand_computed(void **state) {
    (void)state;
    float a[3] = {1, 2, 3}, a2[3] = {2, 4, 6}, neg[3] = {-1, -2, -3};
    float x[2] = {1, 0}, y[2] = {0, 1}, d[2] = {1, 1}, zero[2] = {0, 0};
    assert_true(fabs(drift_sdr(a, a, 3)) < 1e-15);
    assert_true(fabs(drift_sdr(a, a2, 3)) < 1e-15);       /* scale does not matter */
    assert_true(fabs(drift_sdr(a, neg, 3) - 2.0) < 1e-15); /* opposite */
    assert_true(fabs(drift_sdr(x, y, 2) - 1.0) < 1e-15);   /* orthogonal */
    assert_true(fabs(drift_sdr(x, d, 2) - (1.0 - 1.0 / sqrt(2.0))) < 1e-15);
    assert_true(isnan(drift_sdr(x, zero, 2)));
    assert_true(isnan(drift_sdr(zero, zero, 2)));
    assert_true(isnan(drift_sdr(x, y, 0)));
}

/* ---- a small RFC 4180 reader: quoted fields may hold commas, "" and newlines ---- */

typedef struct csv_row {
    char *field[16];
    int n;
} csv_row;

/* Reads one record starting at *p; returns 0 at end of input. */
static int csv_next(char **p, csv_row *row) {
    char *s = *p;
    if (!*s) return 0;
    row->n = 0;
    for (;;) {
        char *out = s, *start = s;
        if (*s == '"') {
            s++;
            for (;;) {
                if (!*s) break;
                if (*s == '"' && s[1] == '"') {
                    *out++ = '"';
                    s += 2;
                } else if (*s == '"') {
                    s++;
                    break;
                } else {
                    *out++ = *s++;
                }
            }
        } else {
            while (*s && *s != ',' && *s != '\n' && *s != '\r') *out++ = *s++;
        }
        char end = *s;
        if (row->n < 16) row->field[row->n++] = start;
        if (end == ',') {
            *out = 0;
            s++;
            continue;
        }
        if (end == '\r') s++;
        if (*s == '\n') s++;
        *out = 0;
        break;
    }
    *p = s;
    return 1;
}

static int col(const csv_row *hdr, const char *name) {
    for (int i = 0; i < hdr->n; i++)
        if (!strcmp(hdr->field[i], name)) return i;
    fail_msg("column %s missing", name);
    return -1;
}

static double gauss(util_rng *r) {
    double u1 = util_rng_uniform(r), u2 = util_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Two float32 vectors in R^DIM whose cosine is c (up to float rounding). */
static void make_pair(double c, uint64_t seed, float *a, float *b) {
    static double u[DIM], v[DIM];
    util_rng r;
    util_rng_seed(&r, seed);
    double nu = 0, uv = 0, nv = 0;
    for (int k = 0; k < DIM; k++) {
        u[k] = gauss(&r);
        nu += u[k] * u[k];
    }
    nu = sqrt(nu);
    for (int k = 0; k < DIM; k++) u[k] /= nu;
    for (int k = 0; k < DIM; k++) {
        v[k] = gauss(&r);
        uv += u[k] * v[k];
    }
    for (int k = 0; k < DIM; k++) v[k] -= uv * u[k]; /* Gram-Schmidt */
    for (int k = 0; k < DIM; k++) nv += v[k] * v[k];
    nv = sqrt(nv);
    for (int k = 0; k < DIM; k++) v[k] /= nv;
    double cc = c > 1 ? 1 : (c < -1 ? -1 : c);
    double s = sqrt(1.0 - cc * cc);
    double s1 = 0.5 + util_rng_uniform(&r) * 4, s2 = 0.5 + util_rng_uniform(&r) * 4;
    for (int k = 0; k < DIM; k++) {
        a[k] = (float)(s1 * u[k]);
        b[k] = (float)(s2 * (cc * u[k] + s * v[k]));
    }
}

static void test_sdr_paper_annotations(void **state) {
    (void)state;
    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/annotations/semantic_drift_100_human_annotations.csv",
             shared ? shared : DRIFT_SOURCE_DIR "/../shared");
    char *text = NULL;
    size_t len = 0;
    drift_error err = {0};
    if (util_read_file(path, &text, &len, &err) != DRIFT_OK) {
        print_message("skipping: %s\n", err.msg);
        skip();
    }
    char *p = text;
    csv_row hdr, row;
    assert_true(csv_next(&p, &hdr));
    int c_id = col(&hdr, "prompt_id"), c_cos = col(&hdr, "cos_sim"), c_sdr = col(&hdr, "sdr"),
        c_judge = col(&hdr, "manual_judgment");
    static float a[DIM], b[DIM];
    int rows = 0, drift_ours = 0, drift_csv = 0, agree_human = 0;
    double max_diff = 0;
    while (csv_next(&p, &row)) {
        if (row.n < hdr.n) fail_msg("row %d has %d fields, want %d", rows + 1, row.n, hdr.n);
        double cs = atof(row.field[c_cos]), sdr_csv = atof(row.field[c_sdr]);
        /* The columns' meaning: sdr is exactly 1 - cos_sim. */
        assert_true(fabs(sdr_csv - (1.0 - cs)) < 1e-9);
        make_pair(cs, 1000 + (uint64_t)rows, a, b);
        double sdr = drift_sdr(a, b, DIM);
        double diff = fabs(sdr - sdr_csv);
        if (diff > max_diff) max_diff = diff;
        if (diff > 1e-6) fail_msg("%s: SDR %.9f, CSV %.9f", row.field[c_id], sdr, sdr_csv);
        /* No pair sits so close to 0.30 that rounding could flip it. */
        assert_true(fabs(sdr_csv - 0.30) > 1e-5);
        int ours = sdr > 0.30, theirs = sdr_csv > 0.30;
        assert_int_equal(ours, theirs);
        drift_ours += ours;
        drift_csv += theirs;
        const char *j = row.field[c_judge];
        int human = !strcmp(j, "moderate_diff") || !strcmp(j, "major_diff") || !strcmp(j, "contradictory");
        agree_human += human == ours;
        rows++;
    }
    assert_int_equal(rows, 100);
    assert_int_equal(drift_csv, 30);
    assert_int_equal(drift_ours, 30);
    print_message("100 annotated pairs: max |SDR - csv| = %.3g; SDR > 0.30 on %d pairs (CSV %d); "
                  "agrees with the human moderate/major/contradictory label on %d/100\n",
                  max_diff, drift_ours, drift_csv, agree_human);
    free(text);
}

static void test_embedder_open(void **state) {
    (void)state;
    drift_embedder *e = (drift_embedder *)1;
    drift_error err = {0};
    assert_int_equal(drift_embedder_open(NULL, &e, &err), DRIFT_ERR_UNSUPPORTED);
    assert_null(e);
    assert_int_equal(drift_embedder_open("builtin", &e, &err), DRIFT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "issue 4"));
    assert_int_not_equal(drift_embedder_open("nonsense://x", &e, &err), DRIFT_OK);
    assert_null(e);
    const char *spec = "http://127.0.0.1:9/v1?model=all-mpnet-base-v2";
    assert_int_equal(drift_embedder_open(spec, &e, &err), DRIFT_OK);
    char want[256];
    snprintf(want, sizeof want, "embed:%s", spec);
    assert_string_equal(drift_embedder_name(e), want);
    drift_embedder_close(e);
}

/* ---- against the fake server (tests/support/fake_server.h) ---- */

static void test_embedder_fakeserver(void **state) {
    (void)state;
    fake_server f;
    const char *args[] = {"--embed-dim", "24"};
    int started = fake_server_start(&f, NULL, 60, args, 2);
    if (started == -2) fail_msg("fakeserver did not report its port");
    if (started != 0) {
        print_message("skipping: fakeserver is not built\n");
        skip();
    }
    char spec[256];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=embedder", f.port);
    drift_embedder *e = NULL;
    drift_error err = {0};
    assert_int_equal(drift_embedder_open(spec, &e, &err), DRIFT_OK);
    const char *texts[] = {"The cat sat on the mat", "the cat sat on the mat", "Dogs run fast in the park"};
    float *vecs = NULL;
    int dim = 0;
    drift_status st = drift_embedder_embed(e, texts, 3, &vecs, &dim, &err);
    if (st != DRIFT_OK) fail_msg("embed: %s", err.msg);
    assert_int_equal(dim, 24);
    /* The fake embeds a hashed bag of lower-cased words: same words, same vector. */
    assert_true(fabs(drift_sdr(vecs, vecs + dim, dim)) < 1e-7);
    double far = drift_sdr(vecs, vecs + 2 * dim, dim);
    assert_true(far > 0.05 && far <= 2.0);
    free(vecs);
    /* Zero texts: nothing to do, no request. */
    assert_int_equal(drift_embedder_embed(e, texts, 0, &vecs, &dim, &err), DRIFT_OK);
    assert_null(vecs);
    drift_embedder_close(e);
    fake_server_stop(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdr_hand_computed),
        cmocka_unit_test(test_sdr_paper_annotations),
        cmocka_unit_test(test_embedder_open),
        cmocka_unit_test(test_embedder_fakeserver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_matrix.c - matrix spec parsing (good and bad), shard partition,
 * a job array's shard from the environment, merging shard stores (equal to one store holding every run), and the flip
 * table of a store built through the store API with known labels. Values
 * in a server's start command are data: hostile and random values, put in
 * by the spec, run through /bin/sh and come out literally, and nothing they
 * hold runs; placeholders where a value cannot be quoted are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/compare.h"
#include "driftbench/matrix.h"
#include "driftbench/server_proc.h"
#include "driftbench/store.h"
#include "store/store_internal.h" /* store_sqlite: to look at what the store wrote */
#include "driftbench/suite.h"

#include "labelled_runs.h"

static const char CFG_BASE[] = "{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp16\",\"framework\":\"vllm\"}";
static const char CFG_T1[] =
    "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp16\",\"framework\":\"vllm\",\"zone\":\"eu\"}";
static const char CFG_T2[] = "{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp8\",\"framework\":\"sglang\"}";

static long count(drift_store *st, const char *table) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st), sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    long n = (long)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return n;
}

/* ---- spec ---- */

static void test_spec_example(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/matrix/example.json", src ? src : ".");
    drift_matrix_spec *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_load(path, &s, &err), DRIFT_OK);
    /* 2 explicit + 2 models x 1 hw x 3 precisions x 2 frameworks - 2 excluded (int4/pairwise) */
    assert_int_equal(s->n_configs, 12);
    assert_int_equal(s->n_suites, 2);
    assert_string_equal(s->suites[0], "builtin:math");
    assert_int_equal(s->limit, 6);
    assert_int_equal(s->max_tokens, 24);
    assert_int_equal(s->seed, 42);
    assert_string_equal(s->configs[0].label, "ref@tiny-qwen2");
    assert_string_equal(s->configs[2].label, "tiny-qwen2/cpu-avx2/bf16/seq");
    assert_string_equal(s->configs[2].target,
                        "embedded:tests/data/models/tiny-qwen2-f16.gguf?profile=cpu-f32&weights=bf16&isa=avx2&reduce=sequential");
    assert_string_equal(s->configs[11].label, "tiny-moe/cpu-avx2/int4/seq");
    for (size_t i = 0; i < s->n_configs; i++) assert_null(strstr(s->configs[i].label, "int4/pairwise"));
    char *b = drift_matrix_baseline_for(s->baseline, &s->configs[9]);
    assert_string_equal(b, "ref@tiny-moe");
    free(b);
    char *d = drift_matrix_config_dims(&s->configs[0]);
    assert_string_equal(d, "model=tiny-qwen2,hardware=ref,precision=f32,framework=ref");
    free(d);
    drift_matrix_spec_free(s);
}

static void expect_bad(const char *json, const char *needle) {
    drift_matrix_spec *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_matrix_spec_parse(json, strlen(json), "t.json", &s, &err);
    if (rc != DRIFT_ERR_PARSE || !strstr(err.msg, needle))
        fail_msg("spec %s: expected parse error naming '%s', got %d '%s'", json, needle, (int)rc, err.msg);
    assert_null(s);
}

#define OKC "\"configs\":[{\"label\":\"a\",\"target\":\"http://x/v1\"}]"

static void test_spec_bad(void **state) {
    (void)state;
    expect_bad("{", "not valid JSON");
    expect_bad("[]", "top level");
    expect_bad("{\"baseline\":\"a\"," OKC "}", "suites");
    expect_bad("{\"suites\":[],\"baseline\":\"a\"," OKC "}", "suites");
    expect_bad("{\"suites\":[\"s\"]," OKC "}", "baseline");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"zz\"," OKC "}", "baseline");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\"}", "configs");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\",\"configs\":[{\"label\":\"a\"}]}", "configs[0].target");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\",\"configs\":[{\"target\":\"t\"}]}", "configs[0].label");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\",\"configs\":[{\"label\":\"a\",\"target\":\"t\"},"
               "{\"label\":\"a\",\"target\":\"u\"}]}",
               "used twice");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\"," OKC ",\"limit\":-1}", "limit");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\"," OKC ",\"decoding\":{\"max_tokens\":0}}", "decoding.max_tokens");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\"," OKC ",\"decoding\":{\"warmth\":1}}", "decoding.warmth");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\"," OKC ",\"colour\":1}", "colour");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"a\",\"configs\":[{\"label\":\"a\",\"target\":\"t\","
               "\"dims\":{\"Model\":\"x\"}}]}",
               "configs[0].dims.Model");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"x\",\"dimensions\":{\"m\":[\"x\"]}}", "target");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"x\",\"dimensions\":{\"m\":[]},\"target\":\"t{m}\"}", "dimensions.m");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"x\",\"dimensions\":{\"m\":[\"a,b\"]},\"target\":\"t{m}\"}",
               "dimensions.m[0]");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"x\",\"dimensions\":{\"m\":[\"x\"]},\"target\":\"t{q}\"}", "{q}");
    expect_bad("{\"suites\":[\"s\"],\"baseline\":\"x\",\"dimensions\":{\"m\":[\"x\"]},\"target\":\"t{m}\","
               "\"exclude\":[{\"p\":\"x\"}]}",
               "exclude[0].p");
}

static void test_spec_product(void **state) {
    (void)state;
    const char *j = "{\"suites\":[\"builtin:math\"],\"baseline\":\"f32/{m}\","
                    "\"dimensions\":{\"p\":{\"f32\":\"weights=f32\",\"int4\":\"weights=int4\"},\"m\":[\"a\",\"b\",\"c\"]},"
                    "\"target\":\"embedded:{m}.gguf?{p}\",\"exclude\":[{\"p\":\"int4\",\"m\":\"b\"}]}";
    drift_matrix_spec *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_spec_parse(j, strlen(j), "p.json", &s, &err), DRIFT_OK);
    assert_int_equal(s->n_configs, 5);
    assert_string_equal(s->configs[0].label, "f32/a");
    assert_string_equal(s->configs[0].target, "embedded:a.gguf?weights=f32");
    assert_string_equal(s->configs[3].label, "int4/a");
    assert_string_equal(s->configs[4].label, "int4/c");
    assert_string_equal(s->configs[4].target, "embedded:c.gguf?weights=int4");
    char *b = drift_matrix_baseline_for(s->baseline, &s->configs[4]);
    assert_string_equal(b, "f32/c");
    free(b);
    drift_matrix_spec_free(s);
}

/* ---- server values are data ---- */

static char pwn_dir[64];

/* The spec of one product configuration whose dimension v has the level
 * text value, and whose server starts with tmpl; parsed (NULL: refused,
 * err says why). */
static drift_matrix_spec *spec_with_value(const char *tmpl, const char *value, drift_error *err) {
    json_t *j = json_pack("{s:[s], s:s, s:{s:{s:s}}, s:s, s:{s:s}}", "suites", "s", "baseline", "a", "dimensions", "v",
                          "a", value, "target", "http://127.0.0.1:{port}/v1", "server", "start", tmpl);
    char *text = json_dumps(j, 0);
    drift_matrix_spec *s = NULL;
    drift_matrix_spec_parse(text, strlen(text), "v.json", &s, err);
    free(text);
    json_decref(j);
    return s;
}

/* What `sh -c CMD` prints on stdout (malloc'd, up to 64 KB). */
static char *sh_output(const char *cmd) {
    FILE *f = popen(cmd, "r"); /* /bin/sh -c cmd */
    assert_non_null(f);
    size_t cap = 65536, n = 0;
    char *out = malloc(cap + 1);
    size_t k;
    while (n < cap && (k = fread(out + n, 1, cap - n, f)) > 0) n += k;
    out[n] = '\0';
    pclose(f);
    return out;
}

/* value, put by the spec into a start command in a bare word and inside
 * one, reaches the command's argv literally, and nothing in pwn_dir is
 * created by it. */
static void check_value_literal(const char *value) {
    static const char tmpl[] = "printf '<%s>' {v} pre{v}post \"$(printf %s {v})\" --port={port}";
    drift_error err = {0};
    drift_matrix_spec *s = spec_with_value(tmpl, value, &err);
    if (!s) fail_msg("value '%s' refused: %s", value, err.msg);
    char *cmd = drift_server_proc_fill_port(s->configs[0].server.start, 8080);
    char *got = sh_output(cmd);
    size_t vl = strlen(value);
    char *want = malloc(3 * vl + 64);
    /* $(...) drops trailing newlines, as it does for any command's output */
    size_t sub = vl;
    while (sub && value[sub - 1] == '\n') sub--;
    sprintf(want, "<%s><pre%spost><%.*s><--port=8080>", value, value, (int)sub, value);
    if (strcmp(got, want)) fail_msg("value '%s': command `%s` printed '%s', not '%s'", value, cmd, got, want);
    char probe[128];
    snprintf(probe, sizeof probe, "%s/pwned", pwn_dir);
    if (access(probe, F_OK) == 0) fail_msg("value '%s' ran a command (through `%s`)", value, cmd);
    free(want);
    free(got);
    free(cmd);
    drift_matrix_spec_free(s);
}

static void test_server_values_are_data(void **state) {
    (void)state;
    snprintf(pwn_dir, sizeof pwn_dir, "/tmp/test_matrix_pwn.XXXXXX");
    assert_non_null(mkdtemp(pwn_dir));
    /* each '@' becomes pwn_dir/pwned */
    const char *forms[] = {"$(touch @)", "`touch @`", "x'; touch @; '", "\"; touch @; \"", "a;touch @",
                           "a && touch @ #", "a\ntouch @\n", "'\\''; touch @", "$(touch @)'$(touch @)'"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char v[512];
        size_t n = 0;
        for (const char *c = forms[i]; *c && n + 80 < sizeof v; c++) {
            if (*c == '@') n += (size_t)snprintf(v + n, sizeof v - n, "%s/pwned", pwn_dir);
            else v[n++] = *c;
        }
        v[n] = '\0';
        check_value_literal(v);
    }
    const char *plain[] = {"models/b.gguf", "a b", "'", "''", "\\", "$HOME", "*", "~root", "-n", "", "{v}", "}{", "%s",
                           "tab\there", "ünï"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) check_value_literal(plain[i]);
    /* seeded random strings over the shell's own characters */
    static const char alphabet[] = "ab $`'\"\\;&|()<>{}*?[]!#~=%\n\t-";
    unsigned x = 12345;
    for (int r = 0; r < 200; r++) {
        char v[24];
        int len = 1 + r % 20;
        for (int i = 0; i < len; i++) {
            x = x * 1103515245u + 12345u;
            v[i] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
        }
        v[len] = '\0';
        check_value_literal(v);
    }
    /* a safe value stays as it is; an explicit configuration's dims are quoted too */
    drift_error err = {0};
    drift_matrix_spec *s = spec_with_value("exec srv -m {v} --port {port}", "models/b.gguf", &err);
    assert_non_null(s);
    assert_string_equal(s->configs[0].server.start, "exec srv -m models/b.gguf --port {port}");
    drift_matrix_spec_free(s);
    const char *ex = "{\"suites\":[\"s\"],\"baseline\":\"a\",\"configs\":[{\"label\":\"a\",\"target\":\"http://h:{port}/v1\","
                     "\"dims\":{\"m\":\"$(id)\"},\"server\":{\"start\":\"srv -m {m} --port {port} ${HOME}/{m}\"}}]}";
    assert_int_equal(drift_matrix_spec_parse(ex, strlen(ex), "e.json", &s, &err), DRIFT_OK);
    assert_string_equal(s->configs[0].server.start, "srv -m '$(id)' --port {port} ${HOME}/'$(id)'");
    drift_matrix_spec_free(s);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", pwn_dir);
    assert_int_equal(system(rm), 0);
}

/* A placeholder where its value cannot be quoted for every reader. */
static void expect_refused(const char *tmpl, const char *needle) {
    drift_error err = {0};
    drift_matrix_spec *s = spec_with_value(tmpl, "x", &err);
    if (s || !strstr(err.msg, needle) || !strstr(err.msg, "placeholder {v}"))
        fail_msg("start '%s': expected a refusal naming '%s', got '%s'", tmpl, needle, s ? "(accepted)" : err.msg);
}

static void test_server_placeholders_refused(void **state) {
    (void)state;
    expect_refused("sh -c 'srv -m {v} --port {port}'", "inside '...' quotes");
    expect_refused("srv -m \"{v}\" --port {port}", "inside \"...\" quotes");
    expect_refused("srv -m `echo {v}` --port {port}", "inside `...`");
    expect_refused("srv --port {port} # {v}", "inside a # comment");
    expect_refused("srv --port {port} <<EOF\n{v}\nEOF", "here-document");
    expect_refused("x=$'a\\'b'; srv {v} --port {port}", "$'...'");
    expect_refused("srv ${X:-\"a b\"} {v} --port {port}", "${...} with quotes");
    expect_refused("srv $(case a in a) echo;; esac) {v} --port {port}", "$(...) with a case");
    /* the message says how to pass a value to a command in a string */
    drift_error err = {0};
    assert_null(spec_with_value("sh -c 'srv -m {v}; echo' --port {port}", "x", &err));
    assert_non_null(strstr(err.msg, "sh -c '... \"$1\" ...' sh {v}"));
    /* {port} may stand anywhere; quotes and comments elsewhere are fine */
    drift_matrix_spec *s =
        spec_with_value("sh -c 'exec srv -m \"$1\" --port {port}; echo' sh {v} # \"{port}\"", "a b", &err);
    assert_non_null(s);
    assert_string_equal(s->configs[0].server.start,
                        "sh -c 'exec srv -m \"$1\" --port {port}; echo' sh 'a b' # \"{port}\"");
    drift_matrix_spec_free(s);
    s = spec_with_value("srv \\{v} \"$(basename {v})\" --port {port}", "a b", &err);
    assert_non_null(s);
    assert_string_equal(s->configs[0].server.start, "srv \\{v} \"$(basename 'a b')\" --port {port}");
    drift_matrix_spec_free(s);
}

static void test_shards(void **state) {
    (void)state;
    drift_error err = {0};
    int i = 0, n = 0;
    assert_int_equal(drift_matrix_shard_parse("3/8", &i, &n, &err), DRIFT_OK);
    assert_int_equal(i, 3);
    assert_int_equal(n, 8);
    static const char *const bad[] = {"0/4", "5/4", "1/0", "a/b", "3", "1/2x", "", "-1/2"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        assert_int_equal(drift_matrix_shard_parse(bad[k], &i, &n, &err), DRIFT_ERR_INVALID);
    for (int count = 1; count <= 7; count++) {
        size_t sizes[8] = {0};
        for (size_t c = 0; c < 100; c++) {
            int owners = 0;
            for (int idx = 1; idx <= count; idx++)
                if (drift_matrix_in_shard(c, idx, count)) {
                    owners++;
                    sizes[idx]++;
                }
            assert_int_equal(owners, 1); /* union = all, disjoint */
        }
        for (int idx = 1; idx <= count; idx++) {
            /* balanced: sizes differ by at most one */
            assert_true(sizes[idx] == 100 / (size_t)count || sizes[idx] == 100 / (size_t)count + 1);
        }
    }
}

/* ---- table ---- */

static void test_table_known(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("single.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    add_run(st, "t1", "http://b/v1", CFG_T1, 0x3);    /* prompts 0,1 flip */
    add_run(st, "t2", "http://c/v1", CFG_T2, 0x20);   /* prompt 5 flips */
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_flip_table(st, "base", &t, &err), DRIFT_OK);
    assert_int_equal(t->n_rows, 2);
    assert_int_equal(t->n_dims, 6);
    assert_string_equal(t->dim_names[5], "zone");
    assert_true(t->has_ci);
    const drift_table_row *r = &t->rows[0];
    assert_string_equal(r->experiment_id, "t1");
    assert_string_equal(r->dims[0], "m");
    assert_string_equal(r->dims[1], "b200");
    assert_string_equal(r->dims[2], "fp16");
    assert_string_equal(r->dims[3], "vllm");
    assert_string_equal(r->dims[4], "math");
    assert_string_equal(r->dims[5], "eu");
    assert_int_equal(r->num_flips, 2);
    assert_int_equal(r->num_comparisons, 10);
    assert_true(fabs(r->flip_rate - 20.0) < 1e-9);
    double lo, hi;
    drift_wilson(2, 10, 1.959964, &lo, &hi);
    assert_true(fabs(r->ci_low - 100 * lo) < 1e-5);
    assert_true(fabs(r->ci_high - 100 * hi) < 1e-5);
    assert_true(r->ci_low > 5.0 && r->ci_low < 6.0); /* Wilson(2,10) = [5.67%, 50.98%] */
    assert_true(r->ci_high > 50.9 && r->ci_high < 51.0);
    assert_string_equal(t->rows[1].experiment_id, "t2");
    assert_string_equal(t->rows[1].dims[5], "");
    assert_int_equal(t->rows[1].num_flips, 1);
    assert_true(fabs(t->rows[1].flip_rate - 10.0) < 1e-9);
    drift_table_free(t);
    /* an unknown baseline names the labels */
    assert_int_equal(drift_matrix_flip_table(st, "nope", &t, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "'base'"));
    drift_store_close(st);
}

static void test_table_per_model_baseline(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("models.db");
    add_run(st, "ref@a", "embedded:a", "{\"model\":\"a\",\"hardware\":\"ref\",\"precision\":\"f32\",\"framework\":\"ref\"}", 0);
    add_run(st, "ref@b", "embedded:b", "{\"model\":\"b\",\"hardware\":\"ref\",\"precision\":\"f32\",\"framework\":\"ref\"}", 0x1);
    add_run(st, "a/int4", "embedded:a?q", "{\"model\":\"a\",\"hardware\":\"cpu\",\"precision\":\"int4\",\"framework\":\"seq\"}", 0x7);
    add_run(st, "b/int4", "embedded:b?q", "{\"model\":\"b\",\"hardware\":\"cpu\",\"precision\":\"int4\",\"framework\":\"seq\"}", 0x1);
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_matrix_flip_table(st, "ref@{model}", &t, &err), DRIFT_OK);
    assert_int_equal(t->n_rows, 2);
    assert_string_equal(t->rows[0].experiment_id, "a/int4");
    assert_int_equal(t->rows[0].num_flips, 3);
    assert_string_equal(t->rows[1].experiment_id, "b/int4");
    assert_int_equal(t->rows[1].num_flips, 0); /* same failure as its own ref: no flip */
    drift_table_free(t);
    /* "ref" on such a store (the lab's): exit 2's message names the form meant and the labels */
    t = NULL;
    assert_int_equal(drift_matrix_flip_table(st, "ref", &t, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(t);
    assert_non_null(strstr(err.msg, "no run is labelled 'ref'; did you mean 'ref@{model}' (a run 'ref@MODEL' for each model)?"));
    assert_non_null(strstr(err.msg, "The store's runs: 'ref@{model}' (2 models), 'a/int4', 'b/int4'."));
    assert_int_equal(drift_matrix_flip_table(st, "base", &t, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(strstr(err.msg, "did you mean"));
    drift_store_close(st);
}

/* ---- merge ---- */

/* What `driftbench merge` does: each input by drift_store_merge, in order,
 * stopping at the first failure; *ms counts this call only. */
static drift_status merge_all(drift_store *out, const char *const *in, size_t n, drift_store_merged *ms,
                              drift_error *err) {
    memset(ms, 0, sizeof *ms);
    drift_status rc = DRIFT_OK;
    for (size_t i = 0; i < n && !rc; i++) rc = drift_store_merge(out, in[i], ms, err);
    return rc;
}

static void test_merge(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *single = open_store("single.db");
    add_run(single, "base", "http://a/v1", CFG_BASE, 0);
    add_run(single, "t1", "http://b/v1", CFG_T1, 0x3);
    add_run(single, "t2", "http://c/v1", CFG_T2, 0x20);
    drift_store *a = open_store("a.db");
    add_run(a, "base", "http://a/v1", CFG_BASE, 0);
    add_run(a, "t2", "http://c/v1", CFG_T2, 0x20);
    drift_store_close(a);
    drift_store *b = open_store("b.db");
    add_run(b, "t1", "http://b/v1", CFG_T1, 0x3);
    drift_store_close(b);
    drift_store *m = open_store("m.db");
    char pa[512], pb[512];
    db_path(pa, sizeof pa, "a.db");
    db_path(pb, sizeof pb, "b.db");
    const char *in[2] = {pa, pb};
    drift_store_merged ms = {0};
    drift_error err = {0};
    assert_int_equal(merge_all(m, in, 2, &ms, &err), DRIFT_OK);
    assert_int_equal(ms.runs, 3);
    assert_int_equal(ms.runs_skipped, 0);
    assert_int_equal(ms.prompts, NP);
    assert_int_equal(ms.responses, 3 * NP);
    assert_int_equal(ms.scores, 3 * NP);
    static const char *const tables[] = {"runs", "prompts", "responses", "scores", "embeddings"};
    for (size_t k = 0; k < 5; k++) assert_int_equal(count(m, tables[k]), count(single, tables[k]));
    /* the same table, row for row (runs come in another order) */
    drift_table *ts = NULL, *tm = NULL;
    assert_int_equal(drift_matrix_flip_table(single, "base", &ts, &err), DRIFT_OK);
    assert_int_equal(drift_matrix_flip_table(m, "base", &tm, &err), DRIFT_OK);
    assert_int_equal(ts->n_rows, tm->n_rows);
    for (size_t i = 0; i < ts->n_rows; i++) {
        const drift_table_row *x = &ts->rows[i], *y = NULL;
        for (size_t j = 0; j < tm->n_rows; j++)
            if (!strcmp(tm->rows[j].experiment_id, x->experiment_id)) y = &tm->rows[j];
        assert_non_null(y);
        assert_int_equal(x->num_flips, y->num_flips);
        assert_int_equal(x->num_comparisons, y->num_comparisons);
    }
    drift_table_free(ts);
    drift_table_free(tm);
    /* merging a again: identical runs are skipped */
    assert_int_equal(merge_all(m, in, 1, &ms, &err), DRIFT_OK);
    assert_int_equal(ms.runs, 0);
    assert_int_equal(ms.runs_skipped, 2);
    assert_int_equal(count(m, "responses"), 3 * NP);
    /* the same label with other content is refused, and nothing of it is kept */
    drift_store *c = open_store("c.db");
    add_run(c, "t1", "http://OTHER/v1", CFG_T1, 0);
    add_run(c, "t3", "http://d/v1", CFG_T2, 0);
    drift_store_close(c);
    char pc[512];
    db_path(pc, sizeof pc, "c.db");
    const char *inc[1] = {pc};
    assert_int_equal(merge_all(m, inc, 1, &ms, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "'t1'"));
    assert_non_null(strstr(err.msg, "target"));
    assert_int_equal(count(m, "runs"), 3);
    /* a file that is not a store */
    char bad[512];
    db_path(bad, sizeof bad, "notastore.txt");
    FILE *f = fopen(bad, "w");
    fputs("hello", f);
    fclose(f);
    const char *inb[1] = {bad};
    assert_int_not_equal(merge_all(m, inb, 1, &ms, &err), DRIFT_OK);
    drift_store_close(m);
    drift_store_close(single);
}

/* drift_matrix_shard_from_env over a fake environment: Slurm's array
 * (COUNT, or MIN/MAX/STEP) and a Kubernetes Indexed Job map to the shard
 * and say where it came from; none leaves the shard; bad, ambiguous and
 * inconsistent values are DRIFT_ERR_INVALID naming the variable. */
static const char *const *fake_env;
static const char *fake_getenv(const char *name) {
    size_t n = strlen(name);
    for (const char *const *e = fake_env; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}
static drift_status shard_env(const char *const *env, long count_flag, int *i, int *n, char *said, drift_error *err) {
    fake_env = env;
    *i = *n = 1;
    return drift_matrix_shard_from_env(fake_getenv, count_flag, i, n, said, 256, err);
}

static void test_shard_env(void **state) {
    (void)state;
    drift_error err = {0};
    char said[256];
    int i, n;
    const char *none[] = {NULL};
    assert_int_equal(shard_env(none, 0, &i, &n, said, &err), DRIFT_OK);
    assert_int_equal(i, 1);
    assert_int_equal(n, 1);
    assert_string_equal(said, "");
    const char *slurm[] = {"SLURM_ARRAY_TASK_ID=15", "SLURM_ARRAY_TASK_MIN=10", "SLURM_ARRAY_TASK_MAX=20",
                           "SLURM_ARRAY_TASK_STEP=5", NULL};
    assert_int_equal(shard_env(slurm, 0, &i, &n, said, &err), DRIFT_OK);
    assert_int_equal(i, 2);
    assert_int_equal(n, 3);
    assert_string_equal(said, "Slurm (SLURM_ARRAY_TASK_ID=15, SLURM_ARRAY_TASK_MIN..MAX=10..20, STEP=5)");
    const char *k8s[] = {"JOB_COMPLETION_INDEX=3", "DRIFT_SHARD_COUNT=4", NULL};
    assert_int_equal(shard_env(k8s, 0, &i, &n, said, &err), DRIFT_OK);
    assert_int_equal(i, 4);
    assert_int_equal(n, 4);
    assert_string_equal(said, "a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=3, DRIFT_SHARD_COUNT=4)");
    assert_int_equal(shard_env(k8s, 5, &i, &n, said, &err), DRIFT_ERR_INVALID); /* --shard-count 5 vs 4 */
    assert_non_null(strstr(err.msg, "DRIFT_SHARD_COUNT=4"));
    assert_int_equal(i, 1); /* left as it was */
    const char *both[] = {"JOB_COMPLETION_INDEX=0", "SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_COUNT=2", NULL};
    assert_int_equal(shard_env(both, 0, &i, &n, said, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "ambiguous"));
    const char *bad[] = {"SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=4x", NULL};
    assert_int_equal(shard_env(bad, 0, &i, &n, said, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "SLURM_ARRAY_TASK_COUNT='4x' is not an integer"));
    const char *gaps[] = {"SLURM_ARRAY_TASK_ID=1", "SLURM_ARRAY_TASK_COUNT=3", "SLURM_ARRAY_TASK_MIN=1",
                          "SLURM_ARRAY_TASK_MAX=7", NULL};
    assert_int_equal(shard_env(gaps, 0, &i, &n, said, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "with gaps"));
    assert_int_equal(shard_env(none, 2, &i, &n, said, &err), DRIFT_ERR_INVALID); /* a count without an array */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_example),  cmocka_unit_test(test_spec_bad),
        cmocka_unit_test(test_spec_product),  cmocka_unit_test(test_shards),
        cmocka_unit_test(test_shard_env),
        cmocka_unit_test(test_table_known),   cmocka_unit_test(test_table_per_model_baseline),
        cmocka_unit_test(test_merge),         cmocka_unit_test(test_server_values_are_data),
        cmocka_unit_test(test_server_placeholders_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_datadir.c - where the library finds its data files (util/datadir.c,
 * install.h) and the lab's models (drift_lab_models_find):
 * - the roots in their documented order: $DRIFT_DATA_DIR, the working
 *   directory, the installed datadir (beside the executable, beside the
 *   library, the configured path), the source tree ($DRIFT_SOURCE, the
 *   configure-time one); each named;
 * - drift_data_find takes the first root that has the file, says which,
 *   returns a resolved path, and NULL for a file no root has;
 * - lab: --models first; then DRIFT_DATA_DIR over ./models; with neither
 *   (no models under the working directory) the source tree's or the
 *   fixtures, never the data folder of an unset variable.
 * A scratch folder under /tmp is the working directory and the data dir. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "driftbench/install.h"
#include "driftbench/lab.h"

static char scratch[PATH_MAX], cwd0[PATH_MAX];

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

static void mkdirs(const char *path) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static int setup(void **state) {
    (void)state;
    assert_non_null(getcwd(cwd0, sizeof cwd0));
    snprintf(scratch, sizeof scratch, "/tmp/test_datadir.XXXXXX");
    assert_non_null(mkdtemp(scratch));
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/env/models/guard", scratch);
    mkdirs(p);
    snprintf(p, sizeof p, "%s/cwd/models/guard", scratch);
    mkdirs(p);
    snprintf(p, sizeof p, "%s/env/models/guard/g.gguf", scratch);
    touch(p);
    snprintf(p, sizeof p, "%s/cwd/models/guard/g.gguf", scratch);
    touch(p);
    snprintf(p, sizeof p, "%s/cwd/models/only-here.txt", scratch);
    touch(p);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    assert_int_equal(chdir(cwd0), 0);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_roots_order(void **state) {
    (void)state;
    const char *want[] = {"DRIFT_DATA_DIR", "working directory", "installed", "installed",
                          "installed", "source tree", "source tree"};
    char root[PATH_MAX];
    const char *from = NULL;
    setenv("DRIFT_DATA_DIR", "/some/where", 1);
    int i = 0;
    for (; !drift_data_root(i, root, sizeof root, &from); i++) {
        assert_true(i < 7);
        assert_string_equal(from, want[i]);
        if (i == 0) assert_string_equal(root, "/some/where");
        if (i == 1) assert_string_equal(root, ".");
        if (i == 4) assert_string_equal(root, drift_data_dir_installed());
        if (i == 6) assert_string_equal(root, drift_data_dir_source());
    }
    /* the configure-time source tree is the last root unless left out
     * (DRIFT_SOURCE_LOOKUP=OFF): then there is none past $DRIFT_SOURCE */
    assert_int_equal(i, drift_data_dir_source() ? 7 : 6);
    unsetenv("DRIFT_DATA_DIR");
    assert_int_equal(drift_data_root(0, root, sizeof root, &from), 0);
    assert_string_equal(root, ""); /* unset: a root that cannot exist */
    /* the configured datadir ends in share/driftbench (GNUInstallDirs) */
    const char *inst = drift_data_dir_installed();
    assert_true(strlen(inst) > strlen("/driftbench"));
    assert_string_equal(inst + strlen(inst) - strlen("/driftbench"), "/driftbench");
}

static void test_find(void **state) {
    (void)state;
    char env[PATH_MAX + 8], cwd[PATH_MAX + 8], want[PATH_MAX + 64];
    snprintf(env, sizeof env, "%s/env", scratch);
    snprintf(cwd, sizeof cwd, "%s/cwd", scratch);
    assert_int_equal(chdir(cwd), 0);
    const char *from = NULL;
    /* DRIFT_DATA_DIR first */
    setenv("DRIFT_DATA_DIR", env, 1);
    char *p = drift_data_find("models/guard/g.gguf", &from);
    snprintf(want, sizeof want, "%s/models/guard/g.gguf", env);
    assert_non_null(p);
    assert_string_equal(p, want);
    assert_string_equal(from, "DRIFT_DATA_DIR");
    free(p);
    /* a file only the working directory has: the next root */
    p = drift_data_find("models/only-here.txt", &from);
    snprintf(want, sizeof want, "%s/models/only-here.txt", cwd);
    assert_non_null(p);
    assert_string_equal(p, want); /* resolved, not "./models/..." */
    assert_string_equal(from, "working directory");
    free(p);
    /* unset: the working directory */
    unsetenv("DRIFT_DATA_DIR");
    p = drift_data_find("models/guard/g.gguf", &from);
    snprintf(want, sizeof want, "%s/models/guard/g.gguf", cwd);
    assert_non_null(p);
    assert_string_equal(p, want);
    assert_string_equal(from, "working directory");
    free(p);
    /* no root has it */
    from = "x";
    assert_null(drift_data_find("models/guard/none-such.gguf", &from));
    assert_null(from);
    assert_null(drift_data_find("", NULL));
    /* the shipped guard from elsewhere: the source tree (ctest sets
     * DRIFT_SOURCE), unless an installed datadir has it */
    assert_int_equal(chdir(scratch), 0);
    p = drift_data_find("models/guard/guard-llama-1m.gguf", &from);
    assert_non_null(p);
    assert_true(!strcmp(from, "source tree") || !strcmp(from, "installed"));
    free(p);
}

static void test_lab_models(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    if (!src) skip();
    char env[PATH_MAX + 8], cmd[3 * PATH_MAX];
    snprintf(env, sizeof env, "%s/env", scratch);
    snprintf(cmd, sizeof cmd, "cp '%s/models/qwen2-7m.gguf' '%s/models/a-7m.gguf'", src, env);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(chdir(scratch), 0); /* no models/ here */
    drift_lab_opts o;
    drift_error err = {0};
    /* DRIFT_DATA_DIR's models */
    setenv("DRIFT_DATA_DIR", env, 1);
    drift_lab_study s;
    memset(&s, 0, sizeof s);
    drift_lab_opts_default(&o);
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    assert_int_equal(s.n_models, 1);
    assert_string_equal(s.models[0].name, "a-7m");
    assert_string_equal(s.models_from, "DRIFT_DATA_DIR");
    char want[PATH_MAX + 16];
    snprintf(want, sizeof want, "%s/models", env);
    assert_string_equal(s.models_dir, want);
    assert_int_equal(s.fixtures, 0);
    drift_lab_study_clear(&s);
    /* --models wins over it */
    char flag[PATH_MAX + 16];
    snprintf(flag, sizeof flag, "%s/models", src);
    drift_lab_opts_default(&o);
    o.models_dir = flag;
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    assert_string_equal(s.models_from, "--models");
    assert_true(s.n_models > 1);
    drift_lab_study_clear(&s);
    /* neither: the fixtures ($DRIFT_SOURCE/tests/data/models) or an installed datadir */
    unsetenv("DRIFT_DATA_DIR");
    drift_lab_opts_default(&o);
    assert_int_equal(drift_lab_models_find(&s, &o, &err), DRIFT_OK);
    assert_true(!strcmp(s.models_from, "test fixtures") || !strcmp(s.models_from, "installed"));
    assert_int_equal(s.fixtures, !strcmp(s.models_from, "test fixtures"));
    drift_lab_study_clear(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roots_order),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_lab_models),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

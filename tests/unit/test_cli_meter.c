/* test_cli_meter.c - the CLI's progress figures and text (cli/meter.c,
 * pure): clocks and rates as printed, the smoothed rate's windows and
 * exponential average worked by hand, the time left ("--" until a rate is
 * known), the bar, the periodic line and the final line for given
 * timestamps and counts, and DRIFT_PROGRESS_SECS's values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "meter.h"

static void clock_text(void **state) {
    (void)state;
    char b[32];
    assert_string_equal(cli_fmt_clock(-1, b, sizeof b), "--");
    assert_string_equal(cli_fmt_clock(NAN, b, sizeof b), "--");
    assert_string_equal(cli_fmt_clock(0, b, sizeof b), "0:00");
    assert_string_equal(cli_fmt_clock(7.4, b, sizeof b), "0:07");
    assert_string_equal(cli_fmt_clock(59.5, b, sizeof b), "1:00");
    assert_string_equal(cli_fmt_clock(760, b, sizeof b), "12:40");
    assert_string_equal(cli_fmt_clock(7380, b, sizeof b), "2:03:00");
    assert_string_equal(cli_fmt_clock(360000, b, sizeof b), ">99:59:59");
}

static void rate_text(void **state) {
    (void)state;
    char b[32];
    assert_string_equal(cli_fmt_rate(-1, b, sizeof b), "--/s");
    assert_string_equal(cli_fmt_rate(0, b, sizeof b), "0.0/s");
    assert_string_equal(cli_fmt_rate(3.24, b, sizeof b), "3.2/s");
    assert_string_equal(cli_fmt_rate(12.6, b, sizeof b), "13/s");
    assert_string_equal(cli_fmt_rate(0.05, b, sizeof b), "3.0/min");
}

/* Windows of >= 1 s; the first sets the rate, later ones move it by
 * 1 - exp(-span / 20 s). */
static void rate_smoothing(void **state) {
    (void)state;
    cli_rate r;
    cli_rate_start(&r, 0, 0);
    cli_rate_update(&r, 500, 3);
    assert_true(r.per_s < 0); /* half a window: unknown */
    cli_rate_update(&r, 1000, 4);
    assert_true(fabs(r.per_s - 4.0) < 1e-12);
    cli_rate_update(&r, 3000, 12); /* 8 in 2 s: 4/s again */
    assert_true(fabs(r.per_s - 4.0) < 1e-12);
    cli_rate_update(&r, 4000, 24); /* 12/s for 1 s */
    double a = 1 - exp(-1000.0 / 20000.0);
    assert_true(fabs(r.per_s - (4.0 + a * 8.0)) < 1e-12);
    assert_true(fabs(r.per_s - 4.390164600) < 1e-8);

    /* nothing done in the first two seconds: the first window waits for the first unit */
    cli_rate_start(&r, 0, 0);
    cli_rate_update(&r, 2000, 0);
    assert_true(r.per_s < 0);
    cli_rate_update(&r, 2500, 5);
    assert_true(fabs(r.per_s - 2.0) < 1e-12);
}

static void eta(void **state) {
    (void)state;
    cli_meter m;
    cli_meter_start(&m, "score", 100, 0);
    cli_meter_update(&m, 3, 100, 0, -1, 400);
    assert_true(cli_meter_eta_s(&m) < 0); /* no rate yet */
    cli_meter_update(&m, 25, 100, 0, -1, 5000); /* 5/s */
    assert_true(fabs(cli_meter_eta_s(&m) - 15.0) < 1e-9);
    cli_meter_update(&m, 100, 100, 0, -1, 6000);
    assert_true(cli_meter_eta_s(&m) == 0);
    cli_meter_start(&m, "x", 0, 0); /* no total: no time left */
    cli_meter_update(&m, 10, 0, 0, -1, 2000);
    assert_true(cli_meter_eta_s(&m) < 0);
}

static void lines(void **state) {
    (void)state;
    char b[256];
    cli_meter m;
    cli_meter_start(&m, "score", 40, 0);
    cli_meter_update(&m, 2, 40, 0, -1, 400);
    assert_string_equal(cli_meter_format(&m, 400, CLI_METER_LINE, b, sizeof b),
                        "score: 2/40 (5%)  --/s  elapsed 0:00  left --");
    cli_meter_update(&m, 10, 40, 0, -1, 2000);
    assert_string_equal(cli_meter_format(&m, 2000, CLI_METER_LINE, b, sizeof b),
                        "score: 10/40 (25%)  5.0/s  elapsed 0:02  left 0:06");
    assert_string_equal(cli_meter_format(&m, 2000, CLI_METER_BAR, b, sizeof b),
                        "score      [#####...............] 10/40  left 0:06  5.0/s  elapsed 0:02");
    /* cut to the buffer */
    char small[8];
    assert_string_equal(cli_meter_format(&m, 2000, CLI_METER_LINE, small, sizeof small), "score: ");

    /* a run: tokens where known, failed requests */
    cli_meter_start(&m, "run 'a'", 8, 0);
    cli_meter_update(&m, 1, 8, 0, 30, 1500);  /* 1/1.5 s, 30 tokens in 1.5 s */
    cli_meter_update(&m, 2, 8, 1, -1, 2000);  /* a failed request: no tokens; half a window */
    assert_string_equal(cli_meter_format(&m, 2000, CLI_METER_LINE, b, sizeof b),
                        "run 'a': 2/8 (25%), 1 failed  0.7/s  20 tokens/s  elapsed 0:02  left 0:09");
    cli_meter_update(&m, 8, 8, 1, 110, 4000);
    assert_string_equal(cli_meter_format(&m, 4000, CLI_METER_FINAL, b, sizeof b),
                        "run 'a': 8/8 in 0:04 (2.0/s, 35 tokens/s on average), 1 failed");
    assert_string_equal(cli_meter_format(&m, 4000, CLI_METER_BAR, b, sizeof b),
                        "run 'a'    [####################] 8/8, 1 failed  left 0:00  0.9/s  23 tok/s  elapsed 0:04");

    /* no total: the count alone, no time left */
    cli_meter_start(&m, "divergence", 0, 0);
    cli_meter_update(&m, 5, 0, 0, -1, 400);
    assert_string_equal(cli_meter_format(&m, 400, CLI_METER_LINE, b, sizeof b), "divergence: 5  --/s  elapsed 0:00");
    assert_string_equal(cli_meter_format(&m, 400, CLI_METER_FINAL, b, sizeof b),
                        "divergence: 5 in 0:00 (12/s on average)");
}

static void secs(void **state) {
    (void)state;
    double v = -1;
    assert_int_equal(cli_progress_secs_parse("10", &v), 0);
    assert_true(v == 10);
    assert_int_equal(cli_progress_secs_parse("0.05", &v), 0);
    assert_true(v == 0.05);
    assert_int_equal(cli_progress_secs_parse("0", &v), 0);
    assert_true(v == 0);
    const char *bad[] = {"", "-1", "abc", "10s", "1e9", "nan", " 5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        assert_int_equal(cli_progress_secs_parse(bad[i], &v), -1);
        assert_true(v == 7);
    }
    assert_int_equal(cli_progress_secs_parse(NULL, &v), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clock_text), cmocka_unit_test(rate_text), cmocka_unit_test(rate_smoothing),
        cmocka_unit_test(eta),        cmocka_unit_test(lines),     cmocka_unit_test(secs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* fake_server.h - one controller of the fake OpenAI server
 * (tests/server/fakeserver.c, built as $DRIFT_BUILD/fakeserver) for C
 * tests and benches: start it with its arguments, read the "PORT n" line
 * it prints, stop it. The e2e scripts have the same controller in shell
 * (tests/e2e/lib.sh: start_server).
 *
 * The server is always started as
 *     EXE --lifetime LIFETIME_S --quiet ARGS...
 * so that it ends by itself whatever happens to the test.
 *
 * Users: tests/unit/test_chat.c, test_safety.c, test_http.c and
 * bench/http_client.c. */
#ifndef FAKE_SERVER_H
#define FAKE_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct fake_server {
    pid_t pid;   /* 0 when not running */
    int port;    /* on 127.0.0.1 */
} fake_server;

/* The default executable: "$DRIFT_BUILD/fakeserver" ("./fakeserver"
 * without DRIFT_BUILD). */
void fake_server_path(char *out, size_t cap);

/* Starts exe (NULL: fake_server_path's) with args. Returns 0 (f->pid and
 * f->port set); -1 when exe is not an executable file (the caller skips:
 * not built); -2 when it could not start or printed no port (the process
 * is killed and reaped). */
int fake_server_start(fake_server *f, const char *exe, int lifetime_s, const char *const *args, int nargs);

/* SIGTERM, then waits for it; nothing when it is not running. */
void fake_server_stop(fake_server *f);

#endif

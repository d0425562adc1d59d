/* fake_server.h - starts tests/server/fakeserver (built as
 * $DRIFT_BUILD/fakeserver) for a test and stops it: for test_chat.c and
 * test_safety.c. The server ends by itself after 60 s whatever happens. */
#ifndef FAKE_SERVER_H
#define FAKE_SERVER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fake {
    pid_t pid;
    int port;
} fake;

/* Starts $DRIFT_BUILD/fakeserver with args; 0 ok, -1 when it is not built. */
static int fake_start(fake *f, const char *const *args, int nargs) {
    const char *build = getenv("DRIFT_BUILD");
    char exe[1024];
    snprintf(exe, sizeof exe, "%s/fakeserver", build ? build : ".");
    if (access(exe, X_OK) != 0) return -1;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        const char *argv[32];
        int k = 0;
        argv[k++] = exe;
        argv[k++] = "--lifetime";
        argv[k++] = "60";
        argv[k++] = "--quiet";
        for (int i = 0; i < nargs && k < 31; i++) argv[k++] = args[i];
        argv[k] = NULL;
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    char line[128] = {0};
    f->pid = pid;
    f->port = 0;
    if (in && fgets(line, sizeof line, in)) sscanf(line, "PORT %d", &f->port);
    if (in) fclose(in);
    if (f->port <= 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        fail_msg("fakeserver did not report its port");
    }
    return 0;
}

static void fake_stop(fake *f) {
    kill(f->pid, SIGTERM);
    waitpid(f->pid, NULL, 0);
}

#endif

/* fake_server.c - starts and stops tests/server/fakeserver for C tests and
 * benches (see fake_server.h): fork, the child's stdout a pipe, exec; the
 * parent reads the first line, "PORT n", and closes the pipe (the server
 * is --quiet: nothing else is written to it). */
#include "fake_server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAKE_MAX_ARGS 32

void fake_server_path(char *out, size_t cap) {
    const char *build = getenv("DRIFT_BUILD");
    snprintf(out, cap, "%s/fakeserver", build && *build ? build : ".");
}

int fake_server_start(fake_server *f, const char *exe, int lifetime_s, const char *const *args, int nargs) {
    char path[1024], lifetime[32];
    f->pid = 0;
    f->port = 0;
    if (!exe) {
        fake_server_path(path, sizeof path);
        exe = path;
    }
    if (access(exe, X_OK) != 0) return -1;
    if (nargs < 0 || nargs > FAKE_MAX_ARGS - 5) return -2;
    snprintf(lifetime, sizeof lifetime, "%d", lifetime_s);
    const char *argv[FAKE_MAX_ARGS];
    int k = 0;
    argv[k++] = exe;
    argv[k++] = "--lifetime";
    argv[k++] = lifetime;
    argv[k++] = "--quiet";
    for (int i = 0; i < nargs; i++) argv[k++] = args[i];
    argv[k] = NULL;
    int fds[2];
    if (pipe(fds) != 0) return -2;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -2;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    char line[128] = "";
    int port = 0;
    if (!in || !fgets(line, sizeof line, in) || sscanf(line, "PORT %d", &port) != 1 || port <= 0) {
        if (in) fclose(in);
        else close(fds[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "fake server (%s) did not report a port: '%s'\n", exe, line);
        return -2;
    }
    fclose(in);
    f->pid = pid;
    f->port = port;
    return 0;
}

void fake_server_stop(fake_server *f) {
    if (f->pid <= 0) return;
    kill(f->pid, SIGTERM);
    waitpid(f->pid, NULL, 0);
    f->pid = 0;
}

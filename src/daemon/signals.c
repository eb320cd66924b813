/*
 * signals.c - SIGINT and SIGTERM ask this peer to stop after the current
 * step: the request travels to every peer in the next step's control
 * values, so all of them stop after the same step, rank 0 checkpoints and
 * everyone exits 0. The handler restores the default action, so a second
 * signal kills the process at once (its peers then see the connection
 * drop and fail with a message naming it).
 */
#include "ring_build.h"

#include <signal.h>
#include <string.h>

#include "daemon/daemon.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
    signal(sig, SIG_DFL);
}

void signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    /* no SA_RESTART: a blocking wait returns early and the loop sees the flag */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int signals_stop_requested(void)
{
    return (int)stop_signal;
}

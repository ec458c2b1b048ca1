/* The pod sandbox's pause process for the hardware run: the GPU machine reaches no registry, so the sandbox
 * image is built here. It holds the pod's namespaces, reaps orphans, and exits on SIGINT/SIGTERM, as the
 * kubelet's usual pause image does. Built static by scripts/hardware-toolchain.sh. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) { (void)signo; _exit(0); }

static void reap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction on_stop = {.sa_handler = stop};
  struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &on_stop, NULL);
  sigaction(SIGTERM, &on_stop, NULL);
  sigaction(SIGCHLD, &on_child, NULL);
  for (;;) pause();
  return 0;
}

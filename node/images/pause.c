// pause: the pod sandbox's process. It holds the pod's namespaces open and
// does nothing else: it sleeps until SIGINT or SIGTERM, and reaps any child
// it inherits (it is PID 1 of a pod that shares its PID namespace).
// Built with gcc -static into a FROM scratch image (Containerfile.pause).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { _exit(sig == SIGTERM ? 0 : 1); }

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void) {
	struct sigaction sa = {0};
	sa.sa_handler = quit;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}

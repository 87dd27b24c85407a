/* A library a hostile wheel ships for its plugin to need: its constructor leaves MARKER
 * (an absolute path, -D at build time) wherever it runs with that path in view. */
#include <fcntl.h>
#include <unistd.h>

#ifndef MARKER
#error "build with -DMARKER=\"/path\""
#endif

__attribute__((constructor)) static void planted(void) {
  int fd = open(MARKER, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    (void)write(fd, "ran\n", 4);
    close(fd);
  }
}

int planted_symbol(void) { return 1; }
int planted_closure(void) { return 2; }

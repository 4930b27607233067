// Fiber stacks and context switches of the CUDA emulator (see fiber.h).
#include "kernels/cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) && !defined(MCSERVE_CUDA_EMU_UCONTEXT)
#define MCSERVE_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define MCSERVE_EMU_ASAN 1
#endif

#if defined(MCSERVE_EMU_ASM_SWITCH)
// mcserve_emu_swap_stack(save_sp, load_sp): saves the callee-saved registers, MXCSR and the x87
// control word on the current stack, stores the stack pointer in *save_sp, then switches to
// load_sp and restores the same set from there (System V x86-64 ABI).
asm(R"(
    .text
    .p2align 4
    .globl mcserve_emu_swap_stack
    .hidden mcserve_emu_swap_stack
    .type mcserve_emu_swap_stack, @function
mcserve_emu_swap_stack:
    endbr64
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size mcserve_emu_swap_stack, .-mcserve_emu_swap_stack
)");
extern "C" void mcserve_emu_swap_stack(void** save_sp, void* load_sp);
#endif

namespace mcserve::kernels::emu::internal {
namespace {
// The pool whose fiber is being entered (the trampoline takes no argument).
FiberPool* g_active_pool = nullptr;
}  // namespace

struct FiberPool::Fiber {
  char* map = nullptr;
  size_t map_bytes = 0;
  char* stack_lo = nullptr;  // lowest usable byte; the stack is [stack_lo, stack_lo + kStackBytes)
  bool live = false;         // started and not finished (suspended, or abandoned mid-run)
#if defined(MCSERVE_EMU_ASM_SWITCH)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  void* asan_fake_stack = nullptr;
};

struct FiberPool::SchedulerContext {
#if defined(MCSERVE_EMU_ASM_SWITCH)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  const void* asan_bottom = nullptr;
  size_t asan_size = 0;
};

FiberPool::FiberPool() : scheduler_(std::make_unique<SchedulerContext>()) {}

FiberPool::~FiberPool() {
  for (auto& f : fibers_) {
    if (f->map != nullptr) munmap(f->map, f->map_bytes);
  }
}

bool FiberPool::Reserve(int n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (static_cast<int>(fibers_.size()) < n) {
    auto f = std::make_unique<Fiber>();
    f->map_bytes = kStackBytes + page;
    void* m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return false;
    f->map = static_cast<char*>(m);
    mprotect(f->map, page, PROT_NONE);  // guard page: an overflow faults instead of corrupting
    f->stack_lo = f->map + page;
    fibers_.push_back(std::move(f));
  }
  return true;
}

void FiberPool::Start(int i, Entry entry) {
  Fiber& f = *fibers_[i];
  entry_ = entry;
#if defined(MCSERVE_EMU_ASAN)
  // A fiber left suspended mid-run keeps poisoned redzones of its frames in the shadow memory.
  if (f.live) ASAN_UNPOISON_MEMORY_REGION(f.stack_lo, kStackBytes);
#endif
  f.live = true;
  f.asan_fake_stack = nullptr;
#if defined(MCSERVE_EMU_ASM_SWITCH)
  // Initial frame, popped by mcserve_emu_swap_stack: [csr word][r15..rbp = 0][&Trampoline][0].
  // Trampoline is entered by `ret` with rsp = top - 8, as if called (rsp + 8 is 16-aligned).
  uint64_t* p = reinterpret_cast<uint64_t*>(f.stack_lo + kStackBytes);
  *--p = 0;
  *--p = reinterpret_cast<uint64_t>(&FiberPool::Trampoline);
  for (int r = 0; r < 6; ++r) *--p = 0;
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  *--p = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fpucw) << 32);
  f.sp = p;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack_lo;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, &FiberPool::Trampoline, 0);
#endif
}

void FiberPool::Resume(int i) {
  Fiber& f = *fibers_[i];
  current_ = i;
  g_active_pool = this;
#if defined(MCSERVE_EMU_ASAN)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, f.stack_lo, kStackBytes);
#endif
#if defined(MCSERVE_EMU_ASM_SWITCH)
  mcserve_emu_swap_stack(&scheduler_->sp, f.sp);
#else
  swapcontext(&scheduler_->ctx, &f.ctx);
#endif
#if defined(MCSERVE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  current_ = -1;
}

void FiberPool::Yield() {
  Fiber& f = *fibers_[current_];
#if defined(MCSERVE_EMU_ASAN)
  __sanitizer_start_switch_fiber(&f.asan_fake_stack, scheduler_->asan_bottom,
                                 scheduler_->asan_size);
#endif
#if defined(MCSERVE_EMU_ASM_SWITCH)
  mcserve_emu_swap_stack(&f.sp, scheduler_->sp);
#else
  swapcontext(&f.ctx, &scheduler_->ctx);
#endif
#if defined(MCSERVE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(f.asan_fake_stack, &scheduler_->asan_bottom,
                                  &scheduler_->asan_size);
#endif
}

void FiberPool::ExitToScheduler() {
#if defined(MCSERVE_EMU_ASAN)
  // nullptr: this fiber's frames are gone for good, ASan may drop its fake stack.
  __sanitizer_start_switch_fiber(nullptr, scheduler_->asan_bottom, scheduler_->asan_size);
#endif
#if defined(MCSERVE_EMU_ASM_SWITCH)
  void* dead_sp = nullptr;
  mcserve_emu_swap_stack(&dead_sp, scheduler_->sp);
#else
  setcontext(&scheduler_->ctx);
#endif
  std::abort();  // never resumed
}

void FiberPool::Abandon() { ExitToScheduler(); }

void FiberPool::Trampoline() {
  FiberPool* pool = g_active_pool;
#if defined(MCSERVE_EMU_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &pool->scheduler_->asan_bottom,
                                  &pool->scheduler_->asan_size);
#endif
  const int index = pool->current_;
  pool->entry_(index);
  pool->fibers_[index]->live = false;
  pool->ExitToScheduler();
}

}  // namespace mcserve::kernels::emu::internal

// Fibers for the SIMT emulation (simt_emulation.h): every emulated CUDA thread of a block runs on
// its own stack, all of them on the calling OS thread, and control changes hands only where a
// kernel waits (barriers, shuffles). An OS thread per CUDA thread costs a kernel round trip at
// every barrier (hundreds per block on two cores); a fiber switch here is a few instructions, so
// a block of 256 threads passing a dozen barriers takes well under a millisecond.
//
// x86-64 switches with a few lines of assembly (the callee-saved registers and the stack pointer;
// not MXCSR or the x87 control word, which no kernel changes and restoring would stall); other
// machines fall back to ucontext (a system call per switch).
// Under AddressSanitizer every switch is announced (__sanitizer_start/finish_switch_fiber), so
// that exceptions thrown on a fiber's stack and ASan's own stack checks know which stack is live.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#if defined(__SANITIZE_ADDRESS__)
#define MDS_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MDS_SIMT_ASAN 1
#endif
#endif
#if defined(MDS_SIMT_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
// mds_simt_switch(save_sp, load_sp): pushes the callee-saved state, stores the stack pointer in
// *save_sp, loads load_sp and pops the state saved there. mds_simt_fiber_start is where a new
// fiber's first switch returns to: it calls r13(r12). Weak, as every test file including this
// header emits the same definitions.
asm(R"(
  .text
  .weak mds_simt_switch
  .type mds_simt_switch, @function
mds_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size mds_simt_switch, .-mds_simt_switch

  .weak mds_simt_fiber_start
  .type mds_simt_fiber_start, @function
mds_simt_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size mds_simt_fiber_start, .-mds_simt_fiber_start
)");
extern "C" void mds_simt_switch(void** save_sp, void* load_sp);
extern "C" void mds_simt_fiber_start();
#else
#include <ucontext.h>
#endif

namespace mds::simt::fiber {

// An mmap'd stack with an inaccessible guard page below it: an overflow faults.
class Stack {
 public:
  static constexpr std::size_t kBytes = 256 * 1024;

  Stack() {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    mapping_ =
        mmap(nullptr, kBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping_ == MAP_FAILED) throw std::runtime_error("simt: cannot map a fiber stack");
    mprotect(mapping_, page, PROT_NONE);
    bottom_ = static_cast<char*>(mapping_) + page;
  }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  ~Stack() { munmap(mapping_, kBytes + static_cast<std::size_t>(sysconf(_SC_PAGESIZE))); }

  char* bottom() const { return bottom_; }
  char* top() const { return bottom_ + kBytes; }

 private:
  void* mapping_ = nullptr;
  char* bottom_ = nullptr;
};

// Where a suspended context resumes, and (under ASan) its stack's bounds.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;
};

#if !defined(__x86_64__)
inline void ucontext_entry(unsigned entry_hi, unsigned entry_lo, unsigned arg_hi, unsigned arg_lo) {
  const auto join = [](unsigned hi, unsigned lo) {
    return (static_cast<std::uintptr_t>(hi) << 32) | lo;
  };
  reinterpret_cast<void (*)(void*)>(join(entry_hi, entry_lo))(
      reinterpret_cast<void*>(join(arg_hi, arg_lo)));
}
#endif

// Makes `context` start entry(arg) on `stack` when first switched to. entry must never return
// (it switches away for the last time instead).
inline void prepare(Context& context, const Stack& stack, void (*entry)(void*), void* arg) {
  context.stack_bottom = stack.bottom();
  context.stack_size = Stack::kBytes;
  context.fake_stack = nullptr;
#if defined(__x86_64__)
  // What mds_simt_switch pops, from the new stack pointer up: r15, r14, r13 = entry, r12 = arg,
  // rbx, rbp = 0 (ends frame-pointer walks), the return address. After its `ret` the stack
  // pointer is 16-byte aligned, as a call requires.
  auto* top = reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::uintptr_t>(stack.top()) &
                                               ~std::uintptr_t{15});
  std::uint64_t* sp = top - 7;
  sp[0] = 0;  // r15
  sp[1] = 0;  // r14
  sp[2] = reinterpret_cast<std::uint64_t>(entry);
  sp[3] = reinterpret_cast<std::uint64_t>(arg);
  sp[4] = 0;  // rbx
  sp[5] = 0;  // rbp
  sp[6] = reinterpret_cast<std::uint64_t>(&mds_simt_fiber_start);
  context.sp = sp;
#else
  getcontext(&context.uc);
  context.uc.uc_stack.ss_sp = stack.bottom();
  context.uc.uc_stack.ss_size = Stack::kBytes;
  context.uc.uc_link = nullptr;
  const auto e = reinterpret_cast<std::uintptr_t>(entry), a = reinterpret_cast<std::uintptr_t>(arg);
  makecontext(&context.uc, reinterpret_cast<void (*)()>(&ucontext_entry), 4,
              static_cast<unsigned>(e >> 32), static_cast<unsigned>(e),
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
#endif
}

// Suspends `from` and resumes `to`; returns when something switches back to `from`. `leaving`
// says `from` will never be resumed (ASan then drops its fake stack).
inline void switch_to(Context& from, Context& to, bool leaving = false) {
#if defined(MDS_SIMT_ASAN)
  __sanitizer_start_switch_fiber(leaving ? nullptr : &from.fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)leaving;
#endif
#if defined(__x86_64__)
  mds_simt_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
#if defined(MDS_SIMT_ASAN)
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

// The first thing a new fiber does: completes the switch that started it. Under ASan the first
// fiber of a launch, started from the scheduler, learns the bounds of the scheduler's stack there
// (switches back to the scheduler need them).
inline void started(Context& scheduler) {
#if defined(MDS_SIMT_ASAN)
  const void* from_bottom = nullptr;
  std::size_t from_size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
  if (scheduler.stack_bottom == nullptr) {
    scheduler.stack_bottom = from_bottom;
    scheduler.stack_size = from_size;
  }
#else
  (void)scheduler;
#endif
}

}  // namespace mds::simt::fiber

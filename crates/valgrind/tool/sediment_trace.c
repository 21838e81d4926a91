/* sediment-trace: a valgrind tool that writes the guest instructions a program executes as a
   compact binary trace on a file descriptor, for Sediment's instruction-side simulator.

   Usage: valgrind --tool=sedtrace --trace-fd=N PROGRAM ARGS  (N: an open descriptor, a pipe)
   Sediment builds it on first use and names it by a relative --tool= path to its cache
   (crates/valgrind/src/tracer.rs). The source is Sediment's (MIT OR Apache-2.0); the
   executable links valgrind's core libraries, which are GPL-2.0-or-later, and is built on the
   user's machine, never shipped.

   What it records. Lackey (`--tool=lackey --trace-mem=yes`) calls a helper and prints one text
   line per executed instruction; this tool does the same bookkeeping at translation time
   instead. Each superblock is cut into *segments*: maximal runs of instructions that follow
   each other in memory (the next IMark starts where the previous one ends) with no side exit
   between them. A segment's start, length in bytes and instruction count are constants of
   the translation, so at run time one helper call per executed segment receives them. The
   helper extends the pending run when the segment starts where the pending run ends (the
   rule the simulator uses to merge consecutive instructions into one fetch range) and
   otherwise writes the pending run as a record. Helper calls sit where lackey flushes its
   events (before every side exit and at the end of the superblock), so the instructions
   reported, and their order, are lackey's.

   Executable file mappings of the client are written once before the first run (from the
   address space manager, so no /proc/PID/maps polling is needed), then as they appear
   (mmap with PROT_EXEC, e.g. dlopen).

   The format (all integers little-endian, as written by the host):
     header   8 bytes "SEDTRACE", u32 version (1), u32 flags (0)
     run      u64 start (bit 63 clear), u32 length in bytes, u32 instruction count
     control  u64 (1 << 63) | (kind << 32) | payload length, then the payload:
       kind 1, mapping: u64 start, u64 end (exclusive), u64 file offset, u32 prot
                (1 read, 2 write, 4 execute), u32 zero, then the file's path (no NUL)
       kind 2, end: u64 instructions, u64 run records; last record of a complete trace
       kind 3, exec: the same totals, written before an execve (valgrind runs the new
                program natively and calls no fini); when the execve fails, tracing goes on
   crates/sim/src/bintrace.rs is the reader and documents the same fields.

   A forked child stops tracing (its buffer is discarded; the parent flushes before the fork),
   so the trace is the parent's alone. Lackey would interleave the child's lines until exec. */

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_options.h"
#include "pub_tool_machine.h"
#include "pub_tool_aspacemgr.h"
#include "pub_tool_vkiscnums.h"

#define TRACE_VERSION 1
#define KIND_MAP 1ULL
#define KIND_END 2ULL
#define KIND_EXEC 3ULL
#define CONTROL (1ULL << 63)

static Int clo_trace_fd = -1;

/* Output buffer: written when full, at a fork and at exit. */
#define BUF_BYTES (1 << 16)
static UChar buf[BUF_BYTES];
static UInt buf_used = 0;
static Bool write_failed = False;

/* The pending run. */
static Addr pend_start = 0;
static Addr pend_end = 0;
static ULong pend_count = 0;

static ULong total_instructions = 0;
static ULong total_runs = 0;
static Bool maps_written = False;

static void drain(void)
{
   UInt at = 0;
   while (at < buf_used && !write_failed) {
      Int n = VG_(write)(clo_trace_fd, buf + at, buf_used - at);
      if (n <= 0) {
         /* The reader went away: keep running the program, stop writing. */
         write_failed = True;
         break;
      }
      at += n;
   }
   buf_used = 0;
}

static void put(const void* p, UInt n)
{
   if (buf_used + n > BUF_BYTES)
      drain();
   tl_assert(n <= BUF_BYTES);
   VG_(memcpy)(buf + buf_used, p, n);
   buf_used += n;
}

static void put_u64(ULong v) { put(&v, 8); }
static void put_u32(UInt v) { put(&v, 4); }

static void put_map(NSegment const* seg)
{
   const HChar* name = VG_(am_get_filename)(seg);
   UInt len = name ? VG_(strlen)(name) : 0;
   UInt prot = (seg->hasR ? 1 : 0) | (seg->hasW ? 2 : 0) | (seg->hasX ? 4 : 0);
   put_u64(CONTROL | (KIND_MAP << 32) | (ULong)(32 + len));
   put_u64(seg->start);
   put_u64((ULong)seg->end + 1);
   put_u64((ULong)seg->offset);
   put_u32(prot);
   put_u32(0);
   if (len)
      put(name, len);
}

/* Every executable file mapping of the client, in address order. */
static void put_maps(void)
{
   static Addr starts[4096];
   Int n = VG_(am_get_segment_starts)(SkFileC, starts, 4096);
   Int i;
   maps_written = True;
   if (n < 0)
      n = 0; /* more than 4096 file mappings: none reported, the reader says so */
   for (i = 0; i < n; i++) {
      NSegment const* seg = VG_(am_find_nsegment)(starts[i]);
      if (seg && seg->kind == SkFileC && seg->hasX)
         put_map(seg);
   }
}

static void put_pending(void)
{
   if (pend_count == 0)
      return;
   put_u64(pend_start);
   put_u32((UInt)(pend_end - pend_start));
   put_u32((UInt)pend_count);
   total_runs++;
   pend_count = 0;
}

/* One executed segment: `lc` is its length in bytes (high 32 bits) and instruction count. */
static VG_REGPARM(2) void sd_segment(Addr start, HWord lc)
{
   ULong len = lc >> 32, count = lc & 0xffffffffULL;
   total_instructions += count;
   if (pend_count != 0 && start == pend_end && pend_end - pend_start + len <= 0xffffffffULL
       && pend_count + count <= 0xffffffffULL) {
      pend_end += len;
      pend_count += count;
      return;
   }
   if (UNLIKELY(!maps_written))
      put_maps();
   put_pending();
   pend_start = start;
   pend_end = start + len;
   pend_count = count;
}

static void sd_new_mmap(Addr a, SizeT len, Bool rr, Bool ww, Bool xx, ULong di_handle)
{
   if (!maps_written || !xx)
      return;
   NSegment const* seg = VG_(am_find_nsegment)(a);
   if (seg && seg->kind == SkFileC)
      put_map(seg);
}

static void put_totals(ULong kind)
{
   put_pending();
   put_u64(CONTROL | (kind << 32) | 16ULL);
   put_u64(total_instructions);
   put_u64(total_runs);
   drain();
}

static void sd_pre_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs)
{
   if (syscallno == __NR_execve || syscallno == __NR_execveat)
      put_totals(KIND_EXEC);
}

static void sd_post_syscall(ThreadId tid, UInt syscallno, UWord* args, UInt nArgs, SysRes res)
{
}

static void sd_fork_pre(ThreadId tid)
{
   put_pending();
   drain();
}

static void sd_fork_child(ThreadId tid)
{
   buf_used = 0;
   pend_count = 0;
   write_failed = True;
}

/* Adds the helper call of the segment [start, start + len) of `count` instructions. */
static void add_segment(IRSB* sb, Addr start, ULong len, ULong count)
{
   if (count == 0)
      return;
   IRDirty* di = unsafeIRDirty_0_N(
      2, "sd_segment", VG_(fnptr_to_fnentry)(&sd_segment),
      mkIRExprVec_2(mkIRExpr_HWord(start), mkIRExpr_HWord((HWord)((len << 32) | count))));
   addStmtToIRSB(sb, IRStmt_Dirty(di));
}

static IRSB* sd_instrument(VgCallbackClosure* closure, IRSB* sbIn, const VexGuestLayout* layout,
                           const VexGuestExtents* vge, const VexArchInfo* archinfo_host,
                           IRType gWordTy, IRType hWordTy)
{
   Int i;
   IRSB* sbOut;
   /* The segment being built: [seg_start, seg_end), seg_count instructions. */
   Addr seg_start = 0, seg_end = 0;
   ULong seg_count = 0;

   if (gWordTy != hWordTy)
      VG_(tool_panic)("host/guest word size mismatch");

   sbOut = deepCopyIRSBExceptStmts(sbIn);
   i = 0;
   while (i < sbIn->stmts_used && sbIn->stmts[i]->tag != Ist_IMark) {
      addStmtToIRSB(sbOut, sbIn->stmts[i]);
      i++;
   }
   for (; i < sbIn->stmts_used; i++) {
      IRStmt* st = sbIn->stmts[i];
      if (!st || st->tag == Ist_NoOp)
         continue;
      switch (st->tag) {
      case Ist_IMark: {
         Addr a = (Addr)st->Ist.IMark.addr;
         ULong n = st->Ist.IMark.len;
         if (seg_count != 0 && a == seg_end) {
            seg_end += n;
            seg_count++;
         } else {
            add_segment(sbOut, seg_start, seg_end - seg_start, seg_count);
            seg_start = a;
            seg_end = a + n;
            seg_count = 1;
         }
         addStmtToIRSB(sbOut, st);
         break;
      }
      case Ist_Exit:
         /* The instructions so far ran if this exit is reached: report them before it. */
         add_segment(sbOut, seg_start, seg_end - seg_start, seg_count);
         seg_count = 0;
         addStmtToIRSB(sbOut, st);
         break;
      default:
         addStmtToIRSB(sbOut, st);
         break;
      }
   }
   add_segment(sbOut, seg_start, seg_end - seg_start, seg_count);
   return sbOut;
}

static Bool sd_process_cmd_line_option(const HChar* arg)
{
   if VG_INT_CLO (arg, "--trace-fd", clo_trace_fd) {
   } else
      return False;
   return True;
}

static void sd_print_usage(void)
{
   VG_(printf)("    --trace-fd=<n>            write the binary trace to descriptor n\n");
}

static void sd_print_debug_usage(void) { VG_(printf)("    (none)\n"); }

static void sd_post_clo_init(void)
{
   if (clo_trace_fd < 0)
      VG_(fmsg_bad_option)("--trace-fd", "sedtrace needs --trace-fd=<n>, an open descriptor\n");
   put("SEDTRACE", 8);
   put_u32(TRACE_VERSION);
   put_u32(0);
}

static void sd_fini(Int exitcode)
{
   if (!maps_written)
      put_maps();
   put_totals(KIND_END);
}

static void sd_pre_clo_init(void)
{
   VG_(details_name)("sedtrace");
   VG_(details_version)("1");
   VG_(details_description)("Sediment's instruction trace");
   VG_(details_copyright_author)("Sediment authors; the executable links valgrind's GPL core");
   VG_(details_bug_reports_to)("the Sediment project");
   VG_(details_avg_translation_sizeB)(200);
   VG_(basic_tool_funcs)(sd_post_clo_init, sd_instrument, sd_fini);
   VG_(needs_command_line_options)(sd_process_cmd_line_option, sd_print_usage,
                                   sd_print_debug_usage);
   VG_(track_new_mem_mmap)(sd_new_mmap);
   VG_(needs_syscall_wrapper)(sd_pre_syscall, sd_post_syscall);
   VG_(atfork)(sd_fork_pre, NULL, sd_fork_child);
}

VG_DETERMINE_INTERFACE_VERSION(sd_pre_clo_init)

/* Keeps Oclgrind's --uninitialized plugin exact for a test program that
 * links tests/oclgrind/shadow_shim.c (test_oclgrind, shadow_demo).
 *
 * The plugin (Oclgrind 21.10; the same code up to 26.03.1) keeps one
 * "shadow" per buffer, the record of which bytes hold defined values, and
 * goes wrong in two ways that flashcl's calls trigger (shadow_demo.c shows
 * both on a few lines of OpenCL):
 *
 *  1. A released buffer's shadow is never dropped (the plugin has no
 *     memoryDeallocated handler), and Oclgrind hands the released buffer's
 *     number to the next buffer created (Memory::getNextBuffer). A buffer
 *     created without host data then inherits the old shadow, sized for
 *     the old buffer: kernel stores past the old size are not recorded and
 *     loads there read as uninitialised (false reports), while bytes the
 *     old buffer had defined read as defined (missed reports).
 *  2. A host store to a buffer (Uninitialized::hostMemoryStore) replaces
 *     the buffer's whole shadow by a new one the size of the store and marks
 *     it defined only if the store starts at offset 0. Oclgrind runs
 *     clEnqueueFillBuffer as one store per pattern (Queue::executeFillBuffer),
 *     so after a fill with a 4-byte pattern the shadow is 4 bytes of
 *     indeterminate content and the rest of the buffer reads as
 *     uninitialised. A write at an offset or a map for writing does the same.
 *
 * The shim defines clReleaseMemObject, clEnqueueFillBuffer and
 * clEnqueueNDRangeKernel in the executable, ahead of the OpenCL library (the
 * library's own calls resolve to them too), and forwards to the real ones:
 *  - releases are held until shadow_shim_finish(), so that no buffer number
 *    is reused while the program runs (1);
 *  - a fill is done by a one-line kernel, whose stores mark exactly the
 *    filled bytes as defined (2);
 *  - kernel launches are counted by name, for the coverage check;
 *  - a write at an offset or of part of a buffer, a copy between buffers
 *    (which Oclgrind does not pass to the plugin at all) and a map for
 *    writing are refused with a message, as the plugin would track them
 *    wrongly: nothing in test_oclgrind's path does any of them today.
 * SHADOW_SHIM=0 in the environment turns the holding and the fills off.
 * Single-threaded. */
#ifndef FCL_SHADOW_SHIM_H
#define FCL_SHADOW_SHIM_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

/* 0: forward releases at once (shadow_demo shows the false reports). */
extern int shadow_shim_hold_releases;
/* 0: forward fills to the OpenCL implementation. */
extern int shadow_shim_fill_by_kernel;

/* Launches of kernel `name` so far. */
long shadow_shim_launches(const char *name);
/* Prints every kernel launched, with counts, one line each after prefix. */
void shadow_shim_print_launches(const char *prefix);
/* Calls the shim refused (printed when refused). */
int shadow_shim_refused(void);
/* Releases the held buffers and the fill kernels. Call at the end, after
 * the last use of any buffer. */
void shadow_shim_finish(void);

#endif

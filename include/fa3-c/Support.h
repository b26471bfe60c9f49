/*===- fa3-c/Support.h - the error contract of the fa3 C API -------*- C -*-===*\
|*                                                                            *|
|* MLIR's own C API asserts on misuse; a library embedded in an ML compiler  *|
|* must not take its host down, so every fa3* function keeps this contract   *|
|* (docs/c-api.md has the full list):                                        *|
|*                                                                            *|
|* - A NULL pointer, a null-wrapped MLIR handle (ptr == NULL), a NULL string *|
|*   where one is required, an out-of-range index, or a destroyed           *|
|*   Fa3DiagnosticLog / Fa3KernelSet never crashes: the call does nothing    *|
|*   and returns its failure value (NULL, 0, false, a null MlirOperation, a *|
|*   zeroed struct, a failed MlirLogicalResult).                             *|
|* - Where a context is reachable (through a location, value, operation or  *|
|*   module argument), the reason is also emitted there as an error         *|
|*   diagnostic, so handlers and Fa3DiagnosticLog see it.                    *|
|* - Every call that can fail sets this thread's last error: a message when *|
|*   it fails (for failed compilations: the first error diagnostic), "" when *|
|*   it succeeds.                                                            *|
|* - Destroy functions accept NULL and do nothing, like free().             *|
|* - Not detected: dangling MLIR handles (a value of a destroyed context),  *|
|*   and pointers that were never returned by this library.                 *|
\*===----------------------------------------------------------------------===*/
#ifndef FA3_C_SUPPORT_H
#define FA3_C_SUPPORT_H

#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why the last fa3* call on this thread that can fail failed, prefixed by
 * its name ("fa3KernelSetGet: index 99 out of range ..."), or "" when it
 * succeeded. Never NULL; valid until the next fa3* call on this thread. */
MLIR_CAPI_EXPORTED const char *fa3LastError(void);

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_SUPPORT_H */

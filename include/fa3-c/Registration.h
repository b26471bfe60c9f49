/*===- fa3-c/Registration.h - registering FA3-MLIR ----------------*- C -*-===*\
|*                                                                            *|
|* What a host needs before parsing attention IR and running our pipelines, *|
|* plus a diagnostic log so callers without callbacks (ctypes) can read     *|
|* error messages.                                                           *|
\*===----------------------------------------------------------------------===*/
#ifndef FA3_C_REGISTRATION_H
#define FA3_C_REGISTRATION_H

#include "fa3-c/Support.h"
#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attn dialect and every upstream dialect, extension and LLVM-IR
 * translation our pipelines use. A null registry: nothing (last error). */
MLIR_CAPI_EXPORTED void fa3RegisterAllDialects(MlirDialectRegistry registry);

/* Every upstream pass and the attn passes and pipelines, for
 * mlirParsePassPipeline. Idempotent. */
MLIR_CAPI_EXPORTED void fa3RegisterAllPasses(void);

/* A context with fa3RegisterAllDialects applied and all of them loaded. */
MLIR_CAPI_EXPORTED MlirContext fa3ContextCreate(void);

/* Collects the context's diagnostics (errors, warnings, remarks, each with
 * its location) as text; with several logs on a context, the latest
 * attached one gets them. It may be destroyed before or after its context
 * (once the context is gone it keeps the text and collects nothing more).
 * NULL, or a log destroyed already, is refused: Attach with a null context
 * and Text return NULL, Clear and Destroy do nothing; all set the last error
 * (fa3-c/Support.h), except Destroy(NULL), a no-op. A log must not be used
 * on one thread while its context is destroyed on another. */
typedef struct Fa3DiagnosticLog Fa3DiagnosticLog;
MLIR_CAPI_EXPORTED Fa3DiagnosticLog *fa3DiagnosticLogAttach(MlirContext ctx);
/* Valid until the next diagnostic, Clear or Destroy of this log. */
MLIR_CAPI_EXPORTED const char *fa3DiagnosticLogText(Fa3DiagnosticLog *log);
MLIR_CAPI_EXPORTED void fa3DiagnosticLogClear(Fa3DiagnosticLog *log);
MLIR_CAPI_EXPORTED void fa3DiagnosticLogDestroy(Fa3DiagnosticLog *log);

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_REGISTRATION_H */

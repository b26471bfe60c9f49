/*===- fa3-c/Driver.h - running pipelines from C -------------------*- C -*-===*\
|*                                                                            *|
|* Conveniences over MLIR's C API for hosts that cannot pass callbacks      *|
|* easily (ctypes): strings come back as malloc'd C strings, errors go to   *|
|* the context's diagnostics (see Fa3DiagnosticLog).                        *|
\*===----------------------------------------------------------------------===*/
#ifndef FA3_C_DRIVER_H
#define FA3_C_DRIVER_H

#include "fa3-c/Support.h"
#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The textual IR of `op` (generic form if `generic`); free with
 * fa3StringDestroy (which, like free, accepts NULL). A null op: NULL. */
MLIR_CAPI_EXPORTED char *fa3OperationToString(MlirOperation op, bool generic);
MLIR_CAPI_EXPORTED void fa3StringDestroy(char *str);

/* Parses `text` as a module in `ctx`; diagnostics carry `name` (a file
 * name; NULL: "<input>") as their location. Input nested deeper than 1000
 * brackets is refused before MLIR's parser, which recurses per level, can
 * overflow the stack. Returns a null module on failure (diagnostics of
 * `ctx`; the first is also the last error). */
MLIR_CAPI_EXPORTED MlirModule fa3ModuleCreateParse(MlirContext ctx,
                                                   MlirStringRef text,
                                                   const char *name);

/* Parses `pipeline` (e.g. "attn-cpu-reference-pipeline" or
 * "builtin.module(attn-tile{block-m=64})") and runs it on `op`. Pipeline
 * syntax errors and pass failures are reported as diagnostics of the op's
 * context (the first one is also the last error). Registers all passes on
 * first use. A null op or a NULL pipeline: failure. */
MLIR_CAPI_EXPORTED MlirLogicalResult fa3RunPassPipeline(MlirOperation op,
                                                        const char *pipeline);

#ifdef __cplusplus
}
#endif

#endif /* FA3_C_DRIVER_H */

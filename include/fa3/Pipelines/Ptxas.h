//===- Ptxas.h - finding and running ptxas ----------------------*- C++ -*-===//
#ifndef FA3_PIPELINES_PTXAS_H
#define FA3_PIPELINES_PTXAS_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace fa3 {
/// The CUDA toolkit gpu-module-to-binary takes ptxas from: $CUDA_HOME,
/// $CUDA_PATH, else /usr/local/cuda if it has bin/ptxas; "" if none.
std::string defaultToolkit();

/// The ptxas to assemble with: <toolkit>/bin/ptxas (toolkit "": the
/// default above), or the one on PATH when there is no toolkit at all;
/// "" if none.
std::string findPtxas(llvm::StringRef toolkit = "");

/// Assembles `ptx` for `chip` with `ptxas` (the flags gpu-module-to-binary
/// uses: -arch <chip> --opt-level 3), waiting at most `timeoutSeconds`.
/// Returns true and the cubin (a CUDA ELF) in `cubin`; false and the reason
/// (ptxas's own messages included) in `error`.
bool assembleCubin(llvm::StringRef ptxas, llvm::StringRef ptx,
                   llvm::StringRef chip, unsigned timeoutSeconds,
                   std::string &cubin, std::string &error);
} // namespace fa3

#endif

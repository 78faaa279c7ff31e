// Forced into every unit test file (tests/CMakeLists.txt): QMPI_SOURCE_DIR, the checkout's
// path, for the tests that read its fixtures and the Qwen tokenizer. It is a call, not the path
// itself, so the path is compiled into one small file per build (source_dir.cpp.in) and every
// other test object is the same in every checkout: ccache shares them between worktrees, CI
// clones and the fresh root instead of compiling the tests again in each.
#pragma once

namespace qmpi::test {
const char* source_dir();
}  // namespace qmpi::test

#define QMPI_SOURCE_DIR ::qmpi::test::source_dir()

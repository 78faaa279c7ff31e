// What the MPI test programs that run the real Engine share: the command line
// (--model-config FILE --tp T --pp P, plus the program's own integer options), EngineConfig
// for synthetic weights on the CPU backend, and a main() that reports a qmpi::Error with its
// exit code.
#pragma once
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "app/commands/options.h"
#include "backend/cpu/cpu_backend.h"
#include "core/errors.h"

namespace qmpi::mpitest {

struct EngineArgs {
  std::string model_config;
  Layout layout;
  std::map<std::string, int> extra;  // the program's own options: name -> value (defaults in)
};

// `extra` names the program's own integer options with their defaults, e.g. {{"--fail-rank", -1}}.
inline EngineArgs parse_engine_args(int argc, char** argv, std::map<std::string, int> extra = {}) {
  EngineArgs a;
  a.extra = std::move(extra);
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) raise(Err::Usage, k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--model-config")
      a.model_config = v;
    else if (k == "--tp")
      a.layout.tp = std::stoi(v);
    else if (k == "--pp")
      a.layout.pp = std::stoi(v);
    else if (a.extra.count(k))
      a.extra[k] = std::stoi(v);
    else
      raise(Err::Usage, "unknown option " + k);
  }
  return a;
}

// Synthetic weights from the config, the CPU backend with one thread, a 60 s comm timeout.
inline EngineConfig synthetic_cpu_engine(const EngineArgs& a) {
  EngineConfig o;
  o.model.synthetic_weights = true;
  o.model.config_path = a.model_config;
  o.parallel.layout = a.layout;
  o.parallel.comm_timeout_s = 60;
  o.backend.make_backend = [](int) { return make_cpu_backend(CpuBackendOptions{1}); };
  return o;
}

inline int run_main(const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
    return e.exit_code();
  }
}

}  // namespace qmpi::mpitest

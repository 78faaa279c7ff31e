// qmpi make-lora: a random LoRA adapter (PEFT layout) for a base model folder, to test and
// benchmark --lora-modules without a trained adapter. Its effect on the text is meaningless.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "app/commands/commands.h"
#include "core/errors.h"
#include "model/config.h"
#include "model/synthetic_lora.h"

namespace qmpi {
namespace po = boost::program_options;

int cmd_make_lora(const Args& args) {
  std::string model, out, targets, dtype;
  SyntheticLoraSpec spec;
  po::options_description opts("qmpi make-lora options");
  // clang-format off
  opts.add_options()
      ("help,h", "show this help")
      ("model", po::value(&model), "the base model folder (its config.json gives the shapes)")
      ("out", po::value(&out), "output folder (created; existing files are overwritten)")
      ("rank", po::value(&spec.r)->default_value(spec.r), "the adapter's rank r")
      ("alpha", po::value(&spec.alpha)->default_value(spec.alpha), "lora_alpha")
      ("rslora", po::bool_switch(&spec.rslora), "use_rslora: scale alpha / sqrt(r)")
      ("targets", po::value(&targets)->default_value("q_proj,v_proj"),
       "target_modules, comma-separated among q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,"
       "down_proj")
      ("seed", po::value(&spec.seed)->default_value(0), "random seed of A and B")
      ("dtype", po::value(&dtype)->default_value("f32"), "tensor dtype: f32 | bf16");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    raise(Err::Usage, std::string("make-lora: ") + e.what(), "Run `qmpi make-lora --help`.");
  }
  if (vm.count("help")) {
    std::cout << "usage: qmpi make-lora --model BASE --out DIR [options]\n"
                 "Writes a random LoRA adapter (adapter_config.json, adapter_model.safetensors) "
                 "for BASE.\n\n"
              << opts << "\n";
    return 0;
  }
  if (model.empty() || out.empty())
    raise(Err::Usage, "make-lora needs --model BASE and --out DIR", "Run `qmpi make-lora --help`.");
  if (dtype != "f32" && dtype != "bf16")
    raise(Err::Usage, "--dtype " + dtype + " is not f32 or bf16");
  spec.dtype = dtype == "f32" ? DType::F32 : DType::BF16;
  spec.targets.clear();
  std::stringstream in(targets);
  for (std::string t; std::getline(in, t, ',');)
    if (!t.empty()) spec.targets.push_back(t);
  if (spec.targets.empty()) raise(Err::Usage, "make-lora: --targets is empty");

  const int64_t params = write_synthetic_lora(out, ModelConfig::load(model), spec);
  std::printf("make-lora: r %lld, alpha %g%s, %s in %s: %lld params; the weights are random\n",
              static_cast<long long>(spec.r), spec.alpha, spec.rslora ? " (rslora)" : "",
              targets.c_str(), out.c_str(), static_cast<long long>(params));
  return 0;
}

}  // namespace qmpi

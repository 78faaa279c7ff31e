#include "model/synthetic_lora.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "io/safetensors_writer.h"
#include "model/lora_config.h"
#include "model/synthetic.h"

namespace qmpi {

int64_t write_synthetic_lora(const std::string& dir, const ModelConfig& base,
                             const SyntheticLoraSpec& spec) {
  for (const std::string& t : spec.targets)
    if (std::find(kLoraModules.begin(), kLoraModules.end(), t) == kLoraModules.end())
      raise(Err::Usage, "make-lora: --targets names " + t + ", not a decoder projection",
            "Choose among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.");
  if (spec.r < 1) raise(Err::Usage, "make-lora: --rank must be positive");

  SafetensorsWriter w;
  int64_t params = 0;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    params += shape[0] * shape[1];
    const SyntheticTensor values(spec.seed, name, shape);
    w.add(name, spec.dtype, std::move(shape),
          [values, dtype = spec.dtype](int64_t first, int64_t count, void* dst) {
            values.fill(first, count, dtype, dst);
          });
  };
  for (int64_t layer = 0; layer < base.num_layers; ++layer)
    for (const std::string& t : spec.targets) {
      const LoraModuleShape s = lora_module_shape(base, t);
      if (std::string_view(s.block) == "mlp" && base.is_moe_layer(layer)) continue;
      add(peft_tensor_name(base, layer, t, 'A'), {spec.r, s.in});
      add(peft_tensor_name(base, layer, t, 'B'), {s.out, spec.r});
    }
  if (params == 0)
    raise(Err::Usage,
          "make-lora: every layer of the base model is MoE; target attention "
          "projections (q_proj, k_proj, v_proj, o_proj)");

  std::filesystem::create_directories(dir);
  w.set_metadata({{"format", "pt"}});
  w.write((std::filesystem::path(dir) / "adapter_model.safetensors").string());
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"base_model_name_or_path", base.architecture},
                                 {"r", spec.r},
                                 {"lora_alpha", spec.alpha},
                                 {"use_rslora", spec.rslora},
                                 {"lora_dropout", 0.0},
                                 {"bias", "none"},
                                 {"target_modules", spec.targets},
                                 {"modules_to_save", nullptr},
                                 {"fan_in_fan_out", false},
                                 {"inference_mode", true}};
  const std::string path = (std::filesystem::path(dir) / "adapter_config.json").string();
  std::ofstream out(path);
  out << config.dump(2) << "\n";
  if (!out) raise(Err::OutputFile, "cannot write " + path);
  return params;
}

}  // namespace qmpi

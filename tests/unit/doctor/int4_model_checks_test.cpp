// `qmpi doctor --model` on an int4 checkpoint: the qweight / qzeros / scales / g_idx that
// quantization_config implies are checked in place of each projection's .weight.
#include <gtest/gtest.h>

#include <fstream>

#include "../temp_dir.h"
#include "../text/text_test_util.h"
#include "doctor/model_checks.h"
#include "model/synthetic_int4_checkpoint.h"
#include "model_check_test_util.h"

namespace qmpi::doctor {
namespace {

using fixtures::dump;
using fixtures::small_config;

size_t count(const ModelCheck& r, Status status, std::optional<Err> code = std::nullopt) {
  size_t n = 0;
  for (const Finding& f : r.findings) n += f.status == status && (!code || f.code == code);
  return n;
}

TEST(Int4ModelChecks, GptqCheckpointPassesAndAnotherGroupSizeIsQuantTensorInvalid) {
  testing::TempDir dir;
  write_synthetic_int4_checkpoint(dir.str(), small_config(), 3,
                                  {QuantMethod::Gptq, 32, true, false}, 2, "");
  std::ofstream(dir.file("tokenizer.json")) << test::tiny_tokenizer({{"h", "e"}}).dump();
  ModelCheck r = check_model(dir.str());
  EXPECT_EQ(count(r, Status::Fail), 0u) << dump(r);
  EXPECT_EQ(count(r, Status::Warn, Err::TensorUnexpected), 0u) << dump(r);
  // embed, final norm; per layer 3 biases, 2 norms and 7 projections x 4 int4 tensors.
  EXPECT_NE(dump(r).find("all 68 tensors config.json implies are present"), std::string::npos)
      << dump(r);

  nlohmann::json c;
  std::ifstream(dir.file("config.json")) >> c;
  c["quantization_config"]["group_size"] = 16;  // the files hold one group per 32 inputs
  std::ofstream(dir.file("config.json")) << c.dump();
  r = check_model(dir.str());
  EXPECT_GT(count(r, Status::Fail, Err::QuantTensorInvalid), 0u) << dump(r);
  EXPECT_NE(dump(r).find("model.layers.0.self_attn.q_proj.qzeros"), std::string::npos) << dump(r);
}

}  // namespace
}  // namespace qmpi::doctor

// The error catalogue: every failure a user can cause or meet has one entry here with a stable
// code, a one-line summary, why it happens and what to do. `qmpi help errors` prints it and
// docs/troubleshooting.md is checked against it (tests/unit/core/errors_doc_test.cpp).
#pragma once
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace qmpi {

enum class Err : uint16_t {
  // usage and layout (QM1xx)
  Usage = 100,
  WorldSize = 101,
  TpExceedsHeads = 102,
  // 103 and 104 (KV heads / intermediate_size not divisible by --tp) are retired: any --tp up
  // to num_attention_heads runs (model/shard_plan.h).
  PipelineLayers = 105,
  TpSpansHosts = 106,
  TpSlowLink = 107,
  // memory (QM15x)
  WeightsDoNotFit = 150,
  KvCacheDoesNotFit = 151,
  GpuMemoryInUse = 152,
  // model files (QM2xx)
  ModelDirMissing = 200,
  ConfigInvalid = 201,
  ConfigKeyMissing = 202,
  ArchUnsupported = 203,
  DTypeUnsupported = 204,
  SafetensorsHeader = 205,
  SafetensorsOffsets = 206,
  ShardMissing = 207,
  ShardTruncated = 208,
  TensorMissing = 209,
  TensorShapeMismatch = 210,
  ChecksumMismatch = 211,
  H5Format = 212,
  IndexInvalid = 213,
  TensorUnexpected = 214,
  // int4 checkpoints (QM22x)
  QuantUnsupported = 220,
  QuantTensorInvalid = 221,
  // GGUF files (QM245-QM254)
  GgufHeader = 245,
  GgufTruncated = 246,
  GgufMetadata = 247,
  GgufTensorType = 248,
  GgufTensorData = 249,
  GgufSplit = 250,
  // LoRA adapters (QM26x)
  LoraAdapterUnreadable = 260,
  LoraShapeMismatch = 261,
  LoraRankTooLarge = 262,
  LoraModuleUnknown = 263,
  LoraConfigUnsupported = 264,
  LoraTooMany = 265,
  LoraOptionInvalid = 266,
  // speculative decoding (QM27x)
  DraftVocabMismatch = 270,
  // tokenizer (QM3xx)
  TokenizerMissing = 300,
  TokenizerInvalid = 301,
  ChatTemplateInvalid = 302,
  ChatTemplateFailed = 303,
  // runtime and communication (QM4xx)
  MpiInit = 400,
  NcclInit = 401,
  CommTimeout = 402,
  RankDied = 403,
  CudaError = 404,
  NoGpu = 405,
  DriverTooOld = 406,
  VisibleDevices = 407,
  BackendUnavailable = 408,
  Interrupted = 409,
  HostLimits = 410,
  CommWrongResult = 411,
  StepMessage = 412,
  ListenFailed = 413,
  ReplicaLost = 414,
  // request input (QM5xx)
  RequestJson = 500,
  RequestField = 501,
  PromptTooLong = 502,
  SamplingInvalid = 503,
  Busy = 504,
  UnknownRequestId = 505,
  BodyTooLarge = 506,
  Unauthorized = 507,
  ClientTooSlow = 508,
  NoReply = 509,
  FieldUnsupported = 520,
  ModelNotFound = 521,
  TransferCodingUnsupported = 522,
  RouteNotFound = 523,
  // files the job reads or writes (QM6xx)
  InputFile = 600,
  OutputFile = 601,
  Internal = 999,
};

struct ErrorEntry {
  Err code;
  std::string_view name;     // stable kebab-case name, e.g. "tp-exceeds-heads"
  std::string_view summary;  // what the user sees happen, in their words
  std::string_view why;
  std::string_view fix;
  int exit_code;
  // How the failure looks to someone who met it elsewhere first (vLLM, torch, NCCL, Open MPI
  // messages), so docs/troubleshooting.md can be searched by the text people actually saw.
  std::string_view symptom;
};

std::span<const ErrorEntry> error_catalogue();
const ErrorEntry& error_entry(Err code);
// "QM102"
std::string error_id(Err code);

// A failure with its catalogue code. `message` is the specific sentence (what happened, with
// the numbers); `fix` is the specific command or action when one is known, else the catalogue's.
class Error : public std::runtime_error {
 public:
  Error(Err code, std::string message, std::string fix = {});
  Err code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& fix() const { return fix_; }
  int exit_code() const { return error_entry(code_).exit_code; }
  // The request field the error is about ("temperature", "tools[0].function.name"), which
  // OpenAI error objects carry as "param"; empty when it is about no one field.
  const std::string& param() const { return param_; }
  Error& with_param(std::string param) {
    param_ = std::move(param);
    return *this;
  }
  // "error QM102 (tp-exceeds-heads): <message>\n  why: ...\n  fix: ..."
  std::string render() const;

 private:
  Err code_;
  std::string message_;
  std::string fix_;
  std::string param_;
};

[[noreturn]] void raise(Err code, std::string message, std::string fix = {});

}  // namespace qmpi

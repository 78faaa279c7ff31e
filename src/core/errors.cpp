#include "core/errors.h"

#include <array>
#include <cstdio>

namespace qmpi {
namespace {

constexpr int kExitUser = 2;      // bad layout, options or input: fix the command
constexpr int kExitModel = 3;     // model files: fix the files
constexpr int kExitRuntime = 4;   // the machine, the network or a peer failed
constexpr int kExitDegraded = 5;  // finished, but on fewer data-parallel replicas than it began
constexpr int kExitInternal = 70;

constexpr std::array kCatalogue{
    ErrorEntry{Err::Usage, "usage", "The command line has an unknown or invalid option.",
               "An option is misspelled, missing its value, or out of range.",
               "Run `qmpi <command> --help` for the options of that command.", kExitUser,
               "The command stops at once with `unrecognised option` or `the required argument "
               "... is missing` for a vLLM flag qmpi has no counterpart for (vLLM's "
               "`--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`, "
               "`--max-num-batched-tokens`, `--host`, `--port`, `--served-model-name` and "
               "`--reasoning-parser` work as spelled)."},
    ErrorEntry{Err::WorldSize, "world-size", "The number of MPI ranks does not equal --tp x --pp.",
               "qmpi runs exactly one rank per device and needs tp x pp of them.",
               "Launch with `mpirun -np <tp*pp>` or change --tp/--pp so that their product equals "
               "the rank count.",
               kExitUser,
               "`mpirun -np 4 ... --tp 2 --pp 3` aborts at start, or (elsewhere) a Ray placement "
               "group waits forever for GPUs that are not there."},
    ErrorEntry{Err::TpExceedsHeads, "tp-exceeds-heads",
               "The tensor-parallel size is larger than num_attention_heads.",
               "Each TP rank computes at least one query head (heads are spread as evenly as "
               "possible, and a KV head shared by two ranks is held by both), so --tp can be any "
               "number up to num_attention_heads, but not more.",
               "Use a --tp of at most num_attention_heads and cover the remaining ranks with --pp "
               "(see `qmpi plan`).",
               kExitUser,
               "`Total number of attention heads (14) must be divisible by tensor parallel size "
               "(16)`, or a shape error while loading q_proj/o_proj."},
    ErrorEntry{Err::PipelineLayers, "pipeline-layers",
               "The pipeline stages do not cover the model's layers.",
               "Every stage needs at least one layer, and --pp-layers must list one count per "
               "stage that add up to num_hidden_layers.",
               "Use fewer stages or fix --pp-layers (e.g. `--pp-layers 27,27,26` for 80 layers on "
               "3 stages).",
               kExitUser,
               "A pipeline stage with no layers, a crash at the first step of the last stage, or "
               "layer counts per stage that do not add up."},
    ErrorEntry{Err::TpSpansHosts, "tp-spans-hosts",
               "A tensor-parallel group spans more than one host.",
               "TP all-reduces twice per layer; across the network that is slow or hangs.",
               "Make --tp at most the ranks per host and put pipeline stages across hosts "
               "(ranks are ordered pp-major: rank = stage*tp + tp_rank).",
               kExitUser,
               "Tokens per second collapse, or the first all-reduce hangs until an NCCL watchdog "
               "timeout, when a TP group spans two nodes."},
    ErrorEntry{Err::TpSlowLink, "tp-slow-link",
               "Tensor-parallel peers on one host are joined by a slow link.",
               "TP all-reduces twice per layer; GPUs that reach each other only across the CPU "
               "interconnect (SYS) or without peer access go through host memory, several times "
               "slower than NVLink or a shared PCIe switch.",
               "Put each TP group on GPUs that share NVLink or a PCIe switch (order "
               "CUDA_VISIBLE_DEVICES as `qmpi doctor` or `nvidia-smi topo -m` shows), or use a "
               "smaller --tp and more --pp.",
               kExitRuntime,
               "Decode throughput far below expectations on a two-socket server; `nvidia-smi topo "
               "-m` shows SYS between GPUs of one TP group, or NCCL_DEBUG=INFO shows rings `via "
               "SHM` instead of P2P."},
    ErrorEntry{Err::WeightsDoNotFit, "weights-do-not-fit",
               "The model's weights do not fit in the memory of one rank.",
               "Weights + KV cache + workspace + runtime overhead exceed the budget of the most "
               "loaded rank.",
               "Run `qmpi plan` for a layout that fits, use more GPUs, or an int4 (AWQ/GPTQ) "
               "checkpoint.",
               kExitUser,
               "`CUDA out of memory. Tried to allocate ...` minutes into loading the weights, or "
               "on CPU a rank killed by the kernel's OOM killer (exit signal 9)."},
    ErrorEntry{Err::KvCacheDoesNotFit, "kv-cache-does-not-fit",
               "After loading the weights there is not enough memory left for the KV cache.",
               "--max-model-len x --max-num-seqs tokens of KV cache are reserved up front.",
               "Lower --max-model-len or --max-num-seqs, store the cache as --kv-dtype fp8 (half "
               "of bf16's bytes), or raise --gpu-memory-utilization.",
               kExitUser,
               "The weights load, then start-up fails because there is no memory left for the KV "
               "cache blocks, or max model len is larger than the tokens the cache can hold."},
    ErrorEntry{
        Err::GpuMemoryInUse, "gpu-memory-in-use",
        "Another process already uses memory on this GPU.",
        "A stale job or another user holds device memory, so the budget is smaller.",
        "Stop the other process (`nvidia-smi`), or pick free GPUs with CUDA_VISIBLE_DEVICES.",
        kExitRuntime,
        "CUDA out of memory on a GPU that should be large enough; `nvidia-smi` shows "
        "another process holding memory on it."},
    ErrorEntry{Err::ModelDirMissing, "model-missing", "The model path does not exist.",
               "--model must name a Hugging Face model folder (config.json + safetensors) or a "
               "qmpi .h5 file.",
               "Check the path; `qmpi make-model --out DIR` creates a small test model.",
               kExitModel,
               "`No such file or directory` for the model path, or a loader that tries to "
               "download a Hub repo id because the local path was misspelled."},
    ErrorEntry{Err::ConfigInvalid, "config-invalid", "config.json is missing or is not valid JSON.",
               "The model folder is incomplete or the file was damaged in transfer.",
               "Download config.json again from the model's repository.", kExitModel,
               "A JSON decode error on config.json, or an HTML page (a failed download) saved as "
               "config.json."},
    ErrorEntry{Err::ConfigKeyMissing, "config-key-missing",
               "config.json lacks a key the model needs.",
               "The file was edited or comes from an unsupported exporter.",
               "Restore the key from the original config.json of the model.", kExitModel,
               "A KeyError or `object has no attribute 'num_key_value_heads'` while reading the "
               "model config."},
    ErrorEntry{
        Err::ArchUnsupported, "arch-unsupported", "The model's architecture is not supported yet.",
        "qmpi runs Qwen2ForCausalLM (Qwen2, Qwen2.5), Qwen3ForCausalLM, Qwen2MoeForCausalLM and "
        "Qwen3MoeForCausalLM; anything else (Llama, Qwen2-VL, Qwen2.5-Omni...), sliding-window "
        "attention, rope_scaling types other than yarn, linear and dynamic, and Qwen3's "
        "attention_bias are not supported yet.",
        "Use a checkpoint of one of those architectures; other architectures are on the roadmap.",
        kExitModel,
        "`Model architectures ['Qwen2VLForConditionalGeneration'] are not supported`, or an "
        "unknown model_type in config.json."},
    ErrorEntry{Err::DTypeUnsupported, "dtype-unsupported",
               "A tensor has a data type qmpi cannot compute with.",
               "Weights must be F32, F16 or BF16; int4 AWQ/GPTQ projections are read only when "
               "config.json has a quantization_config that says so.",
               "Convert the checkpoint to bf16 or f32.", kExitModel,
               "`qweight`/`scales` tensors the loader does not expect (an AWQ/GPTQ or FP8 "
               "checkpoint loaded as bf16), or a dtype error at load time."},
    ErrorEntry{Err::SafetensorsHeader, "safetensors-header", "A safetensors file has a bad header.",
               "The 8-byte header length or the JSON header is invalid: the file is truncated, "
               "damaged or not a safetensors file.",
               "Download the named shard again and compare its size with the repository's.",
               kExitModel,
               "`Error while deserializing header: HeaderTooLarge` (often a Git LFS pointer or "
               "an HTML error page saved under the shard's name)."},
    ErrorEntry{Err::SafetensorsOffsets, "safetensors-offsets",
               "A safetensors tensor's byte range is invalid.",
               "Offsets point outside the file, overlap another tensor, or do not match the "
               "shape and dtype.",
               "Download the named shard again; if it persists, the exporter wrote a broken file.",
               kExitModel,
               "`Error while deserializing header: InvalidOffset`, or tensors whose data runs "
               "past the end of the buffer."},
    ErrorEntry{Err::ShardMissing, "shard-missing",
               "A shard named in model.safetensors.index.json is not in the folder.",
               "The download stopped before all shards arrived.",
               "Download the missing shard (names are in the index's weight_map).", kExitModel,
               "`FileNotFoundError: model-00003-of-00037.safetensors` part-way through loading."},
    ErrorEntry{Err::ShardTruncated, "shard-truncated",
               "A safetensors shard is shorter than its header says.",
               "The file was cut off during download or copy.",
               "Download the named shard again; `qmpi doctor --model DIR` checks every shard.",
               kExitModel,
               "`MetadataIncompleteBuffer`, or a bus error (SIGBUS) while a memory-mapped shard "
               "is read, after an interrupted download."},
    ErrorEntry{Err::TensorMissing, "tensor-missing",
               "A tensor the model needs is not in the checkpoint.",
               "The checkpoint does not match config.json, or the index is incomplete.",
               "Check that config.json and the safetensors come from the same model.", kExitModel,
               "`KeyError: 'model.layers.0.self_attn.q_proj.weight'` or missing-keys warnings "
               "followed by nonsense output."},
    ErrorEntry{Err::TensorShapeMismatch, "tensor-shape-mismatch",
               "A tensor's shape does not match config.json.",
               "config.json and the weights come from different models or revisions.",
               "Use the config.json that shipped with these weights.", kExitModel,
               "`size mismatch for model.layers.0.mlp.gate_proj.weight: copying a param with "
               "shape [29696, 8192]` from a padded AWQ config mixed with bf16 weights."},
    ErrorEntry{Err::ChecksumMismatch, "checksum-mismatch",
               "A tensor's data does not match its checksum.",
               "The file was damaged after it was written.", "Convert or download the model again.",
               kExitModel, "A model that loads without error but answers with gibberish."},
    ErrorEntry{Err::H5Format, "h5-format", "The .h5 model file is not a valid qmpi checkpoint.",
               "It lacks the qmpi format attributes, has another format version, or is truncated.",
               "Recreate it with `qmpi convert --model HF_DIR --out FILE.h5`.", kExitModel,
               "HDF5 `unable to open file` or `file signature not found` for a .h5 model."},
    ErrorEntry{Err::IndexInvalid, "index-invalid", "model.safetensors.index.json cannot be used.",
               "It is not valid JSON, has no weight_map, or maps a tensor to a path outside the "
               "model folder.",
               "Download model.safetensors.index.json again from the model's repository.",
               kExitModel,
               "A JSON decode error on model.safetensors.index.json, or a KeyError for "
               "`weight_map`."},
    ErrorEntry{Err::TensorUnexpected, "tensor-unexpected",
               "The checkpoint holds tensors that config.json does not account for.",
               "qmpi loads only the tensors the config implies and ignores the rest: extra layers "
               "mean config.json and the weights come from different models, extra qweight/scales "
               "tensors a quantized checkpoint.",
               "Use the config.json that shipped with these weights; harmless extras (a saved "
               "lm_head.weight of a tied model) can be left.",
               kExitModel,
               "`Some weights of the model checkpoint at ... were not used when initializing "
               "Qwen2ForCausalLM`, followed by output that makes no sense."},
    ErrorEntry{Err::QuantUnsupported, "quant-unsupported",
               "config.json's quantization_config names a format qmpi does not run.",
               "qmpi runs int4 AWQ (quant_method awq, version gemm, zero_point true) and GPTQ "
               "(quant_method gptq, checkpoint_format gptq, sym or asym, with or without desc_act) "
               "checkpoints with group sizes that are multiples of 8 (or -1) and every decoder "
               "projection quantized, and block-wise FP8 (quant_method fp8, fmt e4m3, "
               "activation_scheme dynamic, weight_block_size given). Other bit widths, AWQ "
               "gemv/marlin/exllama packings, gptq_v2 or marlin GPTQ, quantized lm_heads, decoder "
               "projections in modules_to_not_convert, FP8 e5m2, static activation scales and "
               "per-tensor FP8 scales are refused before any weight is read.",
               "Use the model's AWQ, GPTQ-Int4 or -FP8 release (Qwen publishes them), or its bf16 "
               "release.",
               kExitModel,
               "`ValueError: Unknown quantization type`, `bits 8 not supported`, or a marlin / "
               "exllama kernel error when loading a quantized checkpoint elsewhere."},
    ErrorEntry{Err::QuantTensorInvalid, "quant-tensor-invalid",
               "A quantized tensor (int4 qweight, qzeros, scales, g_idx; FP8 weight, "
               "weight_scale_inv) disagrees with config.json or holds a NaN or infinite scale.",
               "Each quantized projection's packed weights, zero points, scales and group index "
               "have shapes fixed by its in/out widths and the group size, g_idx may name "
               "only existing groups, and every scale must be finite (the load scans the scales "
               "each rank holds); an FP8 weight is F8_E4M3 [out, in] without NaN codes and "
               "its scale_inv float32 [ceil(out / block), ceil(in / block)] of positive finite "
               "scales. A mismatch means damaged files, a config from another model, or another "
               "packing than quantization_config says.",
               "Download the named shard and config.json again from the same repository; check "
               "quantization_config's group_size and version against the model card.",
               kExitModel,
               "`size mismatch for model.layers.0.mlp.down_proj.qweight`, or a CUDA illegal "
               "memory access in a dequantization kernel."},
    ErrorEntry{Err::GgufHeader, "gguf-header", "A .gguf file is not a GGUF file qmpi reads.",
               "The file does not start with the magic bytes GGUF, or its version is not 2 or 3 "
               "(version 1 files predate August 2023; a huge version number is a big-endian "
               "file).",
               "Download the file again, or convert the model with a current llama.cpp "
               "(convert_hf_to_gguf.py writes version 3).",
               kExitModel,
               "`gguf_init_from_file: invalid magic characters` or `unsupported GGUF version` "
               "from llama.cpp; an HTML page or Git LFS pointer saved under the .gguf name."},
    ErrorEntry{Err::GgufTruncated, "gguf-truncated", "A .gguf file ends too early.",
               "The header, the metadata, the tensor list or a tensor's data runs past the end "
               "of the file: the download or copy was cut off.",
               "Download the named file again and compare its size with the repository's; "
               "`qmpi doctor --model FILE.gguf` checks it without loading.",
               kExitModel,
               "`gguf_init_from_file: failed to read tensor data` or a bus error (SIGBUS) while "
               "a memory-mapped model loads, after an interrupted download."},
    ErrorEntry{Err::GgufMetadata, "gguf-metadata",
               "A .gguf file's metadata is damaged or incomplete.",
               "A key/value has an unknown value type, a count larger than the file could hold, "
               "or a key the model needs (ARCH.block_count, ARCH.embedding_length, "
               "ARCH.attention.head_count, ...) is missing or has the wrong type.",
               "Use a file written by llama.cpp's convert_hf_to_gguf.py (or qmpi's "
               "tests/reference/gguf_ref.py); download it again if it was.",
               kExitModel,
               "`key not found in model: qwen2.context_length` or `gguf_init_from_file: "
               "encountered bad_alloc` from llama.cpp."},
    ErrorEntry{
        Err::GgufTensorType, "gguf-tensor-type", "A .gguf tensor has a type qmpi does not load.",
        "qmpi loads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K "
        "and Q6_K tensors; the IQ types (IQ2_XXS, IQ3_S, IQ4_XS, ...), the ternary and FP4 "
        "types, and numbers the format does not define are refused before any weight is "
        "read.",
        "Use a Q4_K_M, Q5_K_M, Q6_K or Q8_0 file of the model (the common downloads), "
        "or requantize with llama-quantize to one of the listed types.",
        kExitModel, "`unknown type` or an IQ-quant kernel missing for your GPU in another engine."},
    ErrorEntry{Err::GgufTensorData, "gguf-tensor-data",
               "A .gguf tensor's shape, type and bytes disagree.",
               "A tensor's rows are not whole blocks of its type, its offset is not aligned, its "
               "bytes (type x shape) overlap the next tensor's or lie outside the data section, "
               "or its shape is not the one the metadata implies.",
               "Download the file again; if it persists, the converter that wrote it is broken "
               "or wrote another model than its metadata says.",
               kExitModel,
               "`tensor 'blk.0.attn_q.weight' has wrong shape` or `data is not within the file "
               "bounds` from llama.cpp."},
    ErrorEntry{Err::GgufSplit, "gguf-split",
               "The parts of a split .gguf model do not fit together.",
               "A model split into NAME-00001-of-0000N.gguf files needs every part beside the "
               "first, each with the same split.count and its own split.no, and their tensors "
               "adding up to split.tensors.count without a name twice.",
               "Download the missing part (the message names it) into the same folder, and pass "
               "the first part to --model.",
               kExitModel,
               "`invalid split file` or `split_path: ... not found` from llama.cpp's gguf-split "
               "loader."},
    ErrorEntry{Err::LoraAdapterUnreadable, "lora-adapter-unreadable",
               "A LoRA adapter folder given to --lora-modules cannot be read.",
               "An adapter is a PEFT folder: adapter_config.json (r, lora_alpha, target_modules) "
               "and adapter_model.safetensors. The folder or a file is missing, the JSON does not "
               "parse or lacks r / lora_alpha, or the safetensors file is truncated or damaged.",
               "Check the path after NAME= in --lora-modules; download the adapter again (both "
               "files, from the same revision).",
               kExitModel,
               "`ValueError: No adapter_model.safetensors or adapter_model.bin found`, or "
               "`safetensors_rust.SafetensorError: Error while deserializing header`."},
    ErrorEntry{
        Err::LoraShapeMismatch, "lora-shape-mismatch",
        "A LoRA adapter's lora_A / lora_B tensor does not fit the base model.",
        "lora_A of a projection must be [r, in_features] and lora_B [out_features, r] of "
        "that projection in the base model's config.json, both halves present, in F32, "
        "F16 or BF16. A mismatch means the adapter was trained on another base model "
        "(another size or family) or its r disagrees with adapter_config.json.",
        "Serve the adapter on the base model it was trained on (adapter_config.json's "
        "base_model_name_or_path).",
        kExitModel,
        "`size mismatch for base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`."},
    ErrorEntry{Err::LoraRankTooLarge, "lora-rank-too-large",
               "A LoRA adapter's rank r is above --max-lora-rank.",
               "--max-lora-rank (default 16, as vLLM's) bounds the rank of every adapter loaded, "
               "so the memory the adapters take is known from the options.",
               "Raise --max-lora-rank to at least the adapter's r (vLLM accepts 8, 16, 32, 64, "
               "128, 256, 320, 512; qmpi any value).",
               kExitUser, "vLLM's `ValueError: LoRA rank 64 is greater than max_lora_rank 16`."},
    ErrorEntry{Err::LoraModuleUnknown, "lora-module-unknown",
               "A LoRA adapter targets a module qmpi cannot adapt.",
               "qmpi applies LoRA to the decoder's q_proj, k_proj, v_proj, o_proj, gate_proj, "
               "up_proj and down_proj of dense layers. target_modules naming anything else "
               "(embed_tokens, lm_head, MoE experts, a regex), a tensor of another module, a "
               "layer the base model does not have, or modules_to_save is refused rather "
               "than silently ignored.",
               "Use an adapter trained on the attention and MLP projections only.", kExitModel,
               "vLLM's `ValueError: While loading ..., expected target modules in [...] but "
               "received [...]`."},
    ErrorEntry{Err::LoraConfigUnsupported, "lora-config-unsupported",
               "A LoRA adapter uses a PEFT feature qmpi does not implement.",
               "qmpi computes scale * B(A x) with scale lora_alpha / r (lora_alpha / sqrt(r) with "
               "use_rslora). bias other than \"none\", use_dora, rank_pattern or alpha_pattern "
               "would change the output in ways that are not computed, so such adapters are "
               "refused.",
               "Retrain or export the adapter with bias=\"none\" and without DoRA or per-module "
               "patterns, or merge it into the base weights.",
               kExitModel,
               "vLLM's `ValueError: Adapter bias cannot be used without bias_enabled`."},
    ErrorEntry{Err::LoraTooMany, "lora-too-many", "More LoRA adapters were given than --max-loras.",
               "--max-loras (default 1, as vLLM's) bounds the adapters loaded at start-up; "
               "every loaded adapter can run in any step.",
               "Raise --max-loras to the number of --lora-modules entries.", kExitUser,
               "vLLM's `ValueError: No free lora slots` or adapters evicted from the GPU cache."},
    ErrorEntry{Err::LoraOptionInvalid, "lora-option-invalid",
               "A LoRA option names no adapter or is malformed.",
               "--lora-modules takes NAME=DIR (or vLLM's JSON {\"name\": ..., \"path\": ...}) "
               "with distinct names other than the base model's served name; --lora NAME must "
               "be one of them.",
               "Write --lora-modules sql=/adapters/sql chat=/adapters/chat and select with "
               "--lora sql (run, logits) or \"model\": \"sql\" (serve, batch).",
               kExitUser, "vLLM's `argument --lora-modules: invalid parse_lora_modules value`."},
    ErrorEntry{Err::DraftVocabMismatch, "draft-vocab-mismatch",
               "The draft model of --speculative-config has another tokenizer than the model.",
               "A draft model's guesses are token ids that the model checks as its own, so both "
               "must give every id the same token and the same special tokens. (Their "
               "config.json vocab_size may differ: Qwen2.5's small and large checkpoints pad "
               "the same tokenizer to 151936 and 152064 rows.)",
               "Use a draft of the same family and tokenizer (Qwen2.5-0.5B-Instruct for "
               "Qwen2.5-72B-Instruct), or prompt lookup: '{\"method\": \"ngram\", "
               "\"num_speculative_tokens\": 4}'.",
               kExitModel,
               "vLLM's draft/target vocabulary size assertion, or a draft whose guesses are "
               "never accepted."},
    ErrorEntry{Err::TokenizerMissing, "tokenizer-missing", "The model has no tokenizer.json.",
               "qmpi reads the Hugging Face tokenizer.json next to config.json.",
               "Copy tokenizer.json and tokenizer_config.json from the model's repository into "
               "the model folder.",
               kExitModel,
               "`Can't load tokenizer` for the model path, or token ids printed without text."},
    ErrorEntry{Err::TokenizerInvalid, "tokenizer-invalid", "tokenizer.json cannot be used.",
               "It is not byte-level BPE, or its vocab/merges are malformed.",
               "Use the tokenizer.json from the model's repository.", kExitModel,
               "`data did not match any variant of untagged enum ModelWrapper` or another parse "
               "error from tokenizer.json."},
    ErrorEntry{Err::ChatTemplateInvalid, "chat-template-invalid",
               "The chat template cannot be read.",
               "qmpi renders the model's chat_template (tokenizer_config.json, or the file given "
               "with --chat-template) with its own Jinja engine, which knows the statements and "
               "filters Hugging Face chat templates use; this template has a syntax error, "
               "uses something outside that set, nests deeper than the sandbox allows, is not "
               "UTF-8, or cannot render a sample conversation at start-up (the message names "
               "the line).",
               "Fix the template at the line named, or pass a corrected one with "
               "--chat-template FILE.",
               kExitModel,
               "`jinja2.exceptions.TemplateSyntaxError` from transformers' apply_chat_template."},
    ErrorEntry{Err::ChatTemplateFailed, "chat-template-failed",
               "The chat template could not render this conversation.",
               "The template refused the messages (its raise_exception, e.g. roles that do not "
               "alternate), met a value it cannot use, such as a message whose content is "
               "null where the template adds it to a string, overflowed a 64-bit integer, or "
               "passed one of its sandbox's limits (steps, loop iterations, output size).",
               "Change the request as the message says (roles, content, tool calls), or use a "
               "template that accepts it (--chat-template FILE); --chat-template-limits raises "
               "a limit the message names.",
               kExitUser,
               "`jinja2.exceptions.TemplateError` or `UndefinedError` from apply_chat_template, "
               "or vLLM's 400 \"Conversation roles must alternate user/assistant\"."},
    ErrorEntry{
        Err::MpiInit, "mpi-init", "MPI failed to start.",
        "The MPI runtime could not initialise (launcher mismatch or a broken install).",
        "Launch with the mpirun of the Open MPI that qmpi was built with, or srun --mpi=pmix "
        "under Slurm; run `qmpi doctor`.",
        kExitRuntime,
        "`ORTE was unable to reliably start one or more daemons`, PMIx errors, or "
        "`MPI_Init_thread` failing before any qmpi output."},
    ErrorEntry{Err::NcclInit, "nccl-init", "NCCL failed to create a communicator.",
               "GPUs cannot reach each other over the chosen transport, or versions differ "
               "between hosts.",
               "Rerun with NCCL_DEBUG=INFO; on mixed networks set NCCL_SOCKET_IFNAME or "
               "NCCL_IB_DISABLE=1; `qmpi doctor` tests the links.",
               kExitRuntime,
               "`NCCL error: unhandled system error` or `ncclInternalError` at start-up, or a "
               "job that hangs while creating communicators."},
    ErrorEntry{Err::CommTimeout, "comm-timeout",
               "A collective or receive did not complete within --comm-timeout.",
               "A peer rank is stuck, dead or unreachable, so the others would wait forever.",
               "Look at the named peer's log; rerun `qmpi doctor` under the same mpirun line; "
               "raise --comm-timeout only if the peer is merely slow.",
               kExitRuntime,
               "`Watchdog caught collective operation timeout: ... ALLREDUCE ... ran for 600000 "
               "milliseconds`, or one rank stuck at 100% GPU while the others wait."},
    ErrorEntry{Err::RankDied, "rank-died", "A rank of the job exited or was killed.",
               "A process died (out of memory, a signal, a crash) and the job cannot go on "
               "without it.",
               "Read the named rank's log and the kernel log (dmesg) on its host.", kExitRuntime,
               "`mpirun noticed that process rank 3 ... exited on signal 9 (Killed)`, then the "
               "other ranks hang or abort."},
    ErrorEntry{Err::CudaError, "cuda-error", "A CUDA, cuBLAS or NCCL call failed.",
               "The device reported an error (out of memory, a bad launch, a lost device), or "
               "cuBLAS, which the CUDA backend opens on first use, is not installed.",
               "Check `nvidia-smi`, free the device, and rerun with CUDA_LAUNCH_BLOCKING=1 for the "
               "failing call; for cuBLAS, install the CUDA toolkit's libcublas or put its lib "
               "folder on LD_LIBRARY_PATH.",
               kExitRuntime,
               "`CUDA error: an illegal memory access was encountered`, "
               "`CUBLAS_STATUS_EXECUTION_FAILED`, a device lost (Xid) in the kernel log, or `the "
               "CUDA backend could not open cuBLAS: libcublas.so.13: cannot open shared object "
               "file`."},
    ErrorEntry{Err::NoGpu, "no-gpu", "The CUDA backend found no usable GPU.",
               "No NVIDIA driver is loaded, or CUDA_VISIBLE_DEVICES hides every device.",
               "Use --backend cpu, or check the driver with `nvidia-smi`.", kExitRuntime,
               "`No CUDA GPUs are available`, or `nvidia-smi` that lists no devices inside the "
               "job."},
    ErrorEntry{Err::DriverTooOld, "driver-too-old",
               "The NVIDIA driver is older than the CUDA runtime qmpi was built with.",
               "The runtime needs a driver at least as new as its own CUDA version.",
               "Upgrade the driver, or build qmpi with the CUDA toolkit that matches it.",
               kExitRuntime,
               "`CUDA driver version is insufficient for CUDA runtime version` (a driver/runtime "
               "mismatch)."},
    ErrorEntry{Err::VisibleDevices, "visible-devices", "CUDA_VISIBLE_DEVICES is inconsistent.",
               "It lists a device twice or one that does not exist, or fewer devices than ranks "
               "on the host.",
               "List each GPU of the host once, and launch at most that many ranks per host.",
               kExitRuntime,
               "Two ranks on the same GPU (twice the memory, then out of memory), or `invalid "
               "device ordinal`."},
    ErrorEntry{Err::BackendUnavailable, "backend-unavailable",
               "The requested backend was not built into this qmpi.",
               "qmpi builds the CUDA backend only where nvcc was found at build time.",
               "Rebuild on a machine with the CUDA toolkit, or use --backend cpu.", kExitUser,
               "`--backend cuda` on a build made without the CUDA toolkit."},
    ErrorEntry{Err::Interrupted, "interrupted", "The job was stopped by a signal.",
               "SIGINT or SIGTERM reached a rank (Ctrl-C, scancel, a time limit).",
               "Nothing to fix; batch jobs resume with --resume.", kExitRuntime,
               "The job ends on Ctrl-C, `Terminated`, or Slurm's `CANCELLED ... DUE TO TIME "
               "LIMIT`."},
    ErrorEntry{
        Err::HostLimits, "host-limits", "A host limit is below what a multi-rank job needs.",
        "MPI and NCCL keep shared-memory segments in /dev/shm and open descriptors for "
        "every peer, shard and socket; a small /dev/shm (64 MB in a default container) or "
        "a low open-file limit makes them fail part-way through a run.",
        "Give containers a larger /dev/shm (`docker run --shm-size=16g` or `--ipc=host`) and "
        "raise the open-file limit (`ulimit -n 65536`, or `nofile` in "
        "/etc/security/limits.conf).",
        kExitRuntime,
        "`NCCL WARN Error while creating shared memory segment /dev/shm/nccl-...`, a `Bus "
        "error` inside a container, or `Too many open files`."},
    ErrorEntry{
        Err::CommWrongResult, "comm-wrong-result", "A collective or transfer delivered wrong data.",
        "A broken peer-to-peer path (PCIe ACS or an IOMMU in the way, virtualised GPUs) or "
        "a faulty link corrupts data without reporting an error.",
        "Rerun `qmpi doctor` with NCCL_P2P_DISABLE=1; if that passes, disable PCIe ACS / the "
        "IOMMU for the GPUs or keep P2P off; otherwise check the named ranks' links.",
        kExitRuntime,
        "Nonsense output only with --tp > 1, or nccl-tests reporting a non-zero `#wrong` "
        "column."},
    ErrorEntry{Err::StepMessage, "step-message-unreadable",
               "A rank received a step plan or result it cannot read.",
               "The ranks run different qmpi builds (the step wire format changed between them), "
               "or the message was damaged on its way.",
               "Install the same qmpi build on every host (compare `qmpi --version`) and rerun; "
               "if the builds match, run `qmpi doctor` to test the links between the ranks.",
               kExitRuntime,
               "A multi-host job fails at its first step after only some hosts were upgraded."},
    ErrorEntry{Err::ListenFailed, "listen-failed", "A server port could not be opened.",
               "Another process already listens on that port, or the host is not an address of "
               "this machine; the message gives the operating system's reason.",
               "Stop the other server (`ss -ltnp` names it) or choose another port (port 0 "
               "picks a free one); listen on 0.0.0.0 or an address of this host.",
               kExitRuntime,
               "`Address already in use` / `EADDRINUSE` at start-up, or `Cannot assign requested "
               "address` for a host of another machine."},
    ErrorEntry{Err::ReplicaLost, "replica-lost",
               "The job finished, but on fewer data-parallel replicas than it started with.",
               "A rank of a replica other than rank 0's died or stopped answering under a "
               "launcher told to recover (--enable-recovery, DP > 1): the other replicas went on. "
               "`qmpi serve` failed that replica's requests in flight (QM402); `qmpi batch` ran "
               "them again on a replica that was up, so its output is complete.",
               "Read the lost replica's rank logs and the launcher's line naming the dead rank; "
               "rerun with the full replica count when the node is healthy. The exit status is "
               "5 so that a script or Slurm sees the loss even though the job finished.",
               kExitDegraded,
               "Exit code 5 (State FAILED in sacct) and `replica 1 lost` in rank 0's log, while "
               "every request of a batch has its result line."},
    ErrorEntry{Err::RequestJson, "request-json", "A request is not valid JSON.",
               "The line or body could not be parsed.",
               "Send one JSON object per request (one per line in JSONL files).", kExitUser,
               "HTTP 400 or an error line in results.jsonl saying the request could not be "
               "parsed."},
    ErrorEntry{Err::RequestField, "request-field",
               "A request has an unknown field or a field of the wrong type.",
               "qmpi checks requests strictly so typos do not pass silently.",
               "See docs/protocol.md for the fields and their types.", kExitUser,
               "HTTP 400 naming a field, e.g. `max_tokens` sent as a string or a misspelled "
               "`temprature`, or a number too large for a double (`1e400`) that other "
               "servers answer with `number overflow` or a 500."},
    ErrorEntry{
        Err::PromptTooLong, "prompt-too-long", "The prompt is longer than --max-model-len allows.",
        "Prompt tokens plus max_tokens must fit in the model length the cache was sized for.",
        "Shorten the prompt, lower max_tokens, or raise --max-model-len.", kExitUser,
        "A request refused because its prompt plus max_tokens exceeds the model's maximum "
        "context length."},
    ErrorEntry{Err::SamplingInvalid, "sampling-invalid", "A sampling parameter is out of range.",
               "e.g. temperature < 0, top_p outside (0, 1], top_k < -1 or max_tokens < 1.",
               "Use values in the documented ranges (docs/protocol.md).", kExitUser,
               "HTTP 400 for a negative temperature, top_p of 0, or max_tokens of 0."},
    ErrorEntry{Err::Busy, "busy", "The server's queue is full.",
               "More requests are waiting beyond the free sequence slots (--max-num-seqs less "
               "the running batch) than --max-queue allows.",
               "Retry later with back-off, or raise --max-queue.", kExitUser,
               "HTTP 503 (or a `busy` reply over ZMQ) while the server's queue is full."},
    ErrorEntry{Err::UnknownRequestId, "unknown-request-id", "No request with that id is running.",
               "It finished already, was never sent, or belongs to another client.",
               "Check the id; cancel only requests that are still streaming.", kExitUser,
               "A cancel request answered with 404 / unknown id."},
    ErrorEntry{Err::BodyTooLarge, "body-too-large",
               "The request is larger than the server accepts.",
               "Bodies and frames are limited so one client cannot exhaust memory.",
               "Send a smaller request.", kExitUser, "HTTP 413 for a very large request."},
    ErrorEntry{Err::Unauthorized, "unauthorized", "The request has no valid API key.",
               "The server was started with --api-key (or --api-key-file, QMPI_API_KEY).",
               "Send `Authorization: Bearer <key>` over HTTP, \"api_key\" in a ZeroMQ message "
               "(qmpi client: --api-key-file or QMPI_API_KEY).",
               kExitUser,
               "HTTP 401, or a ZeroMQ error reply, for a request without the server's API key."},
    ErrorEntry{Err::ClientTooSlow, "client-too-slow",
               "The server dropped a client that did not read its replies.",
               "Replies waiting for one client are limited (ZeroMQ's high-water mark plus "
               "--client-buffer-bytes) so that a stalled reader cannot hold memory or slow "
               "others; its requests are cancelled, and each one it had not been answered gets "
               "this error with its id.",
               "Read replies as they come (a receive loop or a poller), or run fewer streaming "
               "requests per connection.",
               kExitUser,
               "A `client-too-slow` error after a stream stopped, or a stream that ends early "
               "while the client was busy elsewhere."},
    ErrorEntry{Err::NoReply, "no-reply", "`qmpi client` got no reply from the server in time.",
               "The server is not running at that address, is still loading, or is stuck.",
               "Check the --connect address and the server's log; raise --timeout for long "
               "generations or a slow start.",
               kExitRuntime,
               "A ZeroMQ client that waits forever: ZeroMQ connects lazily and never reports an "
               "address where nothing listens."},
    ErrorEntry{Err::FieldUnsupported, "field-unsupported",
               "A request asks for something qmpi does not do (logit_bias, echo, beam search, a "
               "JSON schema keyword structured output cannot hold to...).",
               "Fields qmpi does not know are ignored, as vLLM ignores them, except those whose "
               "value would change the answer: ignoring those would return something other than "
               "what was asked for. Their neutral values (null, false, {\"type\": \"text\"}) "
               "are accepted.",
               "Leave the field out, or send its neutral value; the message names the field and "
               "what to do instead (docs/protocol.md lists them).",
               kExitUser,
               "A 400 with code `unsupported_parameter` for `logit_bias`, `echo`, or a schema "
               "keyword such as `uniqueItems`, that vLLM or OpenAI would honour."},
    ErrorEntry{Err::ModelNotFound, "model-not-found",
               "A request names a model this server does not serve (HTTP 404, OpenAI's "
               "`model_not_found`).",
               "A server answers for one model, under the names --served-model-name gives (by "
               "default the model folder's name); a request for another one would otherwise get "
               "an answer from a model it did not ask for.",
               "Send one of the names GET /v1/models lists, or leave \"model\" out; start the "
               "server with --served-model-name NAME to answer to another name.",
               kExitUser,
               "`The model `gpt-4o` does not exist` (404, code `model_not_found`) from an OpenAI "
               "client pointed at qmpi."},
    ErrorEntry{Err::TransferCodingUnsupported, "transfer-coding-unsupported",
               "An HTTP request's body is sent with a transfer coding other than chunked "
               "(gzip, deflate, compress...): HTTP 501, and the connection is closed.",
               "qmpi reads request bodies framed by Content-Length or by chunked alone. A "
               "coding it cannot decode would be read as raw bytes, and a proxy in front that "
               "frames the request differently could smuggle a second request inside it (RFC "
               "9112 sections 6.1 and 6.3).",
               "Send the body uncompressed, with a Content-Length or `Transfer-Encoding: "
               "chunked` alone.",
               kExitUser,
               "`501 Not Implemented` for `Transfer-Encoding: gzip, chunked` where another server "
               "read the body raw."},
    ErrorEntry{Err::RouteNotFound, "route-not-found",
               "An HTTP request asks for a method and path qmpi serve has no endpoint for "
               "(HTTP 404, code `route_not_found`).",
               "qmpi serves OpenAI's /v1/chat/completions, /v1/completions and /v1/models, and "
               "vLLM's /tokenize, /detokenize, /version, /health and /metrics; other paths, and "
               "a GET where a POST is needed, have no answer.",
               "Check the client's base URL (it ends in /v1 for OpenAI clients) and the method; "
               "docs/protocol.md lists the endpoints.",
               kExitUser,
               "`404 page not found` or `Invalid URL` from a client whose base URL lacks /v1 or "
               "has it twice."},
    ErrorEntry{Err::InputFile, "input-file", "An input file cannot be read.",
               "It does not exist, is not readable, or (qmpi batch --input) is not a JSONL file "
               "of request objects.",
               "Check the path and its permissions.", kExitUser,
               "`No such file or directory` or `Permission denied` for --prompts or another "
               "input path."},
    ErrorEntry{Err::OutputFile, "output-file", "An output file cannot be written.",
               "Its folder does not exist or is read-only, or the disk is full; or (qmpi batch) "
               "it is the --input file, --output and --output-h5 are one file, or --output "
               "already holds results and neither --resume nor --overwrite was given.",
               "Check the path, its permissions and free space (`df -h`).", kExitUser,
               "`Permission denied` or `No space left on device` while writing results."},
    ErrorEntry{Err::Internal, "internal", "qmpi hit an internal error.", "This is a bug in qmpi.",
               "Report it with the command line and the log.", kExitInternal,
               "An error marked internal with no specific fix, or a crash with a stack trace."},
};

}  // namespace

std::span<const ErrorEntry> error_catalogue() {
  return kCatalogue;
}

const ErrorEntry& error_entry(Err code) {
  for (const auto& e : kCatalogue)
    if (e.code == code) return e;
  return kCatalogue.back();
}

std::string error_id(Err code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "QM%03u", unsigned(code));
  return buf;
}

Error::Error(Err code, std::string message, std::string fix)
    : std::runtime_error(error_id(code) + ": " + message),
      code_(code),
      message_(std::move(message)),
      fix_(fix.empty() ? std::string(error_entry(code).fix) : std::move(fix)) {}

std::string Error::render() const {
  const auto& e = error_entry(code_);
  return "error " + error_id(code_) + " (" + std::string(e.name) + "): " + message_ +
         "\n  why: " + std::string(e.why) + "\n  fix: " + fix_;
}

void raise(Err code, std::string message, std::string fix) {
  throw Error(code, std::move(message), std::move(fix));
}

}  // namespace qmpi

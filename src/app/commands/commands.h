// Subcommands of the `qmpi` executable. Each parses its own options (Boost.Program_options,
// shared ones from common_options.h) and returns the process exit code; main.cpp dispatches
// on the first argument and turns a qmpi::Error into its rendered message and exit code.
#pragma once
#include <string>
#include <vector>

namespace qmpi {

using Args = std::vector<std::string>;  // arguments after the subcommand name

int cmd_run(const Args& args);          // generate text for one prompt
int cmd_batch(const Args& args);        // JSONL requests -> JSONL results, continuous batching
int cmd_serve(const Args& args);        // online server: ZeroMQ broker and OpenAI HTTP API
int cmd_client(const Args& args);       // one request to a running server, streamed to stdout
int cmd_logits(const Args& args);       // write [n_tokens, vocab] float32 logits to .npy
int cmd_tokenize(const Args& args);     // JSONL {"text"} -> {"ids"}
int cmd_make_model(const Args& args);   // random-weight model in the Hugging Face layout
int cmd_make_lora(const Args& args);    // random LoRA adapter in PEFT's layout
int cmd_convert(const Args& args);      // Hugging Face folder -> one qmpi .h5 checkpoint
int cmd_bench(const Args& args);        // prefill/decode throughput and memory bandwidth
int cmd_plan(const Args& args);         // pre-flight layout and memory planner
int cmd_help_errors(const Args& args);  // the error catalogue
int cmd_help_error(const std::string& code_or_name);  // one catalogue entry
int cmd_doctor(const Args& args);  // pre-flight checks of machine, MPI, GPUs, model, comm

}  // namespace qmpi

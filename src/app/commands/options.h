// Option parsing shared by the subcommands: Boost.Program_options with catalogue errors, and
// the options every engine command takes (model, layout, backend, cache, timeouts).
#pragma once
#include <functional>
#include <string>

#include <boost/program_options.hpp>

#include "app/commands/commands.h"
#include "core/decimal_text.h"
#include "core/errors.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/scheduler.h"

namespace qmpi {

namespace po = boost::program_options;

// An option's value with `def` as its default, shown in --help as decimal_text writes it
// (Boost would print 0.9 as 0.90000000000000002).
po::typed_value<double>* decimal_value(double* target, double def);

// Parses `args` (vLLM's flags accepted: app/commands/vllm_flags.h); prints help and returns
// false for --help. Bad options raise Err::Usage, every unknown one named at once.
bool parse_options(const Args& args, const po::options_description& desc, po::variables_map& vm,
                   const std::string& usage_line);

// The defaults of `command`'s configuration: one sequence, a whole prompt per step, no prefix
// caching (run, logits), or the scheduler's defaults (batch, serve, bench).
EngineConfig engine_config_for(Command command);
// The options every engine command takes, bound to `c`, whose values on entry are the defaults
// --help shows. Adding one: a member in the sub-config of engine/engine_config.h, a line here.
po::options_description engine_options(EngineConfig& c);
// The scheduler options `batch` and `serve` add.
po::options_description scheduler_options(EngineConfig& c);
// --hf-overrides and --rope-scaling (vLLM's), for every command that reads config.json.
void add_config_override_options(po::options_description& d, ConfigOverrides& o);
// --reasoning-parser (batch and serve): vLLM's switch for returning Qwen3's <think> text as
// reasoning_content. reasoning_parser_on() raises Usage for a parser other than qwen3.
void add_reasoning_parser_option(po::options_description& d, std::string& value);
bool reasoning_parser_on(const std::string& value);
// Once the command line is parsed: checks the values (Usage errors name the option), chooses
// the backend and the TP comm (backend_choice.cpp) and sets the pre-flight hooks.
void finish_engine_config(EngineConfig& c);
// EngineConfig::preflight and ::memory_report for launches (src/app/commands/preflight_hook.cpp).
void launch_preflight(const ModelConfig& cfg, const Mesh& mesh, const EngineConfig& c);
std::string launch_memory_report(const ModelConfig& cfg, const Mesh& mesh, const EngineConfig& c,
                                 const MeasuredMemory& measured);

// Starts MPI and the engine on every rank, runs `driver` on rank 0 while the others serve
// steps, and shuts down. Errors: deterministic ones (layout, config) are printed once by rank
// 0 and every rank exits with the code; a rank-local failure is printed by that rank with its
// rank and host, and the whole job is aborted (no rank is left waiting).
int run_engine(const EngineConfig& config, const std::function<int(Engine&)>& driver);

// "1,2,3" -> ids
std::vector<int32_t> parse_id_list(const std::string& s, const char* option);

}  // namespace qmpi

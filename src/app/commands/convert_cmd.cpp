// qmpi convert: a Hugging Face safetensors folder -> one self-contained qmpi .h5 checkpoint
// (docs/hdf5-format.md). Runs alone or under mpirun, where ranks write tensors round-robin.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <mpi.h>

#include "app/commands/options.h"
#include "core/errors.h"
#include "io/checkpoint_dir.h"
#include "io/h5_checkpoint.h"
#include "io/h5_convert.h"
#include "model/config.h"
#include "parallel/mpi_runtime.h"

namespace qmpi {
namespace fs = std::filesystem;

namespace {

const char* const kMetaFiles[] = {"config.json", "generation_config.json", "tokenizer.json",
                                  "tokenizer_config.json"};

std::optional<DType> parse_out_dtype(const std::string& s) {
  if (s == "keep") return std::nullopt;
  if (s == "bf16") return DType::BF16;
  if (s == "f32") return DType::F32;
  raise(Err::Usage, "--dtype " + s + " is not one of keep, bf16, f32");
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(Err::InputFile, "cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Everything every rank must agree on before the file is created; errors here happen alike on
// every rank, so rank 0 alone reports them.
struct Input {
  ModelConfig config;
  std::unique_ptr<SafetensorsDir> source;
  H5ConvertOptions options;
};

Input prepare(const std::string& model, const std::string& out, const std::string& dtype) {
  if (model.empty() || out.empty())
    raise(Err::Usage, "convert needs --model HF_DIR and --out FILE.h5",
          "Run `qmpi convert --help`.");
  if (!fs::is_directory(model))
    raise(Err::ModelDirMissing, "--model " + model + " is not a folder",
          "Pass the Hugging Face model folder (config.json + *.safetensors).");
  Input in;
  in.options.dtype = parse_out_dtype(dtype);
  in.config = ModelConfig::load(model);
  in.source = std::make_unique<SafetensorsDir>(model);
  in.options.head_dim = in.config.head_dim;
  for (const char* f : kMetaFiles)
    if (fs::is_regular_file(fs::path(model) / f))
      in.options.meta.emplace_back(f, read_text(fs::path(model) / f));
  in.options.comm = MPI_COMM_WORLD;
  return in;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace

int cmd_convert(const Args& args) {
  std::string model, out, dtype;
  po::options_description desc("qmpi convert options");
  // clang-format off
  desc.add_options()
      ("model", po::value(&model), "Hugging Face model folder (config.json + safetensors)")
      ("out", po::value(&out), "output .h5 file (replaced when it exists)")
      ("dtype", po::value(&dtype)->default_value("keep"),
       "keep | bf16 | f32: store floating-point tensors in this type");
  // clang-format on
  po::variables_map vm;
  if (!parse_options(args, desc, vm,
                     "qmpi convert --model HF_DIR --out FILE.h5 [--dtype keep|bf16|f32]\n"
                     "       mpirun -np N qmpi convert ...   (ranks write tensors round-robin)"))
    return 0;

  MpiRuntime mpi;
  Input in;
  try {
    in = prepare(model, out, dtype);
  } catch (const Error& e) {
    if (mpi.rank() == 0) std::fprintf(stderr, "qmpi: %s\n", e.render().c_str());
    return e.exit_code();
  }

  const auto start = std::chrono::steady_clock::now();
  H5ConvertSummary s;
  try {
    s = convert_to_h5(*in.source, out, in.options);
  } catch (const Error& e) {
    if (mpi.size() == 1) throw;
    mpi.abort_job(e);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double peak = peak_rss_mib(), max_peak = 0;
  MPI_Reduce(&peak, &max_peak, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (mpi.rank() == 0)
    std::printf(
        "convert: %zu tensors, %.2f GB of weights, %zu metadata files -> %s in %.1f s "
        "(%d rank%s, peak memory %.0f MiB per rank)\n",
        s.tensors, double(s.data_bytes) / 1e9, in.options.meta.size(), out.c_str(), secs,
        mpi.size(), mpi.size() == 1 ? "" : "s", max_peak);
  return 0;
}

}  // namespace qmpi

// Replays files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so the
// committed seeds and every input a fuzzer once crashed on (tests/fuzz/crashers/TARGET) run in
// the ordinary test build. Usage: TARGET_replay DIR...; a crash or an escaping exception fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int count = 0;
  for (int a = 1; a < argc; ++a) {
    std::error_code ec;
    if (!fs::is_directory(argv[a], ec)) {
      std::fprintf(stderr, "replay: %s is not a directory\n", argv[a]);
      return 2;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(argv[a]))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::printf("replay: %s\n", f.c_str());
      std::fflush(stdout);
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++count;
    }
  }
  std::printf("replay: %d inputs, none crashed\n", count);
  return count > 0 ? 0 : 1;
}

#include "configs/load.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "configs/files.h"

#include "chip.pb.h"
#include "experiment.pb.h"

namespace tpsim::config {
namespace {

TEST(Load, TextFormatRecordsFieldLocations) {
  Chip chip;
  SourceMap locs("c.textproto");
  ParseMessage(
      "name: \"x\"\nnoc {\n  rows: 4\n    cols: 8\n}\nmemory { name: \"a\" }\nmemory { name: \"b\" }\n",
      "c.textproto", &chip, &locs);
  EXPECT_EQ(chip.noc().cols(), 8u);
  Location rows = locs.Find("noc.rows");
  EXPECT_EQ(rows.line, 3);
  EXPECT_EQ(rows.col, 3);
  Location cols = locs.Find("noc.cols");
  EXPECT_EQ(cols.line, 4);
  EXPECT_EQ(cols.col, 5);
  EXPECT_EQ(locs.Find("memory[1].name").line, 7);
  // An unwritten field falls back to its parent message, then to the file.
  EXPECT_EQ(locs.Find("noc.link_bandwidth_gbps").line, 2);
  EXPECT_EQ(locs.Find("clock_mhz").line, 1);
}

// A block that no file wrote and a --set made (`--set gpu.sms=1` on a chip without a gpu block):
// errors about its other fields are at that --set (they were at the file's 1:1); a block the
// file wrote keeps its own location, and Find is unchanged.
TEST(Load, ABlockThatASetMadeIsAtThatSet) {
  Chip chip;
  SourceMap locs("c.textproto");
  ParseMessage("name: \"x\"\nnoc {\n  rows: 4\n}\n", "c.textproto", &chip, &locs);
  locs.SetAppending("gpu.sms", Location{"<command line: --set gpu.sms=1>", 1, 1});
  locs.SetAppending("noc.cols", Location{"<command line: --set noc.cols=2>", 1, 1});
  EXPECT_EQ(locs.FindInSetBlock("gpu.bf16_tflops").file, "<command line: --set gpu.sms=1>");
  EXPECT_EQ(locs.FindInSetBlock("gpu").file, "<command line: --set gpu.sms=1>");
  EXPECT_EQ(locs.FindInSetBlock("noc.link_bandwidth_gbps").file, "c.textproto");
  EXPECT_EQ(locs.FindInSetBlock("noc.link_bandwidth_gbps").line, 2);
  EXPECT_EQ(locs.FindInSetBlock("clock_mhz").file, "c.textproto");
  EXPECT_EQ(locs.Find("gpu.bf16_tflops").file, "c.textproto");
}

TEST(Load, UnknownFieldIsAnErrorWithLineAndColumn) {
  Chip chip;
  try {
    ParseMessage("name: \"x\"\nnoc {\n  rowz: 4\n}\n", "c.textproto", &chip, nullptr);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.diags().size(), 1u);
    EXPECT_EQ(e.diags()[0].where.line, 3);
    EXPECT_EQ(e.diags()[0].where.col, 3);
    EXPECT_EQ(e.diags()[0].field, "rowz");
    EXPECT_NE(e.diags()[0].str().find("c.textproto:3:3: rowz: : unknown field"), std::string::npos)
        << e.diags()[0].str();
  }
}

// Found by config_fuzz (tests/fuzz/crashers/config_fuzz/tab-column-past-line-end): protobuf
// counts a tab as up to 8 columns, so an error column may lie past the end of its line; the
// error must still be a located ConfigError, not std::out_of_range.
TEST(Load, ErrorColumnPastTheEndOfATabbedLine) {
  Chip chip;
  try {
    ParseMessage(std::string("\0\0\0r\t\1\0\0\x08", 9), "c.textproto", &chip, nullptr);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_FALSE(e.diags().empty());
    EXPECT_EQ(e.diags()[0].where.line, 1);
    EXPECT_EQ(e.diags()[0].str().rfind("c.textproto:1:", 0), 0u) << e.diags()[0].str();
  }
}

TEST(Load, TypeErrorNamesTheValue) {
  Chip chip;
  try {
    ParseMessage("clock_mhz: fast\n", "c.textproto", &chip, nullptr);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diags()[0].where.line, 1);
    EXPECT_EQ(e.diags()[0].value, "fast");
    EXPECT_NE(e.diags()[0].rule.find("expected"), std::string::npos);
    EXPECT_EQ(e.diags()[0].field, "clock_mhz");
  }
  // Within a block on one line: the field before the value, not "<parse>" (only a name that
  // started the line was found).
  Experiment exp;
  for (const auto& [text, field, value] :
       {std::tuple{"mapping { partition: \"k_split\" tp: \"4\" }\n", "tp", "\"4\""},
        std::tuple{"workload { dtype: \"a:b\" batch: x }\n", "batch", "x"},
        std::tuple{"mapping {\n  tp: 4 pipeline_stages: \"2\"\n}\n", "pipeline_stages", "\"2\""}}) {
    try {
      ParseMessage(text, "e.textproto", &exp, nullptr);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.diags()[0].field, field) << text;
      EXPECT_EQ(e.diags()[0].value, value) << text;
    }
  }
}

// A bad boolean is at its own field: protobuf says it past the next token (the next field's line,
// or "<parse>" at the block's "}").
TEST(Load, ABadBooleanIsAtItsField) {
  for (const std::string& text : {std::string("noc {\n  bidirectional: yes\n  rows: 2\n}\n"),
                                  std::string("noc {\n  bidirectional: yes\n}\n"),
                                  std::string("noc { rows: 2 bidirectional: yes }\n")}) {
    Chip chip;
    try {
      ParseMessage(text, "c.textproto", &chip, nullptr);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ConfigError& e) {
      const Diag& d = e.diags()[0];
      EXPECT_EQ(d.field, "bidirectional") << text;
      EXPECT_EQ(d.value, "yes") << text;
      EXPECT_EQ(d.rule, "must be true or false") << text;
      EXPECT_EQ(d.where.line, text.starts_with("noc {\n") ? 2 : 1) << text;
      EXPECT_EQ(d.where.col, text.starts_with("noc {\n") ? 3 : 15) << text;
    }
  }
}

// Old Mac line ends (a lone \r) end lines, as \r\n does: a # comment swallowed the rest of the
// file silently. A byte order mark is blank, in text and JSON configs alike.
TEST(Load, LoneCarriageReturnsAndAByteOrderMarkAreReadAsTheirLines) {
  Chip chip;
  SourceMap locs("c.textproto");
  ParseMessage("# a chip\rname: \"x\"\r# the clock\rclock_mhz: 1000\r", "c.textproto", &chip, &locs);
  EXPECT_EQ(chip.name(), "x");
  EXPECT_EQ(chip.clock_mhz(), 1000u);
  EXPECT_EQ(locs.Find("clock_mhz").line, 4);
  try {
    ParseMessage("# a chip\rclock_mhz: fast\r", "c.textproto", &chip, nullptr);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diags()[0].where.line, 2);
    EXPECT_EQ(e.diags()[0].value, "fast");
  }
  Chip bom;
  ParseMessage("\xEF\xBB\xBFname: \"b\"\n", "c.textproto", &bom, nullptr);
  EXPECT_EQ(bom.name(), "b");
  Chip json;
  ParseMessage("\xEF\xBB\xBF{\"name\": \"j\"}\n", "c.json", &json, nullptr);
  EXPECT_EQ(json.name(), "j");
}

TEST(Load, JsonIsAcceptedAndLocated) {
  Chip chip;
  SourceMap locs("c.json");
  ParseMessage("{\n  \"name\": \"x\",\n  \"noc\": {\"rows\": 4,\n \"cols\": 2}\n}\n", "c.json", &chip, &locs);
  EXPECT_EQ(chip.noc().rows(), 4u);
  EXPECT_EQ(locs.Find("noc.cols").line, 4);
  EXPECT_EQ(locs.Find("noc.cols").col, 2);
  EXPECT_THROW(ParseMessage("{\"nope\": 1}", "c.json", &chip, nullptr), ConfigError);
  EXPECT_THROW(ParseMessage("{\"name\": ", "c.json", &chip, nullptr), ConfigError);
}

// A JSON list of scalars records its first 1,024 elements' locations; later ones are found at
// the list (a 4-million-element mlp_only_layers took 1.27 GB of locations).
TEST(Load, JsonLongScalarListsRecordTheirFirstElements) {
  std::string list = "0";
  for (int i = 1; i < 2000; ++i) list += ",0";
  config::Model m;
  SourceMap locs("m.json");
  ParseMessage("{\"name\": \"m\",\n\"mlp_only_layers\": [" + list + "]}", "m.json", &m, &locs);
  EXPECT_EQ(m.mlp_only_layers_size(), 2000);
  EXPECT_EQ(locs.Find("mlp_only_layers").col, 1);
  EXPECT_EQ(locs.Find("mlp_only_layers[0]").col, 21);
  EXPECT_EQ(locs.Find("mlp_only_layers[1023]").col, 21 + 2 * 1023);
  EXPECT_EQ(locs.Find("mlp_only_layers[1024]").col, 1);  // the list's own
  EXPECT_EQ(locs.Find("mlp_only_layers[1999]").line, 2);
}

TEST(Load, SetScalarFieldWalksPathsAndChecksTypes) {
  Experiment e;
  Location cli{"<command line>", 1, 1};
  SetScalarField(&e, "mapping.tp", "16", cli);
  SetScalarField(&e, "chip.noc.link_bandwidth_gbps", "256", cli);
  SetScalarField(&e, "chip.memory[0].name", "dram", cli);
  SetScalarField(&e, "chip.memory[0].attach[0]", "r0c0", cli);
  SetScalarField(&e, "chip.noc.bidirectional", "true", cli);
  EXPECT_EQ(e.mapping().tp(), 16u);
  EXPECT_DOUBLE_EQ(e.chip().noc().link_bandwidth_gbps(), 256.0);
  EXPECT_EQ(e.chip().memory(0).attach(0), "r0c0");
  EXPECT_TRUE(e.chip().noc().bidirectional());
  EXPECT_EQ(FieldValueText(e, "mapping.tp"), "16");

  auto rule_of = [&](const std::string& path, const std::string& value) {
    try {
      SetScalarField(&e, path, value, cli);
    } catch (const ConfigError& err) {
      return err.diags()[0].rule;
    }
    return std::string("no error");
  };
  EXPECT_NE(rule_of("mapping.tp", "-1").find("non-negative"), std::string::npos);
  EXPECT_NE(rule_of("mapping.tp", "4x").find("integer"), std::string::npos);
  EXPECT_NE(rule_of("mapping.nope", "1").find("unknown field"), std::string::npos);
  EXPECT_NE(rule_of("chip.noc", "1").find("is a message"), std::string::npos);
  EXPECT_NE(rule_of("chip.memory.name", "x").find("needs an index"), std::string::npos);
  EXPECT_NE(rule_of("chip.memory[5].name", "x").find("out of range"), std::string::npos);
  EXPECT_NE(rule_of("chip.clock_mhz", "nan").find("finite"), std::string::npos);
  // 1e-400 underflows to 0: refused here, where what was typed is quoted (a later rule quoted 0).
  EXPECT_EQ(rule_of("chip.noc.link_bandwidth_gbps", "1e-400"), "too small for a double: it reads as 0");
  EXPECT_EQ(rule_of("chip.noc.link_bandwidth_gbps", "0"), "no error");
  EXPECT_EQ(rule_of("chip.noc.link_bandwidth_gbps", "0.0e-5"), "no error");
  // Decimal only, as integers are read (" 64" and 0x40 were 64).
  for (const char* v : {" 64", "0x40", "64 ", "0x1p6", "infinity"})
    EXPECT_EQ(rule_of("chip.noc.link_bandwidth_gbps", v), "expected a finite decimal number") << v;
  EXPECT_EQ(rule_of("chip.noc.link_bandwidth_gbps", "6.4e1"), "no error");
  EXPECT_NE(rule_of("chip.noc.bidirectional", "yes").find("true or false"), std::string::npos);
  EXPECT_NE(rule_of("a..b", "1").find("not a field path"), std::string::npos);
  // One spelling per element: a sweep's axes over [0] and [00] were two axes of one field.
  EXPECT_NE(rule_of("chip.memory[00].latency_ns", "1").find("not a field path"), std::string::npos);
  EXPECT_NE(rule_of("chip.memory[+0].latency_ns", "1").find("not a field path"), std::string::npos);
  EXPECT_EQ(rule_of("chip.memory[0].latency_ns", "1"), "no error");
  // An error below a repeated field names the element, as a file's errors do (it said
  // chip.memory.efficiency, which names no memory where there are two).
  auto field_of = [&](const std::string& path, const std::string& value) {
    try {
      SetScalarField(&e, path, value, cli);
    } catch (const ConfigError& err) {
      return err.diags()[0].field;
    }
    return std::string("no error");
  };
  EXPECT_EQ(field_of("chip.memory[0].efficiency", "nan"), "chip.memory[0].efficiency");
  EXPECT_EQ(field_of("chip.memory[0].attach[0].x", "1"), "chip.memory[0].attach[0]");
  EXPECT_EQ(field_of("chip.memory[5].name", "x"), "chip.memory");
}

TEST(Load, DiagFormat) {
  Diag d{{"f.textproto", 3, 7}, "chip.noc.rows", "0", "must be positive"};
  EXPECT_EQ(d.str(), "f.textproto:3:7: chip.noc.rows: 0: must be positive");
}

TEST(Load, PathsResolveRelativeToTheReferringFile) {
  EXPECT_EQ(JoinPath("configs/experiments", "../chips/a.textproto"), "configs/chips/a.textproto");
  EXPECT_EQ(JoinPath("x", "/abs/a"), "/abs/a");
  EXPECT_EQ(DirName("a.textproto"), ".");
}

}  // namespace
}  // namespace tpsim::config

// ---- configs/files.h: guarded input, atomic output, message text ----------------

TEST(Files, ClipEscapesAndCuts) {
  EXPECT_EQ(tpsim::config::Clip("a\nb\t\xff", 120), "a\\nb\\t\\xff");
  EXPECT_EQ(tpsim::config::Clip(std::string(200, 'x'), 3), "xxx...(200 bytes)");
  EXPECT_EQ(tpsim::config::Clip("caf\xc3\xa9", 4), "caf\xc3\xa9");  // one character, kept whole
}

TEST(Files, ParseNumberReadsTheWholeTextAsAFiniteNumber) {
  using tpsim::config::ParseNumber;
  EXPECT_EQ(ParseNumber("0.95"), 0.95);
  EXPECT_EQ(ParseNumber("+0.95"), 0.95);
  EXPECT_EQ(ParseNumber("-2.5e-1"), -0.25);
  EXPECT_EQ(ParseNumber("30000"), 30000.0);
  // std::stod read a prefix of each of these (5, 0.95), or gave a NaN or an infinity.
  for (const char* bad : {"", "5abc", "0.95,0.25", " 1", "1 ", "+", "++1", "+-1", "nan", "inf", "-inf",
                          "1e999", "0x10", "1,5"}) {
    EXPECT_THROW(ParseNumber(bad), std::invalid_argument) << bad;
  }
}

TEST(Files, Utf8IsCheckedStrictly) {
  size_t bad = 0;
  EXPECT_TRUE(tpsim::config::IsUtf8("plain \xe2\x82\xac"));
  EXPECT_FALSE(tpsim::config::IsUtf8("ab\xc0\xaf", &bad));  // overlong '/'
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(tpsim::config::IsUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(tpsim::config::IsUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST(Files, NearestNameSuggestsOnlyCloseNames) {
  const std::vector<std::string> names = {"rows", "cols", "link_bandwidth_gbps", "topology"};
  EXPECT_EQ(tpsim::config::NearestName("rowz", names), "rows");
  EXPECT_EQ(tpsim::config::NearestName("link_bandwith_gbps", names), "link_bandwidth_gbps");
  EXPECT_EQ(tpsim::config::NearestName("zzzz", names), "");
  EXPECT_EQ(tpsim::config::NearestName(std::string(5000, 'r'), names), "");
  // Else the one name it begins: h100 for h100-sxm-8, none where two begin with it.
  const std::vector<std::string> chips = {"h100-sxm-8", "h200-sxm-8", "wafer-8x8", "wafer-32x32"};
  EXPECT_EQ(tpsim::config::NearestName("h100", chips), "h100-sxm-8");
  EXPECT_EQ(tpsim::config::NearestName("wafer", chips), "");
  EXPECT_EQ(tpsim::config::NearestName("h1", chips), "");  // too short to say
}

TEST(Files, OutputIsReplacedWholeOrNotAtAll) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpsim-files-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "o.txt").string();
  tpsim::config::WriteOutputFile(out, "first");
  {
    tpsim::config::OutputFile f(out);
    f.Write("half of a second");
    // destroyed without Commit: the old content stays, the temporary file goes
  }
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "first");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  EXPECT_THROW(tpsim::config::WriteOutputFile("/dev/full", "x"), std::runtime_error);
  EXPECT_THROW(tpsim::config::WriteOutputFile((dir / "no" / "o.txt").string(), "x"), std::runtime_error);
  EXPECT_THROW(tpsim::config::CheckOutputNotInput("--out", out, {(dir / "." / "o.txt").string()}),
               tpsim::config::ConfigError);
  EXPECT_NO_THROW(tpsim::config::CheckOutputNotInput("--out", (dir / "p.txt").string(), {out}));
  fs::remove_all(dir);
}

// A symbolic link is followed: its target is replaced and the link kept (the link was replaced by
// a plain file, its target left as it was); a loop is refused; /dev/fd/N is the process's own
// descriptor, written at its offset (as root, /dev/stdout was replaced by a plain file).
TEST(Files, OutputThroughLinksWritesWhereTheyLead) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpsim-links-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  tpsim::config::WriteOutputFile((dir / "sub" / "real.csv").string(), "old");
  fs::create_symlink("sub/real.csv", dir / "a.csv");  // relative to the link's folder
  fs::create_symlink(dir / "a.csv", dir / "b.csv");   // a chain
  tpsim::config::WriteOutputFile((dir / "b.csv").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir / "a.csv"));
  EXPECT_TRUE(fs::is_symlink(dir / "b.csv"));
  EXPECT_EQ(read(dir / "sub" / "real.csv"), "new");
  // A link to a file not there yet creates it.
  fs::create_symlink("sub/later.csv", dir / "later.csv");
  tpsim::config::WriteOutputFile((dir / "later.csv").string(), "made");
  EXPECT_TRUE(fs::is_symlink(dir / "later.csv"));
  EXPECT_EQ(read(dir / "sub" / "later.csv"), "made");
  fs::create_symlink("loop2", dir / "loop1");
  fs::create_symlink("loop1", dir / "loop2");
  try {
    tpsim::config::WriteOutputFile((dir / "loop1").string(), "x");
    ADD_FAILURE() << "a loop of links was written";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(": its symbolic links loop, or are more than 40 in a chain"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(dir / "loop1"));
  // A descriptor of this process: written through it, at its offset, the file not replaced.
  const fs::path held = dir / "held.txt";
  const int fd = ::open(held.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "head,", 5), 5);
  struct stat before {};
  ASSERT_EQ(::stat(held.c_str(), &before), 0);
  tpsim::config::WriteOutputFile("/dev/fd/" + std::to_string(fd), "table");
  ASSERT_EQ(::write(fd, ",tail", 5), 5);
  ::close(fd);
  struct stat after {};
  ASSERT_EQ(::stat(held.c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(read(held), "head,table,tail");
  fs::remove_all(dir);
}

TEST(Files, InputsMustBeRegularBoundedUtf8Files) {
  using tpsim::config::ConfigError;
  const tpsim::config::Location at{"exp.textproto", 3, 5};
  EXPECT_THROW(tpsim::config::ReadInputFile("/dev/zero", at, "chip_file"), ConfigError);
  EXPECT_THROW(tpsim::config::ReadInputFile("/", at, "chip_file"), ConfigError);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tpsim-in-" + std::to_string(::getpid()))).string();
  std::ofstream(path) << "ok\nno \xff here\n";
  try {
    tpsim::config::ReadInputFile(path, at, "chip_file");
    ADD_FAILURE() << "not UTF-8, yet read";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.diags()[0].where.line, 2);
    EXPECT_EQ(e.diags()[0].where.col, 4);
  }
  std::ofstream(path) << std::string(100, 'x');
  EXPECT_THROW(tpsim::config::ReadInputFile(path, at, "chip_file", 99), ConfigError);
  EXPECT_EQ(tpsim::config::ReadInputFile(path, at, "chip_file", 100).size(), 100u);
  std::filesystem::remove(path);
}

namespace tpsim::config {
namespace {

// The first error of parsing JSON `text` as a message like `msg`, or "" when it parses.
std::string JsonError(const std::string& text, google::protobuf::Message* msg) {
  try {
    ParseMessage(text, "c.json", msg, nullptr);
  } catch (const ConfigError& e) {
    return e.diags().front().str();
  }
  return "";
}

// List elements, numbers past a double, a key given twice and two members of a oneof were
// left to protobuf, whose error has no location (c.json:1:1: <parse>: invalid JSON config),
// or, for a repeated key, not refused at all.
TEST(Load, JsonValueErrorsAreAtTheValue) {
  Chip chip;
  EXPECT_EQ(JsonError("{\"memory\": [{\"attach\": [\"r0c0\",\n 5]}]}", &chip),
            "c.json:2:2: memory[0].attach[1]: 5: expected a string");
  EXPECT_EQ(JsonError("{\"memory\": [{\"attach\": [{}]}]}", &chip),
            "c.json:1:25: memory[0].attach[0]: {: expected a scalar, not an object");
  EXPECT_EQ(JsonError("{\"memory\": [{\"efficiency\": 1e999}]}", &chip),
            "c.json:1:28: memory[0].efficiency: 1e999: number out of range of double");
  EXPECT_EQ(JsonError("{\"memory\": [{\"efficiency\": -1e999}]}", &chip),
            "c.json:1:28: memory[0].efficiency: -1e999: number out of range of double");
  EXPECT_EQ(JsonError("{\"memory\": [{\"attach\": [\"a\", \"b\"], \"efficiency\": 1e300}]}", &chip), "");
  EXPECT_EQ(JsonError("{\"name\": \"a\",\n  \"name\": \"a\"}", &chip),
            "c.json:2:4: name: : specified more than once (first on line 1)");
  EXPECT_EQ(JsonError("{\"noc\": {\"rows\": 1, \"rows\": 2}}", &chip),
            "c.json:1:22: noc.rows: : specified more than once (first on line 1)");
  Experiment exp;
  EXPECT_EQ(JsonError("{\"model_name\": \"q\",\n \"model\": {}}", &exp),
            "c.json:2:3: model: model_name: only one of them may be given");
  EXPECT_EQ(JsonError("{\"model_name\": \"q\", \"model\": null}", &exp), "");
  // One object for a list of them was read as a list of one; a null element was dropped (a list
  // of [null] then had no element); a scalar for a list quoted the next 40 bytes of the file.
  EXPECT_EQ(JsonError("{\"memory\": {\"name\": \"d\"}}", &chip),
            "c.json:1:12: memory: {: repeated field: expected a list [ {...}, ... ], not one object");
  EXPECT_EQ(JsonError("{\"memory\": [{\"attach\": [null]}]}", &chip),
            "c.json:1:25: memory[0].attach[0]: null: a list's element cannot be null");
  EXPECT_EQ(JsonError("{\"memory\": [null]}", &chip),
            "c.json:1:13: memory[0]: null: a list's element cannot be null");
  EXPECT_EQ(JsonError("{\"memory\": [{\"attach\": \"r0c0\"}],\n \"name\": \"x\"}", &chip),
            "c.json:1:24: memory[0].attach: \"r0c0\": repeated field: expected a list [ ... ]");
}

}  // namespace
}  // namespace tpsim::config

// A child's output goes where RunChildProcess is told: this process's (-1), a descriptor, or
// /dev/null opened in the child (kChildDevNull); its exit status comes back.
TEST(Files, ChildProcessOutputGoesWhereAsked) {
  const std::vector<std::string> say = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(tpsim::config::RunChildProcess(say), 3);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "out\n");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "err\n");

  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(tpsim::config::RunChildProcess(say, tpsim::config::kChildDevNull, tpsim::config::kChildDevNull),
            3);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  // stdout to /dev/null, stderr kept.
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(tpsim::config::RunChildProcess(say, tpsim::config::kChildDevNull), 3);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "err\n");

  EXPECT_EQ(tpsim::config::RunChildProcess({"tpsim-no-such-program-here"}), 127);
}

namespace tpsim::config {
namespace {

// A quoted value in a number field: protobuf's JSON parser takes "1.5", "NaN", "Infinity" and
// "-Infinity" for a double and digits for an integer; any other string it refused without a
// location (c.json:1:1: <parse>: : invalid JSON config ((link_bandwidth_gbps): invalid value
// "abc" for type TYPE_DOUBLE)). Now it is refused at the value, with field and value.
TEST(Load, JsonQuotedNumbersAreCheckedAtTheValue) {
  Chip chip;
  // Line 2: a space, "link_bandwidth_gbps" (21 characters with its quotes) at 2..22, ':' at 23,
  // a space, the value's quote at 25.
  EXPECT_EQ(JsonError("{\"noc\": {\n \"link_bandwidth_gbps\": \"abc\"}}", &chip),
            "c.json:2:25: noc.link_bandwidth_gbps: abc: expected a number (a quoted one may be \"NaN\", "
            "\"Infinity\" or \"-Infinity\")");
  // {"noc": {"link_bandwidth_gbps": : the value's quote at 33.
  for (const char* bad : {"inf", " 1.5", "1.5x", ""}) {
    EXPECT_EQ(JsonError("{\"noc\": {\"link_bandwidth_gbps\": \"" + std::string(bad) + "\"}}", &chip),
              "c.json:1:33: noc.link_bandwidth_gbps: " + std::string(bad) +
                  ": expected a number (a quoted one may be \"NaN\", \"Infinity\" or \"-Infinity\")")
        << bad;
  }
  EXPECT_EQ(JsonError("{\"noc\": {\"link_bandwidth_gbps\": \"1e999\"}}", &chip),
            "c.json:1:33: noc.link_bandwidth_gbps: 1e999: number out of range of double");
  // What protobuf takes is still taken, with its value.
  EXPECT_EQ(JsonError("{\"noc\": {\"link_bandwidth_gbps\": \"1.5\"}}", &chip), "");
  EXPECT_EQ(chip.noc().link_bandwidth_gbps(), 1.5);
  for (const char* ok : {"NaN", "Infinity", "-Infinity", "-2.5e3"})
    EXPECT_EQ(JsonError("{\"noc\": {\"link_bandwidth_gbps\": \"" + std::string(ok) + "\"}}", &chip), "")
        << ok;
  // Integers: {"noc": {"rows": : the value's quote at 18. "1e3", "1.0" and " 12" passed the old
  // check (strtold reads them whole) and protobuf then refused them unlocated.
  for (const char* bad : {"abc", "1e3", "1.0", " 12", "+-1"}) {
    EXPECT_EQ(JsonError("{\"noc\": {\"rows\": \"" + std::string(bad) + "\"}}", &chip),
              "c.json:1:18: noc.rows: " + std::string(bad) + ": expected an integer")
        << bad;
  }
  EXPECT_EQ(JsonError("{\"noc\": {\"rows\": \"-3\"}}", &chip),
            "c.json:1:18: noc.rows: -3: integer out of range of uint32");
  EXPECT_EQ(JsonError("{\"noc\": {\"rows\": \"12\"}}", &chip), "");
  EXPECT_EQ(chip.noc().rows(), 12u);
}

}  // namespace
}  // namespace tpsim::config

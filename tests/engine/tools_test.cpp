// The flintkv command-line tool: runs the built binary (path in $FLINTKV) on pools in a
// temporary folder under /dev/shm, and checks its output, its exit status and the pool files.
// Also the tool's own units: the latency histogram and the argument parser.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "arguments.hpp"
#include "bench.hpp"
#include "flintkv/internal/open.hpp"
#include "histogram.hpp"

namespace {

namespace fs = std::filesystem;
using flintkv::tools::arguments;
using flintkv::tools::latency_histogram;
using flintkv::tools::usage_error;

struct outcome {
  int exit_code = -1;
  std::string out, err;
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) return {};
  std::string bytes(static_cast<std::size_t>(f.tellg()), '\0');
  f.seekg(0);
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string shell_quote(std::string_view s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A minimal JSON reader, enough to check the shape of `bench --json`: objects, arrays,
// strings (escapes kept as written), numbers, true/false/null. Throws on malformed input.
struct json;
using json_object = std::map<std::string, json>;
using json_array = std::vector<json>;
struct json {
  std::variant<std::nullptr_t, bool, double, std::string, json_array, json_object> v;
  bool is_null() const { return std::holds_alternative<std::nullptr_t>(v); }
  double number() const { return std::get<double>(v); }
  bool boolean() const { return std::get<bool>(v); }
  const std::string& string() const { return std::get<std::string>(v); }
  const json_array& array() const { return std::get<json_array>(v); }
  const json_object& object() const { return std::get<json_object>(v); }
};

class json_reader {
 public:
  explicit json_reader(std::string_view text) : s_(text) {}
  json document() {
    json j = value();
    skip();
    if (i_ != s_.size()) fail("text after the document");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void skip() {
    while (i_ < s_.size() && std::string_view(" \t\r\n").find(s_[i_]) != std::string_view::npos) {
      ++i_;
    }
  }
  bool take(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_value() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\') out += s_[i_++];
      if (i_ < s_.size()) out += s_[i_++];
    }
    expect('"');
    return out;
  }
  json value() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    char c = s_[i_];
    if (c == '{') {
      ++i_;
      json_object o;
      if (take('}')) return {o};
      do {
        std::string key = string_value();
        expect(':');
        o[key] = value();
      } while (take(','));
      expect('}');
      return {o};
    }
    if (c == '[') {
      ++i_;
      json_array a;
      if (take(']')) return {a};
      do a.push_back(value());
      while (take(','));
      expect(']');
      return {a};
    }
    if (c == '"') return {string_value()};
    for (auto [word, j] : {std::pair<std::string_view, json>{"null", {nullptr}},
                           {"true", {true}}, {"false", {false}}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return j;
      }
    }
    std::size_t end = std::min(s_.find_first_of(",]} \n", i_), s_.size());
    std::string number(s_.substr(i_, end - i_));
    char* stop = nullptr;
    double d = std::strtod(number.c_str(), &stop);
    if (number.empty() || *stop != '\0') fail("bad value '" + number + "'");
    i_ = end;
    return {d};
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

class ToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("FLINTKV");
    ASSERT_NE(bin, nullptr) << "set FLINTKV to the flintkv binary (meson test does)";
    binary_ = bin;
    std::string tmpl = "/dev/shm/flintkv-tools-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    pool_ = (dir_ / "test.pool").string();
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }

  // Runs flintkv with these arguments (standard input from the file `input`, if given);
  // captures stdout, stderr and the exit status.
  outcome flintkv(const std::vector<std::string>& args, const std::string& input = "") {
    std::string cmd = shell_quote(binary_);
    for (const std::string& a : args) cmd.append(" ").append(shell_quote(a));
    fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    cmd += " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string());
    if (!input.empty()) cmd += " <" + shell_quote(input);
    int raw = std::system(cmd.c_str());
    outcome o;
    o.exit_code = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    o.out = read_file(out);
    o.err = read_file(err);
    return o;
  }
  // Runs a copy of flintkv as a user who cannot write the test's files: as root (CI), the
  // child drops to uid and gid 65534 before exec, since permission bits stop nothing for
  // root; as anyone else, the files' permission bits do it.
  outcome flintkv_unprivileged(const std::vector<std::string>& args) {
    const fs::path copy = dir_ / "flintkv-copy", out = dir_ / "stdout", err = dir_ / "stderr";
    if (!fs::exists(copy)) fs::copy_file(binary_, copy);  // the build tree may be closed to it
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read |
                              fs::perms::others_exec);
    std::vector<std::string> words = {copy.string()};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0 || ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) ::_exit(125);
      if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 ||
                               ::setresgid(65534, 65534, 65534) != 0 ||
                               ::setresuid(65534, 65534, 65534) != 0)) {
        ::_exit(124);
      }
      ::execv(argv[0], argv.data());
      ::_exit(123);
    }
    outcome o;
    int raw = 0;
    if (child < 0 || ::waitpid(child, &raw, 0) != child) return o;
    o.exit_code = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    o.out = read_file(out);
    o.err = read_file(err);
    return o;
  }

  // Marks the write of `key` (stored with `value`) in the pool as one that did not complete,
  // as a crash leaves it: its node's version becomes the uncommitted marker. The next
  // read-write open links around it.
  void interrupt_write(const std::string& key, const std::string& value) {
    using P = flintkv::internal::default_config::policy;
    std::string bytes = read_file(pool_);
    const std::size_t at = bytes.find(key + value);
    ASSERT_NE(at, std::string::npos);
    const std::size_t node = at - flintkv::internal::pnode<P>::header_size();
    const flintkv::internal::word63 uncommitted = flintkv::internal::uncommitted_word(
        flintkv::internal::in_node({node}, flintkv::internal::word_field::version));
    std::memcpy(bytes.data() + node + offsetof(flintkv::internal::pnode<P>, version),
                &uncommitted, sizeof uncommitted);
    write_file(pool_, bytes);
  }

  // A small pool: the tests never need the 1 GiB default.
  outcome put(const std::string& key, const std::string& value) {
    return flintkv({"put", "--pool_size=16M", pool_, "--", key, value});
  }

  std::string binary_;
  fs::path dir_;
  std::string pool_;
};

#define EXPECT_OK(o) EXPECT_EQ((o).exit_code, 0) << (o).err

TEST_F(ToolsTest, PutGetDeleteRoundTrip) {
  EXPECT_OK(put("apple", "red"));
  EXPECT_OK(put("banana", "yellow"));
  EXPECT_OK(put("apple", "green"));  // a newer version
  outcome got = flintkv({"get", pool_, "apple"});
  EXPECT_OK(got);
  EXPECT_EQ(got.out, "green\n");
  EXPECT_OK(flintkv({"delete", pool_, "apple"}));
  outcome gone = flintkv({"get", pool_, "apple"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_EQ(gone.out, "");
  EXPECT_NE(gone.err.find("NotFound"), std::string::npos) << gone.err;
  EXPECT_EQ(flintkv({"get", pool_, "banana"}).out, "yellow\n");
  // Deleting a missing key is not an error.
  EXPECT_OK(flintkv({"delete", pool_, "cherry"}));
}

TEST_F(ToolsTest, KeysAndValuesThatLookLikeFlags) {
  EXPECT_OK(put("--key", "--value"));
  EXPECT_OK(put("k", ""));  // an empty value is a value
  outcome got = flintkv({"get", pool_, "--", "--key"});
  EXPECT_OK(got);
  EXPECT_EQ(got.out, "--value\n");
  outcome empty = flintkv({"get", pool_, "k"});
  EXPECT_OK(empty);
  EXPECT_EQ(empty.out, "\n");
}

TEST_F(ToolsTest, ScanHonoursBoundsAndDirection) {
  for (std::string k : {"k1", "k2", "k3", "k4", "k5"}) ASSERT_EQ(put(k, "v" + k).exit_code, 0);
  ASSERT_EQ(flintkv({"delete", pool_, "k4"}).exit_code, 0);
  outcome all = flintkv({"scan", pool_});
  EXPECT_OK(all);
  EXPECT_EQ(all.out, "k1\tvk1\nk2\tvk2\nk3\tvk3\nk5\tvk5\n");
  outcome range = flintkv({"scan", pool_, "k2", "k5"});
  EXPECT_EQ(range.out, "k2\tvk2\nk3\tvk3\n");
  outcome reverse = flintkv({"scan", "--reverse", pool_, "k2", "k5"});
  EXPECT_OK(reverse);
  EXPECT_EQ(reverse.out, "k3\tvk3\nk2\tvk2\n");
  outcome from = flintkv({"scan", pool_, "k3"});
  EXPECT_EQ(from.out, "k3\tvk3\nk5\tvk5\n");
  outcome reverse_all = flintkv({"scan", pool_, "--reverse"});
  EXPECT_EQ(reverse_all.out, "k5\tvk5\nk3\tvk3\nk2\tvk2\nk1\tvk1\n");
  EXPECT_EQ(flintkv({"scan", pool_, "x", "y"}).out, "");
}

TEST_F(ToolsTest, OnlyPutCreatesAPoolUnlessAskedTo) {
  outcome get = flintkv({"get", pool_, "k"});
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_NE(get.err.find(pool_), std::string::npos) << get.err;
  EXPECT_FALSE(fs::exists(pool_));
  for (const char* cmd : {"delete", "scan", "stats"}) {
    std::vector<std::string> args = {cmd, pool_};
    if (std::string_view(cmd) == "delete") args.push_back("k");
    EXPECT_EQ(flintkv(args).exit_code, 1) << cmd;
    EXPECT_FALSE(fs::exists(pool_)) << cmd;
  }
  outcome created = flintkv({"get", "--create", "--pool_size=16M", pool_, "k"});
  EXPECT_EQ(created.exit_code, 1);  // the pool is new and empty: NotFound
  EXPECT_NE(created.err.find("NotFound"), std::string::npos) << created.err;
  EXPECT_TRUE(fs::exists(pool_));
  EXPECT_OK(flintkv({"scan", pool_}));
}

TEST_F(ToolsTest, StatsReportsTheStore) {
  ASSERT_EQ(put("a", "1").exit_code, 0);
  ASSERT_EQ(put("b", "2").exit_code, 0);
  ASSERT_EQ(put("a", "3").exit_code, 0);
  outcome s = flintkv({"stats", pool_});
  EXPECT_OK(s);
  EXPECT_NE(s.out.find("live_keys:           2\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("pool_size:           16777216\n"), std::string::npos) << s.out;
  // Every field of Stats, one a line (the reclamation figures depend on the engine).
  const std::vector<std::string> lines = lines_of(s.out);
  for (const char* field :
       {"pool:", "configuration:", "granularity:", "pool_size:", "pool_used:", "live_keys:",
        "keys:", "versions:", "obsolete_versions:", "visible_version:", "watermark:",
        "snapshots:", "reclaimed_versions:", "reclaimed_bytes:", "reclamation_passes:",
        "merges:", "merged_keys:", "merge_errors:", "write_stalls:", "merge_error:", "recovered_versions:", "recovery_seconds:", "puts:", "deletes:", "batches:", "gets:",
        "iterators:", "pwb:", "pfence:"}) {
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [&](const std::string& line) { return line.starts_with(field); }),
              1)
        << field << "\n" << s.out;
  }
}

TEST_F(ToolsTest, CheckAcceptsAGoodPoolWithoutChangingIt) {
  ASSERT_EQ(put("a", "1").exit_code, 0);
  ASSERT_EQ(put("b", "2").exit_code, 0);
  ASSERT_EQ(flintkv({"delete", pool_, "a"}).exit_code, 0);
  std::string before = read_file(pool_);
  outcome c = flintkv({"check", pool_});
  EXPECT_OK(c);
  // Closing the store after the delete dropped "a" entirely: one key, live.
  EXPECT_NE(c.out.find("keys:                1\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("live_keys:           1\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("status:              OK\n"), std::string::npos) << c.out;
  EXPECT_TRUE(read_file(pool_) == before) << "check changed the pool";
}

// Part of defect 9 of issue 10: get, scan, stats and check opened the pool for writing.
// They open it read-only now: a pool holding a write that did not complete (which a
// read-write open repairs, so the file changes) stays exactly as it was.
TEST_F(ToolsTest, ReadCommandsLeaveThePoolAsItIs) {
  ASSERT_EQ(put("a", "1").exit_code, 0);
  ASSERT_EQ(put("b", "2").exit_code, 0);
  ASSERT_EQ(put("c", "interrupted").exit_code, 0);
  interrupt_write("c", "interrupted");
  const std::string before = read_file(pool_);
  const std::vector<std::vector<std::string>> reads = {
      {"get", pool_, "a"}, {"scan", pool_}, {"scan", "--reverse", pool_, "a", "c"},
      {"stats", pool_},    {"check", pool_}};
  for (const auto& args : reads) {
    outcome o = flintkv(args);
    EXPECT_OK(o);
    EXPECT_TRUE(read_file(pool_) == before) << args[0] << " changed the pool";
  }
  EXPECT_EQ(flintkv({"scan", pool_}).out, "a\t1\nb\t2\n");
  EXPECT_EQ(flintkv({"get", pool_, "c"}).exit_code, 1);
  EXPECT_NE(flintkv({"check", pool_}).out.find("uncommitted:         1\n"), std::string::npos);
  // A writing command repairs the list: the file changes.
  EXPECT_OK(flintkv({"delete", pool_, "b"}));
  EXPECT_FALSE(read_file(pool_) == before);
  EXPECT_NE(flintkv({"check", pool_}).out.find("uncommitted:         0\n"), std::string::npos);
}

TEST_F(ToolsTest, ReadCommandsWorkOnAFileTheUserCannotWrite) {
  ASSERT_EQ(put("a", "1").exit_code, 0);
  ASSERT_EQ(put("b", "2").exit_code, 0);
  fs::permissions(pool_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string before = read_file(pool_);
  // The user really cannot write it: put fails.
  outcome denied = flintkv_unprivileged({"put", pool_, "c", "3"});
  ASSERT_EQ(denied.exit_code, 1) << "123-125: the child could not run; 0: it could write\n"
                                 << denied.err;
  EXPECT_NE(denied.err.find(pool_), std::string::npos) << denied.err;

  outcome got = flintkv_unprivileged({"get", pool_, "b"});
  EXPECT_OK(got);
  EXPECT_EQ(got.out, "2\n");
  outcome scanned = flintkv_unprivileged({"scan", pool_});
  EXPECT_OK(scanned);
  EXPECT_EQ(scanned.out, "a\t1\nb\t2\n");
  outcome stats = flintkv_unprivileged({"stats", pool_});
  EXPECT_OK(stats);
  EXPECT_NE(stats.out.find("live_keys:           2\n"), std::string::npos) << stats.out;
  outcome checked = flintkv_unprivileged({"check", pool_});
  EXPECT_OK(checked);
  EXPECT_NE(checked.out.find("status:              OK\n"), std::string::npos) << checked.out;
  EXPECT_TRUE(read_file(pool_) == before);
}

// Part of defect 9 of issue 10: argv cannot carry a value over about 128 KiB, below the
// 1 MiB limit. `put <pool> <key> -` reads the value from standard input.
TEST_F(ToolsTest, PutReadsTheValueFromStandardInput) {
  std::mt19937_64 random(11);
  std::string value(flintkv::kMaxValueSize, '\0');  // every byte value, NULs and newlines too
  for (char& c : value) c = static_cast<char>(random());
  const std::string input = (dir_ / "value").string();
  write_file(input, value);
  outcome put_big = flintkv({"put", "--pool_size=16M", pool_, "big", "-"}, input);
  EXPECT_OK(put_big);
  outcome got = flintkv({"get", pool_, "big"});
  EXPECT_OK(got);
  EXPECT_TRUE(got.out == value + "\n") << "got " << got.out.size() << " bytes";

  write_file(input, "");
  EXPECT_OK(flintkv({"put", pool_, "empty", "-"}, input));
  EXPECT_EQ(flintkv({"get", pool_, "empty"}).out, "\n");

  // One byte over the limit: refused before any pool is created.
  write_file(input, value + "x");
  const std::string other = (dir_ / "other.pool").string();
  outcome over = flintkv({"put", "--pool_size=16M", other, "k", "-"}, input);
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.err.find("standard input"), std::string::npos) << over.err;
  EXPECT_NE(over.err.find(std::to_string(flintkv::kMaxValueSize)), std::string::npos)
      << over.err;
  EXPECT_FALSE(fs::exists(other));
}

TEST_F(ToolsTest, CheckRejectsRandomBytesNamingTheFile) {
  std::mt19937_64 random(7);
  for (std::size_t size : {std::size_t{100}, std::size_t{16} << 20}) {
    std::string bytes(size, '\0');
    for (std::size_t i = 0; i < size; i += 8) {
      std::uint64_t r = random();
      std::memcpy(bytes.data() + i, &r, std::min<std::size_t>(8, size - i));
    }
    write_file(pool_, bytes);
    outcome c = flintkv({"check", pool_});
    EXPECT_NE(c.exit_code, 0) << size;
    EXPECT_NE(c.err.find(pool_), std::string::npos) << c.err;
    EXPECT_TRUE(read_file(pool_) == bytes) << "check changed the file";
    // Opening it is refused too, and leaves it as it was.
    outcome get = flintkv({"get", pool_, "k"});
    EXPECT_EQ(get.exit_code, 1);
    EXPECT_NE(get.err.find(pool_), std::string::npos) << get.err;
    EXPECT_TRUE(read_file(pool_) == bytes) << "get changed the file";
  }
}

TEST_F(ToolsTest, CheckRejectsAFlippedHeaderByte) {
  ASSERT_EQ(put("a", "1").exit_code, 0);
  const std::string good = read_file(pool_);
  // The magic, the pool size and the uuid: each covered by the header's checks.
  for (std::size_t offset : {std::size_t{0}, std::size_t{17}, std::size_t{30}}) {
    std::string bad = good;
    bad[offset] = static_cast<char>(bad[offset] ^ 0x20);
    write_file(pool_, bad);
    outcome c = flintkv({"check", pool_});
    EXPECT_EQ(c.exit_code, 1) << "offset " << offset;
    EXPECT_NE(c.err.find(pool_), std::string::npos) << c.err;
    if (offset == 30) {  // only the checksum covers the uuid
      EXPECT_NE(c.err.find("Corruption"), std::string::npos) << c.err;
    }
  }
  write_file(pool_, good);
  EXPECT_OK(flintkv({"check", pool_}));
}

TEST_F(ToolsTest, UnwritablePathIsAnErrorNotACrash) {
  outcome o = flintkv({"put", "/proc/flintkv-no-such-dir/x.pool", "k", "v"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("/proc/flintkv-no-such-dir/x.pool"), std::string::npos) << o.err;
  outcome dir = flintkv({"put", "--pool_size=16M", dir_.string(), "k", "v"});
  EXPECT_EQ(dir.exit_code, 1);
  outcome check = flintkv({"check", (dir_ / "missing.pool").string()});
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_NE(check.err.find("missing.pool"), std::string::npos) << check.err;
}

TEST_F(ToolsTest, BadArgumentsPrintUsage) {
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"frobnicate"},
      {"get"},
      {"get", pool_},
      {"put", pool_, "k"},
      {"put", pool_, "k", "v", "extra"},
      {"scan", pool_, "a", "b", "c"},
      {"check"},
      {"get", "--verbose", pool_, "k"},
      {"scan", "--reverse=sideways", pool_},
      {"put", "--pool_size=lots", pool_, "k", "v"},
      {"put", "--pool_size=1K", pool_, "k", "v"},
      {"put", "--pool_size=99999999999999999999999", pool_, "k", "v"},
      {"check", "--reverse", pool_},
      {"bench", "--num=abc"},
      {"bench", "--num=-5"},
      {"bench", "--num=0"},
      {"bench", "--num=12x"},
      {"bench", "--threads=0"},
      {"bench", "--benchmarks=fillrandom,nosuch"},
      {"bench", "--benchmarks="},
      {"bench", "--benchmarks=overwrite*0"},
      {"bench", "--benchmarks=overwrite*10001"},
      {"bench", "--benchmarks=overwrite*2x"},
      {"bench", "--benchmarks=*3"},
      {"bench", "--benchmarks=nosuch*3"},
      {"bench", "--key_size=3", "--num=100000"},
      {"bench", "--value_size=99999999"},
      {"bench", "--use_existing_db"},
      {"bench", "--json"},
      {"bench", "extra"},
  };
  for (const auto& args : bad) {
    outcome o = flintkv(args);
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    EXPECT_EQ(o.exit_code, 2) << shown << "\n" << o.err;
    EXPECT_NE(o.err.find("Usage: flintkv"), std::string::npos) << shown << "\n" << o.err;
  }
  EXPECT_FALSE(fs::exists(pool_));
  outcome help = flintkv({"help"});
  EXPECT_OK(help);
  EXPECT_NE(help.out.find("Usage: flintkv"), std::string::npos);
  outcome bench_help = flintkv({"bench", "--help"});
  EXPECT_OK(bench_help);
  EXPECT_NE(bench_help.out.find("--benchmarks"), std::string::npos);
  for (const std::string& name : flintkv::tools::bench_names()) {  // each with its line
    EXPECT_NE(bench_help.out.find("\n  " + name + " "), std::string::npos) << name;
  }
}

// repair: a value damaged by hand; the new pool holds every other key and the older version
// of the damaged one, the report names the dropped node, and the damaged file is unchanged.
TEST_F(ToolsTest, RepairSalvagesADamagedPoolIntoANewOne) {
  for (std::string k : {"k1", "k2", "k3", "k4"}) ASSERT_EQ(put(k, "old-" + k).exit_code, 0);
  ASSERT_EQ(put("k3", "newest-k3").exit_code, 0);
  std::string bytes = read_file(pool_);
  const std::size_t at = bytes.find("k3newest-k3");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 6] = static_cast<char>(bytes[at + 6] ^ 0x01);
  write_file(pool_, bytes);
  const std::string target = (dir_ / "new.pool").string();
  outcome r = flintkv({"repair", pool_, target});
  EXPECT_OK(r);
  // k3's only version is damaged: the old one was reclaimed when the store closed, and its
  // node, found by the scan of the heap, carries the uncommitted marker reclamation gave it,
  // so repair does not take it for a version.
  EXPECT_NE(r.out.find("keys_salvaged:       3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uncommitted:         1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dropped: node at offset "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("key 'k3' (unverified): checksum mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status:              OK\n"), std::string::npos) << r.out;
  EXPECT_TRUE(read_file(pool_) == bytes) << "repair changed the damaged pool";
  EXPECT_EQ(flintkv({"scan", target}).out, "k1\told-k1\nk2\told-k2\nk4\told-k4\n");
  outcome check = flintkv({"check", target});
  EXPECT_OK(check);
  EXPECT_NE(check.out.find("pool_size:           16777216\n"), std::string::npos)
      << "the damaged pool's size by default\n" << check.out;
  // A second repair to the same target is refused: repair never replaces a file.
  const std::string made = read_file(target);
  outcome again = flintkv({"repair", pool_, target});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  EXPECT_TRUE(read_file(target) == made);
  // Missing pools and directories are errors naming them; missing arguments, usage errors.
  outcome missing = flintkv({"repair", (dir_ / "missing.pool").string(), target + "2"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("missing.pool"), std::string::npos) << missing.err;
  outcome no_dir = flintkv({"repair", pool_, (dir_ / "no-dir" / "new.pool").string()});
  EXPECT_EQ(no_dir.exit_code, 1);
  EXPECT_NE(no_dir.err.find("does not exist"), std::string::npos) << no_dir.err;
  EXPECT_EQ(flintkv({"repair", pool_}).exit_code, 2);
  EXPECT_EQ(flintkv({"repair", "--pool_size=1K", pool_, target + "3"}).exit_code, 2);
  outcome sized = flintkv({"repair", "--pool_size=32M", pool_, target + "4"});
  EXPECT_OK(sized);
  EXPECT_NE(sized.out.find("(33554432 bytes)"), std::string::npos) << sized.out;
}

// Lines of `bench` output that report `name`: "name<spaces>: ...".
std::vector<std::string> result_lines(const std::string& out, const std::string& name) {
  std::vector<std::string> found;
  for (const std::string& line : lines_of(out)) {
    if (line.starts_with(name + " ") && line.find(':') != std::string::npos &&
        line.substr(0, line.find(':')).find_first_not_of(' ', name.size()) ==
            std::string::npos) {
      found.push_back(line);
    }
  }
  return found;
}

TEST_F(ToolsTest, BenchRunsEveryBenchmarkAndWritesJson) {
  const std::string db = (dir_ / "bench.pool").string(), json_file = (dir_ / "r.json").string();
  const std::vector<std::string>& names = flintkv::tools::bench_names();
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ",") + n;
  outcome o = flintkv({"bench", "--benchmarks=" + list, "--num=2000", "--db=" + db,
                       "--json=" + json_file, "--histogram"});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  for (const char* header : {"FlintKV:", "Granularity:", "Keys:", "Values:", "Entries:",
                             "Threads:"}) {
    EXPECT_NE(o.out.find(header), std::string::npos) << header;
  }
  const std::vector<std::string> out_lines = lines_of(o.out);
  for (const std::string& n : names) {
    std::vector<std::string> lines = result_lines(o.out, n);
    ASSERT_EQ(lines.size(), 1u) << n << "\n" << o.out;
    for (const char* field : {"micros/op", "ops/s", "p50", "p99", "pwb/op", "pfence/op"}) {
      EXPECT_NE(lines[0].find(field), std::string::npos) << n << ": " << field;
    }
    // The next line says what the store holds after it.
    auto at = std::find(out_lines.begin(), out_lines.end(), lines[0]);
    ASSERT_TRUE(at != out_lines.end() && at + 1 != out_lines.end()) << n;
    const std::string& space = *(at + 1);
    EXPECT_TRUE(space.starts_with("  space: ")) << n << ": " << space;
    for (const char* field : {" live keys; pool ", " B/key; DRAM ", " obsolete versions; ",
                              "reclaimed ", " versions in ", " passes"}) {
      EXPECT_NE(space.find(field), std::string::npos) << n << ": " << field << "\n" << space;
    }
  }
  EXPECT_NE(o.out.find("percentiles (us): P50"), std::string::npos);
  EXPECT_TRUE(fs::exists(db)) << "a pool named by --db is kept";

  json doc = json_reader(read_file(json_file)).document();
  const json_array& results = doc.array();
  ASSERT_EQ(results.size(), names.size());
  std::map<std::string, json_object> by_name;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const json_object& r = results[i].object();
    for (const char* field : {"benchmark", "ops", "seconds", "ops_per_sec", "micros_per_op",
                              "p50_us", "p99_us", "pwb_per_op", "pfence_per_op", "threads",
                              "num", "key_size", "value_size", "configuration", "live_keys",
                              "pool_used", "pool_bytes_per_key", "dram_bytes",
                              "dram_bytes_per_key", "rss_bytes", "obsolete_versions",
                              "reclaimed_versions", "reclaimed_bytes", "reclamation_passes"}) {
      ASSERT_TRUE(r.contains(field)) << i << ": " << field;
    }
    // Every benchmark leaves the 2000 keys live but deleterandom, which deletes them all
    // (BenchWritePassesCoverTheKeySpace checks its output); DRAM is part of the resident set.
    EXPECT_GT(r.at("dram_bytes").number(), 0) << i;
    EXPECT_LE(r.at("dram_bytes").number(), r.at("rss_bytes").number()) << i;
    if (r.at("benchmark").string() != "deleterandom") {
      EXPECT_EQ(r.at("live_keys").number(), 2000) << i;
      EXPECT_NEAR(r.at("pool_bytes_per_key").number(), r.at("pool_used").number() / 2000,
                  1e-6);
      EXPECT_NEAR(r.at("dram_bytes_per_key").number(), r.at("dram_bytes").number() / 2000,
                  1e-6);
    }
    const std::string& name = r.at("benchmark").string();
    EXPECT_EQ(name, names[i]);
    EXPECT_EQ(r.at("num").number(), 2000);
    EXPECT_EQ(r.at("threads").number(), 1);
    EXPECT_EQ(r.at("key_size").number(), 16);
    EXPECT_EQ(r.at("value_size").number(), 64);
    EXPECT_GT(r.at("ops_per_sec").number(), 0) << name;
    EXPECT_GE(r.at("pwb_per_op").number(), 0) << name;
    if (name != "recover") {
      EXPECT_EQ(r.at("ops").number(), 2000) << name;
      EXPECT_GT(r.at("p99_us").number(), 0) << name;
      EXPECT_LE(r.at("p50_us").number(), r.at("p99_us").number()) << name;
    }
    by_name[name] = r;
  }
  // fillrandom and overwrite wrote every key, so every read finds its key; no missing key
  // is ever found.
  EXPECT_EQ(by_name["readrandom"].at("found").number(), 2000);
  EXPECT_EQ(by_name["readmissing"].at("found").number(), 0);
  EXPECT_EQ(by_name["seekrandom"].at("found").number(), 2000);
  EXPECT_EQ(by_name["seekrandom"].at("seek_nexts").number(), 10);
  EXPECT_EQ(by_name["fillbatch"].at("batch_size").number(), 100);
  EXPECT_LE(by_name["readwhilewriting"].at("writer_puts").number(), 2000);
  // One thread: no other writer, so no transfer's commit is refused.
  ASSERT_TRUE(by_name["transfer"].contains("aborts"));
  EXPECT_EQ(by_name["transfer"].at("aborts").number(), 0);
  const json_object& rec = by_name["recover"];
  for (const char* field : {"reopen_seconds", "insert_seconds", "ratio", "recovered_versions"}) {
    ASSERT_TRUE(rec.contains(field)) << field;
  }
  // recover ran after fillbatch (2000 versions) and readwhilewriting's puts; reclamation
  // may have freed some of the versions they replaced.
  EXPECT_GE(rec.at("recovered_versions").number(), 2000);
  EXPECT_LE(rec.at("recovered_versions").number(),
            2000 + by_name["readwhilewriting"].at("writer_puts").number());
  EXPECT_GT(rec.at("insert_seconds").number(), 0);
  EXPECT_NEAR(rec.at("ratio").number(),
              rec.at("reopen_seconds").number() / rec.at("insert_seconds").number(), 1e-6);

  // The pool it left holds what fillbatch wrote: every key, and check accepts it.
  outcome check = flintkv({"check", db});
  EXPECT_OK(check);
  EXPECT_NE(check.out.find("live_keys:           2000\n"), std::string::npos) << check.out;
}

TEST_F(ToolsTest, BenchSplitsWorkAcrossThreads) {
  const std::string json_file = (dir_ / "r.json").string();
  outcome o = flintkv({"bench", "--benchmarks=fillseq,readrandom,deleterandom,readwhilewriting",
                       "--num=3001", "--threads=2", "--json=" + json_file});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  json doc = json_reader(read_file(json_file)).document();
  ASSERT_EQ(doc.array().size(), 4u);
  for (const json& r : doc.array()) {
    EXPECT_EQ(r.object().at("ops").number(), 3001) << r.object().at("benchmark").string();
    EXPECT_EQ(r.object().at("threads").number(), 2);
  }
  // fillseq's two threads covered the whole key space between them.
  EXPECT_EQ(doc.array()[1].object().at("found").number(), 3001);
  // The default pool, named in the header, is gone at exit.
  std::size_t at = o.out.find("Pool:");
  ASSERT_NE(at, std::string::npos) << o.out;
  std::string line = o.out.substr(at, o.out.find('\n', at) - at);
  EXPECT_NE(line.find("(removed at exit)"), std::string::npos) << line;
  std::size_t slash = line.find('/');
  ASSERT_NE(slash, std::string::npos) << line;
  std::string default_pool = line.substr(slash, line.find(',') - slash);
  EXPECT_TRUE(default_pool.starts_with("/dev/shm/flintkv-bench-")) << default_pool;
  EXPECT_FALSE(fs::exists(default_pool)) << default_pool;
}

// fillrandom, overwrite and deleterandom write each key exactly once per pass, on the store
// the previous benchmark left: after a delete pass no key is found, after an overwrite pass
// every key is. name*N runs N passes, each its own result.
TEST_F(ToolsTest, BenchWritePassesCoverTheKeySpace) {
  const std::string json_file = (dir_ / "r.json").string();
  outcome o = flintkv({"bench",
                       "--benchmarks=fillrandom,readrandom,deleterandom,readrandom,"
                       "overwrite*2,readrandom",
                       "--num=3001", "--threads=2", "--json=" + json_file});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(result_lines(o.out, "overwrite").size(), 2u) << o.out;
  json doc = json_reader(read_file(json_file)).document();
  std::vector<std::string> names;
  std::vector<double> found;
  for (const json& r : doc.array()) {
    names.push_back(r.object().at("benchmark").string());
    EXPECT_EQ(r.object().at("ops").number(), 3001) << names.back();
    if (r.object().contains("found")) found.push_back(r.object().at("found").number());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fillrandom", "readrandom", "deleterandom",
                                             "readrandom", "overwrite", "overwrite",
                                             "readrandom"}));
  EXPECT_EQ(found, (std::vector<double>{3001, 0, 3001}));
  // With no live key there is nothing to divide by: the per-key figures are null in JSON
  // and "-" in the space line, the totals are still there.
  const json_object& deleted = doc.array()[2].object();
  EXPECT_EQ(deleted.at("live_keys").number(), 0);
  EXPECT_TRUE(deleted.at("pool_bytes_per_key").is_null());
  EXPECT_TRUE(deleted.at("dram_bytes_per_key").is_null());
  EXPECT_GT(deleted.at("pool_used").number(), 0);
  EXPECT_NE(o.out.find("  space: 0 live keys; pool "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" MiB, - B/key; DRAM "), std::string::npos) << o.out;
}

TEST_F(ToolsTest, BenchWeakWritesArePersistedWithinTheRun) {
  const std::string json_file = (dir_ / "weak.json").string();
  const std::string db = (dir_ / "weak.pool").string();
  outcome o = flintkv({"bench", "--benchmarks=fillrandom,fillbatch,readrandom", "--num=3000",
                       "--threads=2", "--sync=0", "--persist_every=100", "--db=" + db,
                       "--json=" + json_file});
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("Writes:        weak (sync = false), Persist() every 100 writes"),
            std::string::npos)
      << o.out;
  json doc = json_reader(read_file(json_file)).document();
  ASSERT_EQ(doc.array().size(), 3u);
  for (const json& r : doc.array()) {
    EXPECT_FALSE(r.object().at("sync").boolean());
    EXPECT_EQ(r.object().at("persist_every").number(), 100);
  }
  const json_object& fill = doc.array()[0].object();
  EXPECT_EQ(fill.at("live_keys").number(), 3000);
  // In manual mode a weak put fences its node only (the window's two fences are shared by
  // the 100 puts before each Persist); a sync put fences its link as well.
  if (fill.at("configuration").string().starts_with("manual")) {
    EXPECT_LT(fill.at("pfence_per_op").number(), 1.5) << o.out;
  }
  EXPECT_NE(result_lines(o.out, "readrandom").at(0).find("(3000 of 3000 found)"),
            std::string::npos);
}

// --verify_checksums=0 reaches the reads (the header and JSON say so; reads still find every
// key); the default verifies; any other value is a usage error.
TEST_F(ToolsTest, BenchVerifyChecksumsFlag) {
  const std::string json_file = (dir_ / "verify.json").string();
  outcome off = flintkv({"bench", "--benchmarks=fillrandom,readrandom,seekrandom,transfer",
                         "--num=2000", "--verify_checksums=0", "--json=" + json_file});
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  EXPECT_NE(off.out.find("Reads:         checksums not verified (verify_checksums = false)"),
            std::string::npos)
      << off.out;
  EXPECT_NE(result_lines(off.out, "readrandom").at(0).find("(2000 of 2000 found)"),
            std::string::npos);
  json doc = json_reader(read_file(json_file)).document();
  ASSERT_EQ(doc.array().size(), 4u);
  for (const json& r : doc.array()) EXPECT_FALSE(r.object().at("verify_checksums").boolean());

  outcome on = flintkv({"bench", "--benchmarks=fillrandom", "--num=500", "--json=" + json_file});
  ASSERT_EQ(on.exit_code, 0) << on.out << on.err;
  EXPECT_EQ(on.out.find("Reads:"), std::string::npos) << on.out;
  doc = json_reader(read_file(json_file)).document();
  EXPECT_TRUE(doc.array().at(0).object().at("verify_checksums").boolean());

  outcome bad = flintkv({"bench", "--benchmarks=fillrandom", "--verify_checksums=2"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--verify_checksums"), std::string::npos) << bad.err;
}

TEST_F(ToolsTest, BenchUsesAnExistingPoolOnlyWhenAsked) {
  const std::string db = (dir_ / "existing.pool").string();
  ASSERT_EQ(flintkv({"bench", "--benchmarks=fillseq", "--num=500", "--db=" + db}).exit_code, 0);
  std::string before = read_file(db);
  outcome refused = flintkv({"bench", "--benchmarks=fillrandom", "--num=500", "--db=" + db});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--use_existing_db"), std::string::npos) << refused.err;
  EXPECT_TRUE(read_file(db) == before) << "bench changed a pool it was not allowed to use";

  outcome reused = flintkv({"bench", "--benchmarks=fillrandom,readrandom,recover", "--num=500",
                            "--db=" + db, "--use_existing_db"});
  EXPECT_OK(reused);
  EXPECT_NE(reused.out.find("skipped (--use_existing_db)"), std::string::npos) << reused.out;
  ASSERT_EQ(result_lines(reused.out, "readrandom").size(), 1u) << reused.out;
  EXPECT_NE(result_lines(reused.out, "readrandom")[0].find("(500 of 500 found)"),
            std::string::npos);
  EXPECT_EQ(result_lines(reused.out, "recover").size(), 1u) << reused.out;
  EXPECT_FALSE(fs::exists(db + ".recover-insert"));
}

TEST_F(ToolsTest, BenchRecoverNeedsAPopulatedPool) {
  outcome o = flintkv({"bench", "--benchmarks=recover", "--num=100"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("recover needs a populated pool"), std::string::npos) << o.err;
  outcome json = flintkv({"bench", "--benchmarks=fillseq", "--num=100",
                          "--json=" + (dir_ / "no-such-dir" / "r.json").string()});
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.err.find("no-such-dir/r.json"), std::string::npos) << json.err;
}

TEST_F(ToolsTest, BenchReportsAFullPool) {
  // 8 MiB cannot hold 100000 values of 1000 bytes: NoSpace, reported, no crash.
  outcome o = flintkv({"bench", "--benchmarks=fillseq", "--num=100000", "--value_size=1000",
                       "--pool_size=8M"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("NoSpace"), std::string::npos) << o.err;
}

TEST(LatencyHistogramTest, BucketsTileTheRange) {
  EXPECT_EQ(latency_histogram::bucket_of(0), 0u);
  EXPECT_EQ(latency_histogram::bucket_of(~std::uint64_t{0}), latency_histogram::kBuckets - 1);
  for (std::size_t b = 0; b + 1 < latency_histogram::kBuckets; ++b) {
    std::uint64_t lo = latency_histogram::lower_bound_of(b);
    std::uint64_t next = latency_histogram::lower_bound_of(b + 1);
    ASSERT_LT(lo, next) << b;
    ASSERT_EQ(latency_histogram::bucket_of(lo), b);
    ASSERT_EQ(latency_histogram::bucket_of(next - 1), b);
    // A bucket is at most 1/32 of its lower bound wide (exact below 32).
    ASSERT_LE(next - lo, std::max<std::uint64_t>(1, lo / 32)) << b;
  }
}

TEST(LatencyHistogramTest, PercentilesMatchTheSortedSamples) {
  std::mt19937_64 random(11);
  std::lognormal_distribution<double> latency(8.0, 1.5);  // ~3 us median, long tail
  latency_histogram h, half1, half2;
  std::vector<std::uint64_t> samples;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<std::uint64_t>(latency(random));
    samples.push_back(v);
    h.add(v);
    (i % 2 ? half1 : half2).add(v);
  }
  half1.merge(half2);
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(h.count(), samples.size());
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
  for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    std::size_t rank = std::max<std::size_t>(1, static_cast<std::size_t>(
                                                    std::ceil(q * double(samples.size()))));
    double exact = double(samples[rank - 1]);
    EXPECT_NEAR(h.percentile(q), exact, std::max(1.0, exact / 32)) << q;
    EXPECT_EQ(half1.percentile(q), h.percentile(q)) << q;
  }
  EXPECT_EQ(latency_histogram().percentile(0.5), 0);
}

TEST(ArgumentsTest, ParsesFlagsNumbersAndPositionals) {
  const char* argv[] = {"flintkv", "scan", "--reverse", "pool", "--num=42", "--size=2M",
                        "--", "--literal"};
  arguments a(8, argv, 2);
  EXPECT_TRUE(a.flag("reverse"));
  EXPECT_FALSE(a.flag("create"));
  EXPECT_EQ(a.number("num", 7, 1, 100), 42u);
  EXPECT_EQ(a.number("absent", 7, 1, 100), 7u);
  EXPECT_EQ(a.bytes("size", 1, 1u << 30), std::uint64_t{2} << 20);
  EXPECT_EQ(a.positional(), (std::vector<std::string>{"pool", "--literal"}));
  EXPECT_NO_THROW(a.reject_unused("scan"));

  const char* bad[] = {"flintkv", "bench", "--num=4x2", "--threads=0", "--other"};
  arguments b(5, bad, 2);
  EXPECT_THROW(b.number("num", 1, 1, 100), usage_error);
  EXPECT_THROW(b.number("threads", 1, 1, 100), usage_error);
  EXPECT_THROW(b.reject_unused("bench"), usage_error);
  EXPECT_THROW(flintkv::tools::parse_bytes("17P", "x"), usage_error);
  EXPECT_THROW(flintkv::tools::parse_bytes("99999999999T", "x"), usage_error);
  EXPECT_EQ(flintkv::tools::parse_bytes("3k", "x"), 3072u);
}

}  // namespace

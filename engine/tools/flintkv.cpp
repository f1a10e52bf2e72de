// flintkv: the command-line tool of the FlintKV engine. Reads and writes a pool, validates
// one, salvages a damaged one into a new pool, prints its statistics, and runs db_bench-style
// benchmarks (bench.hpp).
//
// Exit status: 0 on success; 1 when the engine reports a problem (its Status is printed,
// after the command and the pool's path); 2 on bad arguments (the usage is printed).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "bench.hpp"
#include "flintkv/db.hpp"

namespace flintkv::tools {
namespace {

constexpr std::string_view kUsage =
    "Usage: flintkv <command> [options] <arguments>\n"
    "Commands:\n"
    "  put <pool> <key> <value>   store value for key, durably (creates the pool if missing);\n"
    "                             a value of - is read from standard input (up to 1 MiB)\n"
    "  get <pool> <key>           print the value of key\n"
    "  delete <pool> <key>        delete key\n"
    "  scan <pool> [from] [to]    print key<TAB>value lines for the keys in [from, to)\n"
    "  stats <pool>               open (and recover) the pool and print its statistics\n"
    "  check <pool>               validate the pool without changing it; exit status 1 on\n"
    "                             any problem\n"
    "  repair <pool> <new-pool>   copy every intact, committed key of a damaged pool into a\n"
    "                             new pool (never changing the damaged one); print what was\n"
    "                             kept and what was dropped\n"
    "  bench [flags]              db_bench-style benchmarks (flintkv bench --help)\n"
    "  help                       this text\n"
    "  get, scan, stats and check open the pool read-only: it may be a file you cannot\n"
    "  write, and they leave it as it is\n"
    "Options:\n"
    "  --create             create the pool if it is missing (put always does; get, scan\n"
    "                       and stats then create it read-write)\n"
    "  --pool_size=BYTES    size of a pool created by this command (suffix K, M, G;\n"
    "                       default 1G; for repair, the damaged file's size)\n"
    "  --reverse            scan: descending key order\n"
    "  --                   end of options: later words are keys or values even if they\n"
    "                       start with --\n";

struct command_error {
  std::string command, pool;
  Status status;
};

int report(const command_error& e) {
  std::fprintf(stderr, "flintkv: %s %s: %s\n", e.command.c_str(), e.pool.c_str(),
               e.status.ToString().c_str());
  return 1;
}

void expect_arguments(const arguments& args, std::string_view command, std::size_t min,
                      std::size_t max) {
  std::size_t n = args.positional().size();
  if (n < min || n > max) {
    std::string expected = min == max ? std::to_string(min)
                                      : std::to_string(min) + " to " + std::to_string(max);
    throw usage_error(std::string(command) + " takes " + expected + " arguments, not " +
                      std::to_string(n));
  }
}

// Opens the pool named by the first positional argument; handles --create and --pool_size.
struct pool_opener {
  Options options;

  pool_opener(arguments& args, bool create_by_default) {
    options.create_if_missing = args.flag("create") || create_by_default;
    if (auto size = args.bytes("pool_size", kMinPoolSize, ~std::uint64_t{0})) {
      options.pool_size = *size;
    }
  }
  // For writing: opens the pool, or creates it.
  Status open(const std::string& path, std::unique_ptr<DB>* db) const {
    return DB::Open(options, path, db);
  }
  // For reading: read-only, so the pool may be a file the user cannot write and stays as it
  // is; a missing pool is created (read-write) only with --create.
  Status open_for_reading(const std::string& path, std::unique_ptr<DB>* db) const {
    Options read = options;
    read.read_only = true;
    Status s = DB::Open(read, path, db);
    if (s.IsNotFound() && options.create_if_missing) s = DB::Open(options, path, db);
    return s;
  }
};

// The value of `put`: the argument itself, or for "-" the bytes of standard input, exactly,
// up to kMaxValueSize (argv cannot carry values that large).
Status read_value(const std::string& argument, std::string* value) {
  if (argument != "-") {
    *value = argument;
    return Status::OK();
  }
  value->clear();
  std::vector<char> buffer(64 * 1024);
  while (true) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), stdin);
    value->append(buffer.data(), n);
    if (value->size() > kMaxValueSize) {
      return Status::InvalidArgument("standard input holds more than " +
                                     std::to_string(kMaxValueSize) +
                                     " bytes, the largest value (kMaxValueSize)");
    }
    if (n < buffer.size()) break;
  }
  if (std::ferror(stdin)) {
    return Status::IOError(std::string("cannot read standard input: ") + std::strerror(errno));
  }
  return Status::OK();
}

int run_put(arguments& args) {
  pool_opener opener(args, true);
  args.reject_unused("put");
  expect_arguments(args, "put", 3, 3);
  const auto& a = args.positional();
  std::string value;
  Status s = read_value(a[2], &value);  // first: a refused value creates no pool
  std::unique_ptr<DB> db;
  if (s.ok()) s = opener.open(a[0], &db);
  if (s.ok()) s = db->Put(a[1], value);
  return s.ok() ? 0 : report({"put", a[0], s});
}

int run_get(arguments& args) {
  pool_opener opener(args, false);
  args.reject_unused("get");
  expect_arguments(args, "get", 2, 2);
  const auto& a = args.positional();
  std::unique_ptr<DB> db;
  std::string value;
  Status s = opener.open_for_reading(a[0], &db);
  if (s.ok()) s = db->Get(a[1], &value);
  if (!s.ok()) return report({"get", a[0], s});
  std::fwrite(value.data(), 1, value.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

int run_delete(arguments& args) {
  pool_opener opener(args, false);
  args.reject_unused("delete");
  expect_arguments(args, "delete", 2, 2);
  const auto& a = args.positional();
  std::unique_ptr<DB> db;
  Status s = opener.open(a[0], &db);
  if (s.ok()) s = db->Delete(a[1]);
  return s.ok() ? 0 : report({"delete", a[0], s});
}

int run_scan(arguments& args) {
  pool_opener opener(args, false);
  bool reverse = args.flag("reverse");
  args.reject_unused("scan");
  expect_arguments(args, "scan", 1, 3);
  const auto& a = args.positional();
  std::unique_ptr<DB> db;
  Status s = opener.open_for_reading(a[0], &db);
  if (!s.ok()) return report({"scan", a[0], s});
  ReadOptions read;
  if (a.size() > 1) read.lower_bound = a[1];
  if (a.size() > 2) read.upper_bound = a[2];
  std::unique_ptr<Iterator> it = db->NewIterator(read);
  auto print = [&] {
    std::string_view k = it->key(), v = it->value();
    std::fwrite(k.data(), 1, k.size(), stdout);
    std::fputc('\t', stdout);
    std::fwrite(v.data(), 1, v.size(), stdout);
    std::fputc('\n', stdout);
  };
  if (reverse) {
    for (it->SeekToLast(); it->Valid(); it->Prev()) print();
  } else {
    for (it->SeekToFirst(); it->Valid(); it->Next()) print();
  }
  s = it->status();
  return s.ok() ? 0 : report({"scan", a[0], s});
}

// Prints "name: value" lines, the values aligned.
using field = std::pair<std::string_view, std::string>;
void print_fields(const std::vector<field>& fields) {
  for (const auto& [name, value] : fields) {
    std::printf("%-20s %s\n", (std::string(name) + ":").c_str(), value.c_str());
  }
  std::fflush(stdout);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", s);
  return buf;
}

int run_stats(arguments& args) {
  pool_opener opener(args, false);
  args.reject_unused("stats");
  expect_arguments(args, "stats", 1, 1);
  const std::string& path = args.positional()[0];
  std::unique_ptr<DB> db;
  Status s = opener.open_for_reading(path, &db);
  if (!s.ok()) return report({"stats", path, s});
  Stats st = db->GetStats();
  using std::to_string;
  print_fields({{"pool", path},
                {"configuration", st.configuration},
                {"granularity", st.granularity},
                {"pool_size", to_string(st.pool_size)},
                {"pool_used", to_string(st.pool_used)},
                {"live_keys", to_string(st.live_keys)},
                {"keys", to_string(st.keys)},
                {"versions", to_string(st.versions)},
                {"obsolete_versions", to_string(st.obsolete_versions)},
                {"visible_version", to_string(st.visible_version)},
                {"watermark", to_string(st.watermark)},
                {"snapshots", to_string(st.snapshots)},
                {"reclaimed_versions", to_string(st.reclaimed_versions)},
                {"reclaimed_bytes", to_string(st.reclaimed_bytes)},
                {"reclamation_passes", to_string(st.reclamation_passes)},
                {"merges", to_string(st.merges)},
                {"merged_keys", to_string(st.merged_keys)},
                {"merge_errors", to_string(st.merge_errors)},
                {"write_stalls", to_string(st.write_stalls)},
                {"merge_error", st.merge_error},
                {"recovered_versions", to_string(st.recovered_versions)},
                {"recovery_seconds", seconds_text(st.recovery_seconds)},
                {"puts", to_string(st.puts)},
                {"deletes", to_string(st.deletes)},
                {"batches", to_string(st.batches)},
                {"gets", to_string(st.gets)},
                {"iterators", to_string(st.iterators)},
                {"pwb", to_string(st.pwb)},
                {"pfence", to_string(st.pfence)}});
  return 0;
}

// Uncommitted nodes and an interrupted batch are what a crash leaves: not a problem (the
// next open drops them), so they do not fail the check; DB::Check's status decides.
int run_check(arguments& args) {
  args.reject_unused("check");
  expect_arguments(args, "check", 1, 1);
  const std::string& path = args.positional()[0];
  CheckReport r;
  Status s = DB::Check(path, &r);
  using std::to_string;
  print_fields({{"pool", path},
                {"configuration", r.configuration},
                {"granularity", r.granularity},
                {"pool_size", to_string(r.pool_size)},
                {"versions", to_string(r.versions)},
                {"keys", to_string(r.keys)},
                {"live_keys", to_string(r.live_keys)},
                {"newest_version", to_string(r.newest_version)},
                {"uncommitted", to_string(r.uncommitted)},
                {"batch_in_progress", r.batch_in_progress ? "yes" : "no"},
                {"status", s.ToString()}});
  if (s.ok() && (r.uncommitted != 0 || r.batch_in_progress)) {
    std::printf("note: the pool holds writes that did not complete; the next open drops "
                "them\n");
  }
  return s.ok() ? 0 : report({"check", path, s});
}

// A key as the report shows it: printable ASCII as is, other bytes as \xNN.
std::string printable(std::string_view key) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out + "'";
}

// The report is printed whenever the damaged file could be read, also when writing the new
// pool failed; the exit status is 0 only when the new pool was made.
int run_repair(arguments& args) {
  std::uint64_t pool_size = 0;  // the damaged file's size
  if (auto size = args.bytes("pool_size", kMinPoolSize, ~std::uint64_t{0})) pool_size = *size;
  args.reject_unused("repair");
  expect_arguments(args, "repair", 2, 2);
  const std::string& damaged = args.positional()[0];
  const std::string& target = args.positional()[1];
  Options options;
  options.pool_size = pool_size;
  RepairReport r;
  Status s = DB::Repair(damaged, target, options, &r);
  if (r.damaged_size != 0) {
    using std::to_string;
    auto intact = [](bool b) { return std::string(b ? "intact" : "damaged"); };
    std::vector<field> fields = {
        {"damaged pool", damaged + " (" + to_string(r.damaged_size) + " bytes)"},
        {"new pool", s.ok() ? target + " (" + to_string(r.new_pool_size) + " bytes)"
                            : "not made"},
        {"header", intact(r.header_intact)},
        {"root", intact(r.root_intact)},
        {"list", r.list_intact ? "intact" : "broken " + r.list_break}};
    if (!r.list_intact) {
      fields.push_back({"list covers keys to",
                        r.list_covered_to.empty() ? "none" : printable(r.list_covered_to)});
    }
    fields.insert(fields.end(),
                  {{"versions_examined", to_string(r.versions_examined)},
                   {"versions_from_scan", to_string(r.versions_from_scan)},
                   {"uncommitted", to_string(r.uncommitted)},
                   {"chunks_scanned", to_string(r.chunks_scanned) + " (" +
                                          to_string(r.chunks_scanned_fully) +
                                          " at every 16-byte offset)"},
                   {"keys_salvaged", to_string(r.keys_salvaged)},
                   {"keys_from_scan", to_string(r.keys_from_scan)},
                   {"keys_from_tier", to_string(r.keys_from_tier)},
                   {"keys_deleted", to_string(r.keys_deleted)},
                   {"tier_records", to_string(r.tier_records)},
                   {"dropped", to_string(r.dropped.size())},
                   {"doubtful", to_string(r.doubtful.size())},
                   {"status", s.ToString()}});
    print_fields(fields);
    for (const RepairReport::Dropped& d : r.dropped) {
      std::string key;
      if (!d.key.empty()) {
        key = ", key " + printable(d.key) + (d.key_verified ? "" : " (unverified)");
      }
      std::printf("dropped: node at offset %llu%s: %s\n",
                  static_cast<unsigned long long>(d.offset), key.c_str(), d.reason.c_str());
    }
    for (const RepairReport::Doubtful& d : r.doubtful) {
      std::printf("doubtful: key %s: %s\n", printable(d.key).c_str(), d.reason.c_str());
    }
    for (const std::string& note : r.notes) std::printf("note: %s\n", note.c_str());
    std::fflush(stdout);
  }
  return s.ok() ? 0 : report({"repair", damaged, s});
}

int run_bench_command(arguments& args) {
  if (args.flag("help")) {
    std::fputs(bench_usage().c_str(), stdout);
    return 0;
  }
  bench_config config;
  try {
    config = parse_bench_config(args);
    args.reject_unused("bench");
    expect_arguments(args, "bench", 0, 0);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "flintkv: %s\n\n%s", e.what(), bench_usage().c_str());
    return 2;
  }
  return run_bench(config);
}

int run(int argc, const char* const* argv) {
  if (argc < 2) throw usage_error("no command");
  std::string_view command = argv[1];
  arguments args(argc, argv, 2);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage.data(), stdout);
    return 0;
  }
  if (command == "put") return run_put(args);
  if (command == "get") return run_get(args);
  if (command == "delete") return run_delete(args);
  if (command == "scan") return run_scan(args);
  if (command == "stats") return run_stats(args);
  if (command == "check") return run_check(args);
  if (command == "repair") return run_repair(args);
  if (command == "bench") return run_bench_command(args);
  throw usage_error("unknown command '" + std::string(command) + "'");
}

}  // namespace
}  // namespace flintkv::tools

int main(int argc, char** argv) {
  using flintkv::tools::kUsage;
  try {
    return flintkv::tools::run(argc, argv);
  } catch (const flintkv::tools::usage_error& e) {
    std::fprintf(stderr, "flintkv: %s\n\n%.*s", e.what(), static_cast<int>(kUsage.size()),
                 kUsage.data());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flintkv: %s\n", e.what());
    return 1;
  }
}

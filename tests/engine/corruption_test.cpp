// The corruption fuzz test: damage a pool the engine made, then check that the engine either
// reads exactly what was written or reports the damage, and never returns wrong data, hangs,
// crashes, or changes the file while checking it, reading it or refusing it (issue 10,
// "Damage is detected, never returned"). docs/crash-testing.md describes how to run it.
//
// Pools: four small pools (kMinPoolSize) made by the engine of this build: puts, overwrites
// and deletes; batches, deletes and one large value; and two made over the pv model in this
// build's placement and durability mode, crashed in the middle of a put and of a batch (so
// their lists hold nodes of a write that did not complete; the state before that write and
// the state after it are both right, but the same one for every read).
//
// A trial (seed, index) copies one pool and damages it once, at a random place in its used
// part: the pool header; the engine's root words; the chunk table (mostly tags of chunks in
// use); a node of the persistent list (a quarter of the time the head sentinel or a node of
// the interrupted write, half the time the node's header words); or anywhere in a chunk
// in use. The damage: a flipped bit; a changed byte; an 8-byte word overwritten (random bits,
// or a plausible value: 0, all ones, the uncommitted version marker, a nearby value, the
// offset of a node or of the word's own node); a 4 KiB page zeroed (if it was zero already:
// filled) or filled with random bytes; the file truncated or extended.
// Then, in a forked child under a time limit: DB::Check; DB::Open; a forward and a backward
// scan; Get of every key ever written and of a few never written; and, if nothing reported
// damage, one Put, close, reopen, and the scans and Gets again. corruption_judge.hpp
// classifies what the child saw (its outcomes are listed there); forked_trial.hpp adds
// crashes, sanitizer reports and hangs. The test fails if any trial is a failure.
//
// Environment:
//   CORRUPTION_TRIALS=n          trials (default 300)
//   CORRUPTION_SEED=s            seed of the trials (default 1)
//   CORRUPTION_TIME_LIMIT_MS=ms  per trial (default 5000)
//   CORRUPTION_REPLAY=s:i        run trial i of seed s only, printing every step
// Every failing trial prints a line starting with its CORRUPTION_REPLAY=s:i; the summary
// counts trials by outcome, by kind of damage, by area and by pool, and lists each class of
// failure (outcome, step, kind of place damaged) with its first replay line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "corruption_judge.hpp"
#include "engine_support.hpp"
#include "forked_trial.hpp"
#include "pv_interface/model.hpp"
#include "support/files.hpp"

// Under AddressSanitizer, freed memory waits in a quarantine that stays resident, and each
// fork copies the page tables of everything resident: a smaller quarantine keeps hundreds of
// forks cheap (as in the crash harness). ASAN_OPTIONS still overrides it.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=16"; }

namespace {

using namespace corruption_test;
using flintkv::CheckReport;
using flintkv::DB;
using flintkv::Options;
using flintkv::Status;
using flintkv::WriteBatch;
namespace fs = std::filesystem;
namespace internal = flintkv::internal;
namespace format = alloc::format;

using P = internal::default_config::policy;
// The build's placement and durability over the pv model: the same persistent layout.
using model_config = internal::engine_config<flit::policy<flit::default_placement, pv::model_backend>,
                                             internal::build_durability>;
constexpr std::uint64_t W = sizeof(flit::persist<internal::word63, P>);  // a persistent word
// Where the words the test reads are (docs/engine-layout.md), from the engine's own types.
using pnode_t = internal::pnode<P>;
using root_t = internal::root<P>;
constexpr std::uint64_t kNodeNext = offsetof(pnode_t, next);
constexpr std::uint64_t kNodeVersion = offsetof(pnode_t, version);
constexpr std::uint64_t kNodeSizes = offsetof(pnode_t, sizes);
constexpr std::uint64_t kNodeHeader = sizeof(pnode_t);  // the key follows
constexpr std::uint64_t kRootFormat = offsetof(root_t, format);
constexpr std::uint64_t kRootHead = offsetof(root_t, head);
constexpr std::uint64_t kRootCommit = offsetof(root_t, commit_version);
constexpr std::uint64_t kRootBatch = offsetof(root_t, batch_mode);
constexpr std::uint64_t kRootBytes = sizeof(root_t);
constexpr std::uint64_t kWordMask = ~(std::uint64_t{1} << 63);  // without link_and_persist's flag
constexpr std::uint64_t kOffsetMask = ~std::uint64_t{1};

// ---- configuration ----------------------------------------------------------------------

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

struct fuzz_config {
  std::uint64_t seed = env_number("CORRUPTION_SEED", 1);
  std::uint64_t trials = env_number("CORRUPTION_TRIALS", 300);
  std::chrono::milliseconds limit{env_number("CORRUPTION_TIME_LIMIT_MS", 5000)};
  std::optional<std::pair<std::uint64_t, std::uint64_t>> replay;  // seed, trial

  fuzz_config() {
    if (const char* r = std::getenv("CORRUPTION_REPLAY"); r != nullptr && *r != '\0') {
      char* colon = nullptr;
      std::uint64_t s = std::strtoull(r, &colon, 10);
      if (colon != nullptr && *colon == ':') replay = {{s, std::strtoull(colon + 1, nullptr, 10)}};
    }
  }
};

// ---- seeded choices ---------------------------------------------------------------------

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return mix(state_++); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  std::uint64_t in(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo); }  // [lo, hi)
  bool percent(unsigned p) { return below(100) < p; }

  // An entry of `table` chosen by its `weight` member.
  template <class Entry, std::size_t N>
  const Entry& pick(const std::array<Entry, N>& table) {
    unsigned total = 0;
    for (const Entry& e : table) total += e.weight;
    std::uint64_t x = below(total);
    for (const Entry& e : table) {
      if (x < e.weight) return e;
      x -= e.weight;
    }
    return table.back();
  }

 private:
  std::uint64_t state_;
};

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The file's bytes, read in one go (test_support::read_file goes byte by byte: too slow for
// several 8 MiB reads per trial).
std::vector<char> file_bytes(const std::string& path) {
  std::vector<char> out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    out.resize(done);
  }
  ::close(fd);
  return out;
}

// ---- the persistent list, read by the test (docs/engine-layout.md) ----------------------

struct node_info {
  std::uint64_t offset = 0, size = 0, version = 0;
  std::string key;
  bool uncommitted = false;  // of a write that did not complete
};

struct list_walk {
  std::vector<node_info> nodes;  // the head sentinel first, then in list order
  std::uint64_t uncommitted = 0;
};

// Follows the list from the root as the layout reference describes it, stopping at the
// first offset or size that does not fit (the pools it reads are undamaged).
list_walk walk_list(std::span<const std::byte> pool) {
  auto word = [&](std::uint64_t off) {
    std::uint64_t v = 0;
    if (off + 8 <= pool.size()) std::memcpy(&v, pool.data() + off, 8);
    return v;
  };
  list_walk out;
  const std::uint64_t root = format::root_offset;
  using internal::in_node;
  using internal::in_root;
  using internal::word_field;
  if ((word(root + kRootFormat) & kWordMask) != internal::kFormat) return out;
  const internal::stored_version commit = internal::read_version_word(
      {word(root + kRootCommit) & kWordMask}, in_root(word_field::commit_version));
  const bool batch = internal::word63{word(root + kRootBatch) & kWordMask} == internal::kBatchActive;
  auto link = internal::read_offset_word({word(root + kRootHead) & kOffsetMask},
                                         in_root(word_field::head));
  for (std::size_t steps = 0; link && link->value != 0 && steps < pool.size() / kNodeHeader;
       ++steps) {
    const std::uint64_t off = link->value;
    if (off + kNodeHeader > pool.size()) break;
    const std::uint64_t sizes = word(off + kNodeSizes) & kWordMask;
    const std::uint64_t ks = internal::key_size_of({sizes}), vs = internal::value_size_of({sizes});
    if (off + kNodeHeader + ks + vs > pool.size()) break;
    const internal::stored_version v = internal::read_version_word(
        {word(off + kNodeVersion) & kWordMask}, in_node({off}, word_field::version));
    node_info n{off, kNodeHeader + ks + vs, v.version,
                std::string(reinterpret_cast<const char*>(pool.data() + off + kNodeHeader), ks)};
    n.uncommitted = !out.nodes.empty() &&
                    (v.kind == internal::version_kind::uncommitted ||
                     (batch && v.version > commit.version));
    if (n.uncommitted) ++out.uncommitted;
    out.nodes.push_back(std::move(n));
    link = internal::read_offset_word({word(off) & kOffsetMask}, in_node({off}, word_field::next));
  }
  return out;
}

// ---- the pools --------------------------------------------------------------------------

struct pool_spec {
  std::string name;
  std::vector<char> bytes;
  // The states a correct open may show: one, or before and after the interrupted write.
  std::vector<contents> candidates;
  std::vector<std::string> probe_keys;  // every key ever written, and a few never written
  std::vector<node_info> nodes;         // the list as the test reads it
  std::vector<node_info> special_nodes; // the head sentinel and the uncommitted nodes
  std::vector<std::uint64_t> used_chunks;  // chunks whose tag is not `unassigned`
  std::uint64_t chunk_count = 0, heap_offset = 0;
  CheckReport report;                   // DB::Check of the undamaged pool

  std::span<const std::byte> span() const {
    return {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()};
  }
  std::size_t max_keys() const {
    std::size_t n = 0;
    for (const contents& c : candidates) n = std::max(n, c.size());
    return n;
  }
};

void require(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.ToString());
}

// A value for `key` of `width` bytes that names the key and its generation.
std::string value_for(const std::string& key, unsigned generation, std::size_t width) {
  std::string v = key + "#" + std::to_string(generation) + ":";
  for (std::size_t i = 0; v.size() < width; ++i) v += static_cast<char>('a' + (i * 7 + generation) % 26);
  v.resize(width);
  return v;
}

// Writes to a store and to the expected contents at once.
class recorder {
 public:
  explicit recorder(DB& db) : db_(db) {}
  void put(const std::string& k, const std::string& v) {
    require(db_.Put(k, v), "put " + k);
    state[k] = v;
    written.insert(k);
  }
  void del(const std::string& k) {
    require(db_.Delete(k), "delete " + k);
    state.erase(k);
    written.insert(k);
  }
  void write(const WriteBatch& b) {
    require(db_.Write(b), "batch");
    apply(b, state);
    for (const auto& e : b.entries()) written.insert(e.key);
  }
  static void apply(const WriteBatch& b, contents& c) {
    for (const auto& e : b.entries()) {
      if (e.kind == WriteBatch::Kind::kPut) {
        c[e.key] = e.value;
      } else {
        c.erase(e.key);
      }
    }
  }
  contents state;
  std::set<std::string> written;

 private:
  DB& db_;
};

std::string key_name(const char* prefix, unsigned i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%05u", prefix, i);
  return buf;
}

// Puts of 300 keys (values of 8 to 200 bytes), a third overwritten, a seventh deleted,
// some of those put again.
void fill_puts(recorder& r) {
  for (unsigned i = 0; i < 300; ++i) r.put(key_name("key", i), value_for(key_name("key", i), 1, 8 + i * 37 % 193));
  for (unsigned i = 0; i < 300; i += 3) r.put(key_name("key", i), value_for(key_name("key", i), 2, 16 + i % 90));
  for (unsigned i = 0; i < 300; i += 7) r.del(key_name("key", i));
  for (unsigned i = 0; i < 300; i += 21) r.put(key_name("key", i), value_for(key_name("key", i), 3, 24));
}

// 40 batches of 8 entries over 200 keys (64-byte values, a fifth deletes), single puts
// between them, and a 100,000-byte value (a large block over two chunks).
void fill_batches(recorder& r) {
  rng choose(7);
  for (unsigned b = 0; b < 40; ++b) {
    WriteBatch batch;
    for (unsigned e = 0; e < 8; ++e) {
      std::string k = key_name("bat", static_cast<unsigned>(choose.below(200)));
      if (choose.percent(20)) {
        batch.Delete(k);
      } else {
        batch.Put(k, value_for(k, b, 64));
      }
    }
    r.write(batch);
    if (b % 4 == 0) r.put(key_name("one", b), value_for(key_name("one", b), b, 40));
  }
  r.put("large", value_for("large", 1, 100000));
}

// A mix of puts, deletes and batches over 120 keys, before the interrupted write.
void fill_mixed(recorder& r) {
  rng choose(11);
  for (unsigned i = 0; i < 150; ++i) {
    std::string k = key_name("mix", static_cast<unsigned>(choose.below(120)));
    const unsigned what = static_cast<unsigned>(choose.below(10));
    if (what < 6) {
      r.put(k, value_for(k, i, 8 + choose.below(113)));
    } else if (what < 8) {
      r.del(k);
    } else {
      WriteBatch b;
      for (unsigned e = 0; e < 4; ++e) {
        std::string bk = key_name("mix", static_cast<unsigned>(choose.below(120)));
        b.Put(bk, value_for(bk, i, 32));
      }
      r.write(b);
    }
  }
}

std::vector<std::string> probe_keys(const std::set<std::string>& written) {
  std::vector<std::string> keys(written.begin(), written.end());
  for (const char* k : {"!before-every-key", "key00000x", "never-written", "~after-every-key"}) {
    keys.push_back(k);
  }
  return keys;
}

// Fills in what the test reads from the bytes: the list, the used chunks; and Check's report.
void describe_pool(pool_spec& p, const std::string& path) {
  format::pool_header h;
  std::memcpy(&h, p.bytes.data(), sizeof h);
  p.chunk_count = h.chunk_count;
  p.heap_offset = h.heap_offset;
  for (std::uint64_t c = 0; c < p.chunk_count; ++c) {
    format::chunk_tag t;
    std::memcpy(&t, p.bytes.data() + format::chunk_table_offset + c * 8, 8);
    if (t.kind() != format::chunk_kind::unassigned) p.used_chunks.push_back(c);
  }
  p.nodes = walk_list(p.span()).nodes;
  for (const node_info& n : p.nodes) {
    if (&n == &p.nodes.front() || n.uncommitted) p.special_nodes.push_back(n);
  }
  require(DB::Check(path, &p.report), "check of the undamaged pool " + p.name);
}

// A pool made by DB::Open on a file, filled by `fill`.
template <class Fill>
pool_spec file_pool(const std::string& name, const fs::path& dir, Fill fill) {
  pool_spec p;
  p.name = name;
  const std::string path = (dir / (name + ".pool")).string();
  {
    Options o;
    o.create_if_missing = true;
    o.pool_size = flintkv::kMinPoolSize;
    std::unique_ptr<DB> db;
    require(DB::Open(o, path, &db), "create " + path);
    recorder r(*db);
    fill(r);
    p.candidates = {r.state};
    p.probe_keys = probe_keys(r.written);
  }
  p.bytes = file_bytes(path);
  describe_pool(p, path);
  return p;
}

// A pool made over the pv model: `fill`, then `interrupted` crashed at the persistence event
// (and write-back choice) that leaves the most nodes of it linked but uncommitted. The
// crash image is the pool file.
template <class Fill, class Interrupted>
pool_spec interrupted_pool(const std::string& name, const fs::path& dir, Fill fill,
                           Interrupted interrupted) {
  pool_spec p;
  p.name = name;
  pv::model m(flintkv::kMinPoolSize);
  pv::scoped_activation active(m);
  std::unique_ptr<DB> db;
  Options o;
  o.create_if_missing = true;
  require(internal::open_region<model_config>({m.base(), m.size()}, o, &db), "model pool");
  recorder r(*db);
  fill(r);
  contents before = r.state;
  std::vector<std::byte> image;
  std::uint64_t most = 0;
  // Each random write-back leaves the link without the version about one time in four (the
  // two lines are drawn independently), so two dozen draws per event find such an image
  // wherever the write lands in the pool.
  m.set_event_hook([&](pv::event_kind, std::uint64_t event) {
    for (std::uint64_t choice = 0; choice < 24; ++choice) {
      std::vector<std::byte> i = choice == 0
                                     ? m.crash(pv::writeback::all)
                                     : m.crash(pv::writeback::random, event * 131 + choice);
      const std::uint64_t n = walk_list(i).uncommitted;
      if (n > most) {
        most = n;
        image = std::move(i);
      }
    }
  });
  interrupted(r);
  m.set_event_hook({});
  if (image.empty()) throw std::runtime_error(name + ": no crash image left an uncommitted node");
  p.candidates = {before, r.state};
  p.probe_keys = probe_keys(r.written);
  db.reset();
  const std::string path = (dir / (name + ".pool")).string();
  p.bytes.assign(reinterpret_cast<const char*>(image.data()),
                 reinterpret_cast<const char*>(image.data()) + image.size());
  test_support::write_file(path, p.bytes);
  describe_pool(p, path);
  if (p.report.uncommitted == 0) throw std::runtime_error(name + ": Check found no uncommitted node");
  return p;
}

// A directory under /dev/shm for this process's pools and trial files, removed at exit.
class scratch_dir {
 public:
  scratch_dir() : path_("/dev/shm/flintkv-corruption-" + std::to_string(::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const fs::path& scratch() {
  static const scratch_dir dir;
  return dir.path();
}
std::string trial_path() { return (scratch() / "trial.pool").string(); }
std::string child_stderr_path() { return (scratch() / "trial.stderr").string(); }

// The pools, made once per process.
struct pool_set {
  std::vector<pool_spec> pools;

  pool_set() {
    const fs::path& dir = scratch();
    pools.push_back(file_pool("puts", dir, fill_puts));
    pools.push_back(file_pool("batches", dir, fill_batches));
    pools.push_back(interrupted_pool("interrupted-put", dir, fill_mixed, [](recorder& r) {
      r.put("mix00050+", value_for("mix00050+", 1, 100));
    }));
    pools.push_back(interrupted_pool("interrupted-batch", dir, fill_mixed, [](recorder& r) {
      WriteBatch b;
      for (unsigned i = 0; i < 10; ++i) {
        std::string k = key_name("mix", i * 11);
        if (i % 4 == 3) {
          b.Delete(k);
        } else {
          b.Put(k, value_for(k, 1000 + i, 48));
        }
      }
      r.write(b);
    }));
  }
};

const pool_set& the_pools() {
  static const pool_set set;
  return set;
}

// ---- where a byte is --------------------------------------------------------------------

// Where a byte of a pool is: `field` names the kind of place (what failure classes are
// grouped by), `text` the place itself.
struct place {
  std::string field, text;
};

place describe_offset(const pool_spec& p, std::uint64_t o) {
  struct field { std::uint64_t at; const char* name; };
  static constexpr field header_fields[] = {
      {0, "magic"}, {8, "layout_version"}, {12, "reserved"}, {16, "pool_size"}, {24, "uuid"},
      {40, "layout_name"}, {72, "build_layout"}, {136, "root_offset"}, {144, "root_size"},
      {152, "chunk_table_offset"}, {160, "chunk_size"}, {168, "chunk_count"},
      {176, "heap_offset"}, {184, "checksum"}, {192, "state"}, {200, "(zeros)"}};
  if (o < format::header_size) {
    const field* f = &header_fields[0];
    for (const field& h : header_fields) {
      if (h.at <= o) f = &h;
    }
    const std::string name = "header." + std::string(f->name);
    return {name, name + "+" + std::to_string(o - f->at)};
  }
  if (o < format::chunk_table_offset) {
    static constexpr field root_fields[] = {{kRootFormat, "format"}, {kRootHead, "head"},
                                            {kRootCommit, "commit_version"},
                                            {kRootBatch, "batch_mode"}};
    const std::uint64_t r = o - format::root_offset;
    if (r >= kRootBytes) return {"root area (unused)", "root area (unused)+" + std::to_string(r)};
    for (const field& f : root_fields) {
      if (r >= f.at && r < f.at + W) {
        const std::string name = "root." + std::string(f.name);
        return {name, name + "+" + std::to_string(r - f.at)};
      }
    }
    return {"root (other)", "root+" + std::to_string(r)};
  }
  if (o < p.heap_offset) {
    const std::uint64_t c = (o - format::chunk_table_offset) / 8;
    if (c >= p.chunk_count) return {"chunk table padding", "chunk table padding"};
    format::chunk_tag t;
    std::memcpy(&t, p.bytes.data() + format::chunk_table_offset + c * 8, 8);
    return {t.kind() == format::chunk_kind::unassigned ? "tag of a free chunk"
                                                       : "tag of a chunk in use",
            "tag of chunk " + std::to_string(c) + " (kind " +
                std::to_string(static_cast<int>(t.kind())) + ", argument " +
                std::to_string(t.argument()) + ")+" + std::to_string(o % 8)};
  }
  for (const node_info& n : p.nodes) {
    if (o < n.offset || o >= n.offset + n.size) continue;
    const std::uint64_t r = o - n.offset;
    auto in_word = [&](std::uint64_t at) { return r >= at && r < at + W; };
    const std::string part = in_word(kNodeNext)              ? "next"
                             : in_word(kNodeVersion)         ? "version"
                             : in_word(kNodeSizes)           ? "sizes"
                             : r < kNodeHeader               ? "header"
                             : r < kNodeHeader + n.key.size() ? "key"
                                                              : "value";
    const std::uint64_t within = part == "key"     ? r - kNodeHeader
                                 : part == "value" ? r - kNodeHeader - n.key.size()
                                                   : r % W;
    const std::string kind = &n == &p.nodes.front() ? "head node"
                             : n.uncommitted        ? "uncommitted node"
                                                    : "node";
    return {kind + "." + part, kind + " " + hex(n.offset) + " (key " + shown(n.key) +
                                   ", version " + std::to_string(n.version) + ")." + part +
                                   "+" + std::to_string(within)};
  }
  if (o >= p.heap_offset + p.chunk_count * format::chunk_size) return {"unused tail", "unused tail"};
  const std::uint64_t c = (o - p.heap_offset) / format::chunk_size;
  return {"no node", "chunk " + std::to_string(c) + "+" +
                         hex((o - p.heap_offset) % format::chunk_size) + " (no node)"};
}

// ---- damage -----------------------------------------------------------------------------

enum class damage_kind { bit, byte, word, page_zero, page_garbage, truncate, extend };
enum class area { header, root, chunk_table, node, chunk };

struct damage_entry {
  damage_kind kind;
  const char* name;
  unsigned weight;
};
constexpr std::array<damage_entry, 7> kDamages{{
    {damage_kind::bit, "bit", 24},
    {damage_kind::byte, "byte", 18},
    {damage_kind::word, "word", 30},
    {damage_kind::page_zero, "zeroed page", 8},
    {damage_kind::page_garbage, "garbage page", 8},
    {damage_kind::truncate, "truncated", 6},
    {damage_kind::extend, "extended", 6},
}};

struct area_entry {
  area where;
  const char* name;
  unsigned weight;
};
constexpr std::array<area_entry, 5> kAreas{{
    {area::header, "header", 10},
    {area::root, "root", 10},
    {area::chunk_table, "chunk table", 10},
    {area::node, "node", 50},
    {area::chunk, "used chunk", 20},
}};

struct damage_plan {
  const char* kind = "";
  const char* area = "";
  std::string field;  // place::field of the damaged byte, or "file size"
  std::string text;
};

// A random offset in `where`'s used bytes.
std::uint64_t target_in(const pool_spec& p, area where, rng& r) {
  switch (where) {
    case area::header:
      return r.percent(80) ? r.below(sizeof(format::pool_header)) : r.below(format::header_size);
    case area::root:
      return format::root_offset + r.below(kRootBytes);
    case area::chunk_table: {
      // Mostly the tags of chunks in use (most of the table describes free chunks).
      const std::uint64_t c = r.percent(75) ? p.used_chunks[r.below(p.used_chunks.size())]
                                            : r.below(p.chunk_count);
      return format::chunk_table_offset + 8 * c + r.below(8);
    }
    case area::node: {
      // A quarter of the time a node that recovery treats specially (the head sentinel, a
      // node of the interrupted write); half the time the node's header words.
      const node_info& n = r.percent(25) ? p.special_nodes[r.below(p.special_nodes.size())]
                                         : p.nodes[r.below(p.nodes.size())];
      return n.offset + r.below(r.percent(50) ? kNodeHeader : n.size);
    }
    case area::chunk: {
      const std::uint64_t c = p.used_chunks[r.below(p.used_chunks.size())];
      return p.heap_offset + c * format::chunk_size + r.below(format::chunk_size);
    }
  }
  return 0;
}

// An 8-byte value to write over `old` at `word_offset`.
std::uint64_t garbage_word(const pool_spec& p, std::uint64_t word_offset, std::uint64_t old,
                           rng& r, std::string* how) {
  std::uint64_t v = 0;
  switch (r.below(6)) {
    case 0:
    case 1:
      v = r.next();
      *how = "random";
      break;
    case 2: {
      const std::uint64_t special[] = {
          0, ~std::uint64_t{0}, ~std::uint64_t{0} >> 1, internal::kMaxVersion, 1,
          // the uncommitted marker of another node
          internal::uncommitted_word(internal::in_node({p.nodes[r.below(p.nodes.size())].offset},
                                                       internal::word_field::version))
              .bits};
      v = special[r.below(std::size(special))];
      *how = "special";
      break;
    }
    case 3:
      v = old + (r.percent(50) ? 1 + r.below(16) : -(1 + r.below(16)));
      *how = "nearby";
      break;
    case 4: {
      // A word copied from another node (a misdirected write): its successor or version.
      const node_info& n = p.nodes[r.below(p.nodes.size())];
      const std::uint64_t from = n.offset + (r.percent(50) ? 0 : kNodeVersion);
      std::memcpy(&v, p.bytes.data() + from, sizeof v);
      *how = "another node's word";
      break;
    }
    default: {
      // A link back to the word's own node, as a valid successor word of that node (a
      // self-loop), or its plain offset elsewhere.
      v = p.nodes[r.below(p.nodes.size())].offset;
      *how = "its own node's offset";
      for (const node_info& n : p.nodes) {
        if (word_offset >= n.offset && word_offset < n.offset + n.size) {
          v = word_offset == n.offset
                  ? internal::offset_word({n.offset}, internal::in_node({n.offset},
                                                                        internal::word_field::next))
                        .bits
                  : n.offset;
        }
      }
      break;
    }
  }
  if (v == old) {
    v = ~old;
    *how += ", inverted";
  }
  return v;
}

// Damages `bytes` (a copy of p's) as `r` chooses; says what it did.
damage_plan apply_damage(const pool_spec& p, rng& r, std::vector<char>& bytes) {
  const damage_entry& d = r.pick(kDamages);
  const area_entry& a = r.pick(kAreas);
  damage_plan plan;
  plan.kind = d.name;
  plan.area = a.name;
  const std::uint64_t o = target_in(p, a.where, r);
  const place where = describe_offset(p, o);
  plan.field = where.field;
  const std::string at = " at " + hex(o) + " (" + where.text + ")";
  switch (d.kind) {
    case damage_kind::bit: {
      const unsigned bit = static_cast<unsigned>(r.below(8));
      bytes[o] = static_cast<char>(bytes[o] ^ (1 << bit));
      plan.text = "flipped bit " + std::to_string(bit) + at;
      break;
    }
    case damage_kind::byte: {
      const unsigned char old = static_cast<unsigned char>(bytes[o]);
      const unsigned char now = static_cast<unsigned char>(old ^ (1 + r.below(255)));
      bytes[o] = static_cast<char>(now);
      plan.text = "byte " + hex(old) + " -> " + hex(now) + at;
      break;
    }
    case damage_kind::word: {
      const std::uint64_t w = o & ~std::uint64_t{7};
      std::uint64_t old;
      std::memcpy(&old, bytes.data() + w, 8);
      std::string how;
      const std::uint64_t now = garbage_word(p, w, old, r, &how);
      std::memcpy(bytes.data() + w, &now, 8);
      plan.field = describe_offset(p, w).field;
      plan.text = "word " + hex(old) + " -> " + hex(now) + " (" + how + ") at " + hex(w) + " (" +
                  describe_offset(p, w).text + ")";
      break;
    }
    case damage_kind::page_zero:
    case damage_kind::page_garbage: {
      const std::uint64_t page = o & ~(format::page_size - 1);
      const std::uint64_t end = std::min<std::uint64_t>(page + format::page_size, bytes.size());
      const bool zero = d.kind == damage_kind::page_zero &&
                        std::any_of(bytes.begin() + page, bytes.begin() + end, [](char c) { return c != 0; });
      if (d.kind == damage_kind::page_zero && !zero) plan.kind = "garbage page";  // already zero
      for (std::uint64_t i = page; i < end; ++i) bytes[i] = zero ? 0 : static_cast<char>(r.next());
      plan.field = "page with " + plan.field;
      plan.text = std::string(zero ? "zeroed" : "filled with random bytes") + " the page at " +
                  hex(page) + ", holding" + at;
      break;
    }
    case damage_kind::truncate: {
      const std::uint64_t size = r.percent(50) ? o : bytes.size() - 1 - r.below(format::chunk_size);
      bytes.resize(size);
      plan.field = "file size";
      plan.text = "truncated to " + std::to_string(size) + " bytes" +
                  (size == o ? at : std::string(" (from the end)"));
      break;
    }
    case damage_kind::extend: {
      const std::uint64_t more = 1 + r.below(format::chunk_size);
      const bool garbage = r.percent(50);
      for (std::uint64_t i = 0; i < more; ++i) bytes.push_back(garbage ? static_cast<char>(r.next()) : 0);
      plan.field = "file size";
      plan.text = "extended by " + std::to_string(more) + (garbage ? " random" : " zero") + " bytes";
      break;
    }
  }
  return plan;
}

// ---- one session on a (damaged) pool, in the child --------------------------------------

struct session_plan {
  std::string path;
  std::string new_key, new_value;
};

// The first offset where the file differs from `expected`, or nullopt.
std::optional<std::uint64_t> first_difference(const std::string& path, const std::vector<char>& expected) {
  const std::vector<char> now = file_bytes(path);
  const std::size_t n = std::min(now.size(), expected.size());
  const auto [a, b] = std::mismatch(now.begin(), now.begin() + static_cast<std::ptrdiff_t>(n), expected.begin());
  if (a != now.begin() + static_cast<std::ptrdiff_t>(n)) return static_cast<std::uint64_t>(a - now.begin());
  if (now.size() != expected.size()) return n;
  return std::nullopt;
}

// Both scans and a Get of every key in `keys`, judged.
void read_everything(DB& db, const std::vector<std::string>& keys, std::size_t max_keys,
                     const std::string& session, trial_judge& j, trial_channel& ch) {
  for (const bool forward : {true, false}) {
    const std::string step = session + (forward ? "forward scan" : "backward scan");
    ch.step(step);
    j.at(step);
    std::unique_ptr<flintkv::Iterator> it = db.NewIterator();
    kv_list seen;
    if (forward) {
      it->SeekToFirst();
    } else {
      it->SeekToLast();
    }
    // One key more than any allowed state: enough to see that there are too many.
    while (it->Valid() && seen.size() <= max_keys) {
      seen.emplace_back(std::string(it->key()), std::string(it->value()));
      if (forward) {
        it->Next();
      } else {
        it->Prev();
      }
    }
    const Status end = it->status();
    ch.note(std::to_string(seen.size()) + " keys, then " + end.ToString());
    j.on_scan(forward, seen, end);
  }
  const std::string step = session + "get";
  ch.step(step);
  j.at(step);
  for (const std::string& k : keys) {
    std::string value;
    const Status s = db.Get(k, &value);
    if (!s.ok() && !s.IsNotFound()) ch.note("Get(" + shown(k) + "): " + s.ToString());
    j.on_get(k, s, value);
  }
}

void run_session(const pool_spec& pool, const session_plan& plan, const std::vector<char>& damaged,
                 trial_judge& j, trial_channel& ch) {
  ch.step("check");
  j.at("check");
  CheckReport report;
  Status s = DB::Check(plan.path, &report);
  ch.note("DB::Check: " + s.ToString());
  j.on_check(s);
  std::vector<char> expected = damaged;
  if (auto d = first_difference(plan.path, expected)) {
    j.on_changed("DB::Check", *d);
    expected = file_bytes(plan.path);
  }

  ch.step("open");
  j.at("open");
  std::unique_ptr<DB> db;
  s = DB::Open(Options{}, plan.path, &db);
  ch.note("DB::Open: " + s.ToString());
  if (!j.on_open(s)) {
    if (auto d = first_difference(plan.path, expected)) j.on_changed("a refused DB::Open", *d);
    return;
  }
  const std::vector<char> opened = file_bytes(plan.path);  // recovery may repair
  read_everything(*db, pool.probe_keys, pool.max_keys(), "", j, ch);
  if (auto d = first_difference(plan.path, opened)) j.on_changed("the reads (Get and iterators)", *d);
  if (j.damage_seen() || j.failed()) return;  // no writes to a pool known to be damaged

  ch.step("put");
  j.at("put");
  s = db->Put(plan.new_key, plan.new_value);
  ch.note("Put(" + shown(plan.new_key) + "): " + s.ToString());
  if (!j.on_put(plan.new_key, plan.new_value, s)) return;
  db.reset();

  ch.step("reopen");
  j.at("reopen");
  s = DB::Open(Options{}, plan.path, &db);
  ch.note("reopen: " + s.ToString());
  if (!j.on_reopen(s)) return;
  std::vector<std::string> keys = pool.probe_keys;
  keys.push_back(plan.new_key);
  read_everything(*db, keys, pool.max_keys() + 1, "reopened: ", j, ch);
}

// ---- trials -----------------------------------------------------------------------------

struct trial_result {
  trial_report report;
  const pool_spec* pool = nullptr;
  damage_plan damage;
};

std::string replay_line(const fuzz_config& c, std::uint64_t index, const trial_result& t) {
  return "CORRUPTION_REPLAY=" + std::to_string(c.seed) + ":" + std::to_string(index) + "  " +
         std::string(to_string(t.report.result)) +
         (t.report.step.empty() ? std::string() : " in " + t.report.step) +
         (t.report.detail.empty() ? std::string() : ": " + t.report.detail) +
         "  [pool " + t.pool->name + "; " + t.damage.text + "]";
}

// Runs `body` (judge, channel) in a child for the trial; what the child saw, classified.
template <class Session>
trial_report judged_in_child(const std::vector<contents>& candidates, Session session,
                             const fuzz_config& c, bool verbose) {
  return run_forked(
      [&](trial_channel& ch) {
        trial_judge j(candidates);
        session(j, ch);
        ch.verdict(j.verdict(), j.verdict_step(), j.detail());
      },
      c.limit, verbose, verbose ? "" : child_stderr_path());
}

trial_result run_trial(const fuzz_config& c, std::uint64_t index, bool verbose) {
  const pool_set& set = the_pools();
  rng r(mix(c.seed) ^ mix(index + 0x5eed));
  trial_result t;
  t.pool = &set.pools[r.below(set.pools.size())];
  std::vector<char> bytes = t.pool->bytes;
  t.damage = apply_damage(*t.pool, r, bytes);
  session_plan plan;
  plan.path = trial_path();
  plan.new_key = t.pool->probe_keys[r.below(t.pool->probe_keys.size())] + "+new";
  plan.new_value = value_for(plan.new_key, static_cast<unsigned>(index), 8 + r.below(120));
  test_support::write_file(plan.path, bytes);
  if (verbose) {
    std::fprintf(stderr, "trial %llu:%llu: pool %s; %s\n", static_cast<unsigned long long>(c.seed),
                 static_cast<unsigned long long>(index), t.pool->name.c_str(), t.damage.text.c_str());
  }
  t.report = judged_in_child(
      t.pool->candidates,
      [&](trial_judge& j, trial_channel& ch) { run_session(*t.pool, plan, bytes, j, ch); }, c,
      verbose);
  return t;
}

// Counts of outcomes for one row of the summary.
struct tally {
  std::map<outcome, std::uint64_t> by_outcome;
  std::uint64_t total = 0, failed = 0;
  void add(outcome o) {
    ++by_outcome[o];
    ++total;
    if (is_failure(o)) ++failed;
  }
  std::string line() const {
    std::string s = std::to_string(total) + " trials:";
    for (outcome o : kOutcomes) {
      auto it = by_outcome.find(o);
      if (it != by_outcome.end()) s += " " + std::string(to_string(o)) + " " + std::to_string(it->second) + ",";
    }
    if (s.back() == ',') s.pop_back();
    return s;
  }
};

// ---- the classifier's own tests (its teeth) ---------------------------------------------

contents abc() { return {{"a", "1"}, {"b", "2"}, {"c", "3"}}; }

// A judge that saw Check and Open succeed.
trial_judge opened(std::vector<contents> candidates) {
  trial_judge j(std::move(candidates));
  j.at("check");
  j.on_check(Status::OK());
  j.at("open");
  EXPECT_TRUE(j.on_open(Status::OK()));
  return j;
}

TEST(CorruptionJudgeTest, ExactReadsAreIntact) {
  trial_judge j = opened({abc()});
  j.on_scan(true, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, Status::OK());
  j.on_scan(false, {{"c", "3"}, {"b", "2"}, {"a", "1"}}, Status::OK());
  j.on_get("b", Status::OK(), "2");
  j.on_get("x", Status::NotFound("x"), "");
  EXPECT_TRUE(j.on_put("d", "4", Status::OK()));
  EXPECT_TRUE(j.on_reopen(Status::OK()));
  j.on_get("d", Status::OK(), "4");
  EXPECT_EQ(j.verdict(), outcome::intact) << j.detail();
}

TEST(CorruptionJudgeTest, AWrongValueIsWrongData) {
  trial_judge j = opened({abc()});
  j.at("get");
  j.on_get("b", Status::OK(), "X");
  EXPECT_EQ(j.verdict(), outcome::wrong_data);
  EXPECT_EQ(j.verdict_step(), "get");
  EXPECT_NE(j.detail().find("Get('b') returned 'X', expected '2'"), std::string::npos) << j.detail();
}

TEST(CorruptionJudgeTest, AMissingOrExtraKeyIsWrongData) {
  for (const kv_list& seen : {kv_list{{"a", "1"}, {"c", "3"}},
                              kv_list{{"a", "1"}, {"b", "2"}},
                              kv_list{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}},
                              kv_list{{"a", "1"}, {"c", "3"}, {"b", "2"}}}) {
    trial_judge j = opened({abc()});
    j.on_scan(true, seen, Status::OK());
    EXPECT_EQ(j.verdict(), outcome::wrong_data) << seen.size() << " keys";
  }
  trial_judge absent = opened({abc()});
  absent.on_get("a", Status::NotFound("a"), "");
  EXPECT_EQ(absent.verdict(), outcome::wrong_data);
  trial_judge present = opened({abc()});
  present.on_get("x", Status::OK(), "1");
  EXPECT_EQ(present.verdict(), outcome::wrong_data);
}

TEST(CorruptionJudgeTest, CorruptionAfterARightPrefixIsDetected) {
  trial_judge j(std::vector<contents>{abc()});
  j.at("check");
  j.on_check(Status::Corruption("/p: node at offset 4096: bad checksum"));
  j.at("open");
  EXPECT_TRUE(j.on_open(Status::OK()));
  j.on_scan(true, {{"a", "1"}}, Status::Corruption("/p: node at offset 8192"));
  j.on_get("a", Status::OK(), "1");
  j.on_get("b", Status::Corruption("/p: node at offset 8192"), "");
  EXPECT_EQ(j.verdict(), outcome::detected) << j.detail();
  EXPECT_EQ(j.verdict_step(), "check");
}

TEST(CorruptionJudgeTest, CorruptionAfterAWrongReadIsStillWrongData) {
  trial_judge j(std::vector<contents>{abc()});
  j.on_check(Status::Corruption("damaged"));
  EXPECT_TRUE(j.on_open(Status::OK()));
  j.on_scan(true, {{"a", "1"}, {"b", "X"}}, Status::Corruption("damaged"));
  EXPECT_EQ(j.verdict(), outcome::wrong_data);
}

TEST(CorruptionJudgeTest, APendingWriteMayGoEitherWayButOneWayOnly) {
  contents after = abc();
  after["b"] = "new";
  after["d"] = "4";
  trial_judge before_state = opened({abc(), after});
  before_state.on_scan(true, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, Status::OK());
  before_state.on_get("d", Status::NotFound("d"), "");
  EXPECT_EQ(before_state.verdict(), outcome::intact) << before_state.detail();
  trial_judge after_state = opened({abc(), after});
  after_state.on_get("b", Status::OK(), "new");
  after_state.on_get("d", Status::OK(), "4");
  EXPECT_EQ(after_state.verdict(), outcome::intact) << after_state.detail();
  trial_judge mixed = opened({abc(), after});
  mixed.on_get("b", Status::OK(), "new");  // the write happened ...
  mixed.on_get("d", Status::NotFound("d"), "");  // ... and did not
  EXPECT_EQ(mixed.verdict(), outcome::wrong_data);
}

TEST(CorruptionJudgeTest, ClassifiesStatusesAndChanges) {
  trial_judge header(std::vector<contents>{abc()});
  header.on_check(Status::InvalidArgument("/p is not a flint pool"));
  EXPECT_FALSE(header.on_open(Status::InvalidArgument("/p is not a flint pool")));
  EXPECT_EQ(header.verdict(), outcome::detected);

  trial_judge io(std::vector<contents>{abc()});
  io.on_check(Status::Corruption("damaged"));
  EXPECT_FALSE(io.on_open(Status::IOError("internal error: vector")));
  EXPECT_EQ(io.verdict(), outcome::wrong_status);

  trial_judge read_arg = opened({abc()});
  read_arg.on_get("a", Status::InvalidArgument("huh"), "");
  EXPECT_EQ(read_arg.verdict(), outcome::wrong_status);

  trial_judge disagree(std::vector<contents>{abc()});
  disagree.on_check(Status::OK());
  disagree.at("open");
  EXPECT_FALSE(disagree.on_open(Status::Corruption("chunk table")));
  EXPECT_EQ(disagree.verdict(), outcome::disagree);

  trial_judge late = opened({abc()});
  late.on_scan(true, {{"a", "1"}, {"b", "2"}, {"c", "3"}}, Status::OK());
  EXPECT_TRUE(late.on_put("d", "4", Status::OK()));
  EXPECT_FALSE(late.on_reopen(Status::Corruption("list out of order")));
  EXPECT_EQ(late.verdict(), outcome::late);

  trial_judge changed(std::vector<contents>{abc()});
  changed.on_check(Status::Corruption("damaged"));
  changed.on_changed("DB::Check", 4096);
  EXPECT_EQ(changed.verdict(), outcome::changed);
  EXPECT_NE(changed.detail().find("4096"), std::string::npos);
}

// ---- the forked runner's own tests ------------------------------------------------------

fuzz_config short_limit() {
  fuzz_config c;
  c.limit = std::chrono::milliseconds(300);
  return c;
}

trial_report in_child(const std::function<void(trial_channel&)>& body, const fuzz_config& c) {
  return run_forked(body, c.limit, false, child_stderr_path());
}

TEST(ForkedTrialTest, PassesTheVerdictThrough) {
  trial_report r = in_child([](trial_channel& ch) {
    ch.step("get");
    ch.verdict(outcome::wrong_data, "get", "Get('k') returned 'x'");
  }, short_limit());
  EXPECT_EQ(r.result, outcome::wrong_data);
  EXPECT_EQ(r.step, "get");
  EXPECT_EQ(r.detail, "Get('k') returned 'x'");
}

TEST(ForkedTrialTest, ASignalIsACrash) {
  // The default limit: under AddressSanitizer the child's SEGV handler writes a symbolized
  // report and exits with 1, which can take longer than a short limit.
  trial_report r = in_child([](trial_channel& ch) {
    ch.step("open");
    std::raise(SIGSEGV);
  }, fuzz_config{});
  EXPECT_EQ(r.result, outcome::crash) << r.detail;
  EXPECT_EQ(r.step, "open");
}

TEST(ForkedTrialTest, ASanitizerReportIsACrash) {
  trial_report r = in_child([](trial_channel& ch) {
    ch.step("open");
    std::fprintf(stderr, "engine.hpp:357:5: runtime error: load of misaligned address\n");
    std::fflush(stderr);
    ch.verdict(outcome::intact, "", "");
  }, short_limit());
  EXPECT_EQ(r.result, outcome::crash);
  EXPECT_NE(r.detail.find("misaligned"), std::string::npos) << r.detail;
}

TEST(ForkedTrialTest, AnEndlessStepIsAHang) {
  trial_report r = in_child([](trial_channel& ch) {
    ch.step("check");
    for (;;) ::pause();  // until the trial's timer ends it
  }, short_limit());
  EXPECT_EQ(r.result, outcome::hang) << r.detail;
  EXPECT_EQ(r.step, "check");
}

TEST(ForkedTrialTest, AChildThatBlocksItsTimerIsKilledAtTheDeadline) {
  trial_report r = in_child([](trial_channel& ch) {
    ch.step("open");
    sigset_t alarm;
    sigemptyset(&alarm);
    sigaddset(&alarm, SIGALRM);
    ::sigprocmask(SIG_BLOCK, &alarm, nullptr);
    for (;;) ::pause();  // nothing but SIGKILL ends it
  }, short_limit());
  EXPECT_EQ(r.result, outcome::hang) << r.detail;
  EXPECT_NE(r.detail.find("killed"), std::string::npos) << r.detail;
}

// ---- the fuzz test ----------------------------------------------------------------------

TEST(CorruptionFuzzTest, UndamagedPoolsAreIntact) {
  const fuzz_config c;
  for (const pool_spec& p : the_pools().pools) {
    SCOPED_TRACE(p.name);
    EXPECT_GT(p.nodes.size(), 100u);
    EXPECT_EQ(p.report.versions + p.report.uncommitted + 1, p.nodes.size())
        << "the test reads the list as Check does";
    if (p.candidates.size() > 1) {
      EXPECT_GT(p.report.uncommitted, 0u);
      EXPECT_NE(p.candidates.front(), p.candidates.back());
    }
    session_plan plan{trial_path(), "zz-new", "new value"};
    test_support::write_file(plan.path, p.bytes);
    trial_report r = judged_in_child(
        p.candidates, [&](trial_judge& j, trial_channel& ch) { run_session(p, plan, p.bytes, j, ch); },
        c, false);
    EXPECT_EQ(r.result, outcome::intact) << r.step << ": " << r.detail;
  }
}

// The whole pipeline (child, pipe, judge) catches a read that differs from what was
// written: here the store is right and the expectation is off by one value, which the
// judge cannot tell from a store that returns one wrong value.
TEST(CorruptionFuzzTest, CatchesAWrongReadEndToEnd) {
  const fuzz_config c;
  const pool_spec& p = the_pools().pools.front();
  std::vector<contents> wrong = p.candidates;
  auto victim = std::next(wrong.front().begin(), static_cast<std::ptrdiff_t>(wrong.front().size() / 2));
  victim->second.back() ^= 1;  // one bit of one value
  session_plan plan{trial_path(), "zz-new", "new value"};
  test_support::write_file(plan.path, p.bytes);
  trial_report r = judged_in_child(
      wrong, [&](trial_judge& j, trial_channel& ch) { run_session(p, plan, p.bytes, j, ch); }, c,
      false);
  EXPECT_EQ(r.result, outcome::wrong_data) << r.detail;
  EXPECT_EQ(r.step, "forward scan");
  EXPECT_NE(r.detail.find(victim->first), std::string::npos) << r.detail;
}

TEST(CorruptionFuzzTest, DamagedPoolsAreDetectedOrIntact) {
  fuzz_config c;
  if (c.replay) {
    c.seed = c.replay->first;
    trial_result t = run_trial(c, c.replay->second, /*verbose=*/true);
    std::printf("%s\n", replay_line(c, c.replay->second, t).c_str());
    EXPECT_FALSE(is_failure(t.report.result)) << replay_line(c, c.replay->second, t);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  tally all;
  std::map<std::string, tally> by_kind, by_area, by_pool;
  struct failure_class {
    std::uint64_t count = 0;
    std::string first;
  };
  std::map<std::string, failure_class> classes;
  for (std::uint64_t i = 0; i < c.trials; ++i) {
    trial_result t = run_trial(c, i, false);
    const outcome o = t.report.result;
    all.add(o);
    by_kind[t.damage.kind].add(o);
    by_area[t.damage.area].add(o);
    by_pool[t.pool->name].add(o);
    if (is_failure(o)) {
      const std::string line = replay_line(c, i, t);
      std::printf("%s\n", line.c_str());
      // A class: the outcome, the step it showed in, and the kind of place damaged.
      std::string step = t.report.step;
      if (step.rfind("reopened: ", 0) == 0) step = "reopened";
      failure_class& fc = classes[std::string(to_string(o)) + " in " + (step.empty() ? "?" : step) +
                                  " <- " + t.damage.field];
      if (fc.count++ == 0) fc.first = line;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("corruption fuzz, seed %llu: %s (%.1f s)\n", static_cast<unsigned long long>(c.seed),
              all.line().c_str(), seconds);
  for (const auto& [name, t] : by_kind) std::printf("  damage %-13s %s\n", name.c_str(), t.line().c_str());
  for (const auto& [name, t] : by_area) std::printf("  area   %-13s %s\n", name.c_str(), t.line().c_str());
  for (const auto& [name, t] : by_pool) std::printf("  pool   %-17s %s\n", name.c_str(), t.line().c_str());
  if (!classes.empty()) std::printf("failure classes (first replay of each):\n");
  for (const auto& [name, fc] : classes) {
    std::printf("  %llu x %s\n    %s\n", static_cast<unsigned long long>(fc.count), name.c_str(),
                fc.first.c_str());
  }
  EXPECT_EQ(all.failed, 0u) << all.line();
}

}  // namespace

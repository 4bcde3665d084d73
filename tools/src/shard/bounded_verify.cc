// bounded_verify.cc: see bounded_verify.h.
#include "shard/bounded_verify.h"

#include "shard/bounded_query.h"
#include "shard/h5_util.h"
#include "shard/self_contained.h"
#include "shard/shard_rules.h"

namespace mm::pack {
namespace {

// The child's answer: verdict code, message, bad sample, key count, keys.
std::string Encode(const Status& st, int64_t sample, const std::vector<std::string>& keys) {
  std::string out;
  PutInt(static_cast<int64_t>(st.code()), &out);
  PutString(st.message(), &out);
  PutInt(sample, &out);
  PutInt(static_cast<int64_t>(keys.size()), &out);
  for (const std::string& k : keys) PutString(k, &out);
  return out;
}

Status Decode(const std::string& path, const std::string& in, BoundedVerdict* verdict) {
  const Status malformed = Status::Corruption(path + ": malformed answer from the verifier");
  size_t pos = 0;
  int64_t code = 0, count = 0;
  std::string message;
  if (!GetInt(in, &pos, &code) || !GetString(in, &pos, &message) ||
      !GetInt(in, &pos, &verdict->sample) || !GetInt(in, &pos, &count) || code < 0 ||
      code > static_cast<int64_t>(StatusCode::kOutOfRange) || count < 0 ||
      static_cast<uint64_t>(count) > (in.size() - pos) / sizeof(int64_t)) {
    return malformed;
  }
  verdict->keys_of_shard.resize(static_cast<size_t>(count));
  for (std::string& k : verdict->keys_of_shard) {
    if (!GetString(in, &pos, &k)) return malformed;
  }
  if (pos != in.size()) return malformed;
  return code == 0 ? Status::OK() : Status(static_cast<StatusCode>(code), message);
}

// The reader's rules on the shard (shard_rules.h).
Status CheckRules(const std::string& path, const ShardExpectation& e,
                  const mm::reader::SetInfo& info) {
  MM_ASSIGN_OR_RETURN(h5::File file,
                      h5::Own<h5::File>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT),
                                        "not a readable HDF5 file", StatusCode::kCorruption));
  return CheckShardRules(file.get(), e.file, e.samples, e.captions, e.tokens, info);
}

}  // namespace

Status VerifyShardBounded(ShardVerifier* verifier, std::unordered_set<std::string>* keys,
                          const std::string& path, int64_t file_bytes, const ShardExpectation& e,
                          const mm::reader::SetInfo& info, BoundedVerdict* verdict) {
  *verdict = BoundedVerdict();
  auto query = [&]() -> Result<std::string> {
    int64_t sample = -1;
    Status st = CheckShardSelfContained(path);  // nothing outside the file is read
    if (st.ok()) st = verifier->Verify(path, e, &sample);
    if (st.ok()) st = CheckRules(path, e, info);
    return Encode(st, sample, verifier->keys_of_shard());
  };
  MM_ASSIGN_OR_RETURN(std::string answer, RunBounded(path, BoundsForFile(file_bytes), query));
  Status verdict_status = Decode(path, answer, verdict);
  if (verdict_status.ok()) {
    for (const std::string& k : verdict->keys_of_shard) {
      if (!keys->insert(k).second) {  // the child checked; a duplicate here is a bad answer
        return Status::Corruption(path + ": key '" + k + "' is not unique in the set");
      }
    }
  }
  return verdict_status;
}

}  // namespace mm::pack

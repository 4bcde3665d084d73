// tokenizer_json.cc: see tokenizer_json.h. Each component is a small function object built
// from its JSON once (the normalizers and pre-tokenizers in tokenizer_json_normalizers.cc and
// tokenizer_json_pre_tokenizers.cc); Encode runs them in the library's order.
#include "text/tokenizer_json.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <utility>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/regex.h"
#include "text/tokenizer_json_parts.h"
#include "text/unicode_text.h"

namespace mm::pack {

using tokenizer_json::Bad;
using tokenizer_json::BoolOr;
using tokenizer_json::InMask;
using tokenizer_json::json;
using tokenizer_json::MakeNormalizer;
using tokenizer_json::MakePreTokenizer;
using tokenizer_json::Normalizer;
using tokenizer_json::NotImplemented;
using tokenizer_json::Pieces;
using tokenizer_json::PreTokenizer;
using tokenizer_json::StringOr;
using tokenizer_json::TypeOf;

// ---- the whole --------------------------------------------------------------------------

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false;
};

struct TokenizerJson::Impl {
  std::vector<AddedToken> added;
  Normalizer normalizer;
  std::vector<PreTokenizer> pre_tokenizer;  // one, or none
  // The model.
  bool wordpiece = false;
  std::unordered_map<std::string, int32_t> vocab;
  BpeMerges merges;
  std::optional<int32_t> model_unk;  // the model's unk_token id
  std::string prefix, suffix;        // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  int max_chars = 100;                 // WordPiece max_input_chars_per_word
  std::vector<int32_t> before, after;  // the post-processor's specials

  Status Model(const std::string& word, std::vector<int32_t>* ids) const;
  Status Bpe(const std::string& word, std::vector<int32_t>* ids) const;
  Status WordPiece(const std::string& word, std::vector<int32_t>* ids) const;
  Status Text(std::string_view text, bool normalized_tokens_only, std::vector<int32_t>* ids) const;
};

namespace {

bool IsWordChar(char32_t c) { return c == '_' || InMask(c, U_GC_L_MASK | U_GC_N_MASK); }

// The added tokens of `tokens` in `text`: leftmost-longest, non-overlapping, as tokenizers'
// AddedVocabulary::find_matches: (token index or -1 for text, begin, end).
std::vector<std::tuple<int, size_t, size_t>> FindAdded(
    std::string_view text, const std::vector<const AddedToken*>& tokens) {
  std::vector<std::tuple<int, size_t, size_t>> out;
  size_t done = 0;
  size_t from = 0;
  while (from < text.size()) {
    int best = -1;
    size_t best_at = std::string_view::npos, best_len = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const std::string& c = tokens[t]->content;
      if (c.empty()) continue;
      const size_t at = text.find(c, from);
      if (at == std::string_view::npos) continue;
      if (at < best_at || (at == best_at && c.size() > best_len)) {
        best = static_cast<int>(t);
        best_at = at;
        best_len = c.size();
      }
    }
    if (best < 0) break;
    size_t begin = best_at, end = best_at + best_len;
    from = end;
    const AddedToken& tok = *tokens[best];
    if (tok.single_word) {
      const std::u32string before = DecodeUtf8(text.substr(0, begin));
      const std::u32string after = DecodeUtf8(text.substr(end));
      if ((!before.empty() && IsWordChar(before.back())) ||
          (!after.empty() && IsWordChar(after.front()))) {
        continue;
      }
    }
    if (tok.lstrip) {
      const std::u32string before = DecodeUtf8(text.substr(0, begin));
      size_t n = before.size();
      while (n > 0 && IsWhiteSpace(before[n - 1])) --n;
      const size_t strip_begin = EncodeUtf8(std::u32string_view(before).substr(0, n)).size();
      begin = std::max(strip_begin, done);
    }
    if (tok.rstrip) {
      const std::u32string after = DecodeUtf8(text.substr(end));
      size_t n = 0;
      while (n < after.size() && IsWhiteSpace(after[n])) ++n;
      end += EncodeUtf8(std::u32string_view(after).substr(0, n)).size();
      from = end;
    }
    if (begin > done) out.emplace_back(-1, done, begin);
    out.emplace_back(best, begin, end);
    done = end;
  }
  if (done < text.size()) out.emplace_back(-1, done, text.size());
  return out;
}

}  // namespace

Status TokenizerJson::Impl::Bpe(const std::string& word, std::vector<int32_t>* ids) const {
  if (ignore_merges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      ids->push_back(it->second);
      return Status::OK();
    }
  }
  std::vector<int32_t> w;
  std::optional<int32_t> unk;  // a pending unknown (fuse_unk joins a run of them)
  const std::u32string chars = DecodeUtf8(word);
  for (size_t i = 0; i < chars.size(); ++i) {
    std::string s;
    AppendUtf8(chars[i], &s);
    const std::string raw = s;
    if (i > 0) s = prefix + s;
    if (i + 1 == chars.size()) s += suffix;
    auto it = vocab.find(s);
    if (it != vocab.end()) {
      if (unk) w.push_back(*unk);
      unk.reset();
      w.push_back(it->second);
      continue;
    }
    if (byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        auto bt = vocab.find(name);
        if (bt == vocab.end()) break;
        bytes.push_back(bt->second);
      }
      if (bytes.size() == s.size()) {
        w.insert(w.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (model_unk) {
      if (unk && !fuse_unk) w.push_back(*unk);
      unk = *model_unk;
    }
  }
  if (unk) w.push_back(*unk);
  merges.Apply(&w);
  ids->insert(ids->end(), w.begin(), w.end());
  return Status::OK();
}

Status TokenizerJson::Impl::WordPiece(const std::string& word, std::vector<int32_t>* ids) const {
  const std::u32string chars = DecodeUtf8(word);
  if (static_cast<int>(chars.size()) > max_chars) {
    ids->push_back(*model_unk);
    return Status::OK();
  }
  std::vector<int32_t> sub;
  size_t start = 0;  // in characters
  while (start < chars.size()) {
    size_t end = chars.size();
    std::optional<int32_t> found;
    while (start < end) {
      std::string s = EncodeUtf8(std::u32string_view(chars).substr(start, end - start));
      if (start > 0) s = prefix + s;
      auto it = vocab.find(s);
      if (it != vocab.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (!found) {
      ids->push_back(*model_unk);
      return Status::OK();
    }
    sub.push_back(*found);
    start = end;
  }
  ids->insert(ids->end(), sub.begin(), sub.end());
  return Status::OK();
}

Status TokenizerJson::Impl::Model(const std::string& word, std::vector<int32_t>* ids) const {
  return wordpiece ? WordPiece(word, ids) : Bpe(word, ids);
}

// Normalised text (after the unnormalized added tokens are out): the normalized added tokens
// split out, then each piece normalised, pre-tokenized and modelled.
Status TokenizerJson::Impl::Text(std::string_view text, bool /*unused*/,
                                 std::vector<int32_t>* ids) const {
  MM_ASSIGN_OR_RETURN(std::u32string normal, normalizer(DecodeUtf8(text)));
  const std::string n = EncodeUtf8(normal);
  std::vector<const AddedToken*> normalized;
  for (const AddedToken& t : added) {
    if (t.normalized) normalized.push_back(&t);
  }
  for (const auto& [t, b, e] : FindAdded(n, normalized)) {
    if (t >= 0) {
      ids->push_back(normalized[t]->id);
      continue;
    }
    Pieces pieces = {n.substr(b, e - b)};
    for (const PreTokenizer& p : pre_tokenizer) MM_RETURN_NOT_OK(p(&pieces));
    for (const std::string& w : pieces) MM_RETURN_NOT_OK(Model(w, ids));
  }
  return Status::OK();
}

TokenizerJson::TokenizerJson() : impl_(std::make_unique<Impl>()) {}
TokenizerJson::~TokenizerJson() = default;

namespace {

// The specials the post-processor puts around a single sequence.
Status PostProcessor(const json& j, const std::unordered_map<std::string, int32_t>& ids,
                     std::vector<int32_t>* before, std::vector<int32_t>* after) {
  if (j.is_null()) return Status::OK();
  const std::string type = TypeOf(j);
  auto pair_id = [&](const char* key) -> Result<int32_t> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return Bad(type + "." + key + " is not [token, id]");
    }
    return (*it)[1].get<int32_t>();
  };
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    MM_ASSIGN_OR_RETURN(int32_t cls, pair_id("cls"));
    MM_ASSIGN_OR_RETURN(int32_t sep, pair_id("sep"));
    before->insert(before->begin(), cls);
    after->push_back(sep);
    return Status::OK();
  }
  if (type == "ByteLevel") return Status::OK();
  if (type == "TemplateProcessing") {
    const json single = j.value("single", json::array());
    const json specials = j.value("special_tokens", json::object());
    std::vector<int32_t> b, a;
    bool seen_sequence = false;
    for (const json& piece : single) {
      if (piece.contains("Sequence")) {
        if (seen_sequence) return Bad("TemplateProcessing.single with two sequences");
        seen_sequence = true;
        continue;
      }
      if (!piece.contains("SpecialToken")) return Bad("TemplateProcessing.single piece");
      const std::string name = StringOr(piece["SpecialToken"], "id", "");
      auto sp = specials.find(name);
      if (sp == specials.end() || !sp->contains("ids") || !(*sp)["ids"].is_array()) {
        return Bad("TemplateProcessing special token '" + name + "' without ids");
      }
      for (const json& id : (*sp)["ids"]) (seen_sequence ? a : b).push_back(id.get<int32_t>());
    }
    before->insert(before->begin(), b.begin(), b.end());
    after->insert(after->end(), a.begin(), a.end());
    return Status::OK();
  }
  if (type == "Sequence") {
    for (const json& p : j.value("processors", json::array())) {
      MM_RETURN_NOT_OK(PostProcessor(p, ids, before, after));
    }
    return Status::OK();
  }
  return NotImplemented("post_processor", j);
}

// merges as ["a b", ...] or [["a", "b"], ...].
Result<std::vector<std::pair<std::string, std::string>>> ParseMerges(const json& model) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Bad("merge '" + s + "' is not two tokens");
      }
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad("a merge is neither \"a b\" nor [a, b]");
    }
  }
  return out;
}

using Ids = std::unordered_map<std::string, int32_t>;

// The model's type and vocabulary into `m`; *max_id: the largest id.
Status ReadVocab(const json& model, TokenizerJson::Impl* m, int32_t* max_id) {
  if (!model.is_object() || !model.contains("vocab") || !model["vocab"].is_object()) {
    return Bad("no model with a vocab");
  }
  std::string type = TypeOf(model);
  if (type.empty()) type = model.contains("merges") ? "BPE" : "WordPiece";
  if (type != "BPE" && type != "WordPiece") return NotImplemented("model", model);
  m->wordpiece = type == "WordPiece";
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return Bad("vocab id of '" + it.key() + "'");
    const int32_t id = it.value().get<int32_t>();
    if (id < 0) return Bad("negative vocab id of '" + it.key() + "'");
    m->vocab[it.key()] = id;
    *max_id = std::max(*max_id, id);
  }
  return Status::OK();
}

// The document's added_tokens into `m` and `by_content` (content -> id); *max_id grows.
Status ReadAddedTokens(const json& doc, TokenizerJson::Impl* m, Ids* by_content, int32_t* max_id) {
  for (const json& a : doc.value("added_tokens", json::array())) {
    AddedToken tok;
    if (!a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string()) {
      return Bad("an added token without id and content");
    }
    tok.id = a["id"].get<int32_t>();
    tok.content = a["content"].get<std::string>();
    tok.single_word = BoolOr(a, "single_word", false);
    tok.lstrip = BoolOr(a, "lstrip", false);
    tok.rstrip = BoolOr(a, "rstrip", false);
    tok.normalized = BoolOr(a, "normalized", !BoolOr(a, "special", false));
    *max_id = std::max(*max_id, tok.id);
    (*by_content)[tok.content] = tok.id;
    m->added.push_back(std::move(tok));
  }
  return Status::OK();
}

// The BPE model's settings and merges into `m` (the vocabulary read).
Status ReadBpe(const json& model, TokenizerJson::Impl* m) {
  m->prefix = StringOr(model, "continuing_subword_prefix", "");
  m->suffix = StringOr(model, "end_of_word_suffix", "");
  m->fuse_unk = BoolOr(model, "fuse_unk", false);
  m->byte_fallback = BoolOr(model, "byte_fallback", false);
  m->ignore_merges = BoolOr(model, "ignore_merges", false);
  if (model.contains("dropout") && model["dropout"].is_number() &&
      model["dropout"].get<double>() > 0) {
    return Status::Unsupported("tokenizer.json: BPE dropout (random merges) is not repeatable");
  }
  MM_ASSIGN_OR_RETURN(auto merges, ParseMerges(model));
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = m->vocab.find(a), ib = m->vocab.find(b);
    const std::string joined = a + b.substr(std::min(m->prefix.size(), b.size()));
    auto ij = m->vocab.find(joined);
    if (ia == m->vocab.end() || ib == m->vocab.end() || ij == m->vocab.end()) {
      return Bad("merge '" + a + " " + b + "' of tokens outside the vocab");
    }
    m->merges.Add(ia->second, ib->second, ij->second, static_cast<int32_t>(r));
  }
  return Status::OK();
}

// The model's unk_token, then the WordPiece or BPE settings, into `m`.
Status ReadModel(const json& model, TokenizerJson::Impl* m) {
  const std::string unk = StringOr(model, "unk_token", "");
  if (!unk.empty()) {
    auto it = m->vocab.find(unk);
    if (it == m->vocab.end()) return Bad("unk_token '" + unk + "' is not in the vocab");
    m->model_unk = it->second;
  }
  if (!m->wordpiece) return ReadBpe(model, m);
  if (!m->model_unk) return Bad("a WordPiece model without unk_token");
  m->prefix = StringOr(model, "continuing_subword_prefix", "##");
  m->max_chars = model.value("max_input_chars_per_word", 100);
  return Status::OK();
}

// The first of `names` that is a token, by content.
std::optional<int32_t> Named(const Ids& by_content, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = by_content.find(n);
    if (it != by_content.end()) return it->second;
  }
  return std::nullopt;
}

// unk: the model's; else the added token the library's tokenizer classes call unk_token;
// else (byte-level BPE: nothing is unknown) eos, as GPT-2's class does; else 0.
int32_t UnkId(const TokenizerJson::Impl& m, const Ids& by_content, int32_t eos_id) {
  std::optional<int32_t> unk_id = m.model_unk;
  if (!unk_id) unk_id = Named(by_content, {"<unk>", "[UNK]", "<|unk|>"});
  if (!unk_id && eos_id >= 0) unk_id = eos_id;
  return unk_id.value_or(0);
}

// pad: the file's padding.pad_id; else a token named as the library's classes name it; else
// unk (also for an id outside the vocabulary).
int32_t PadId(const json& doc, const Ids& by_content, int32_t unk_id, int32_t vocab_size) {
  std::optional<int32_t> pad;
  const json padding = doc.value("padding", json());
  if (padding.is_object() && padding.contains("pad_id") && padding["pad_id"].is_number_integer()) {
    pad = padding["pad_id"].get<int32_t>();
  }
  if (!pad) pad = Named(by_content, {"<pad>", "[PAD]", "<|pad|>", "<|padding|>"});
  const int32_t pad_id = pad.value_or(unk_id);
  return pad_id < 0 || pad_id >= vocab_size ? unk_id : pad_id;
}

}  // namespace

Result<std::unique_ptr<TokenizerJson>> TokenizerJson::FromSerialized(std::string json_bytes) {
  json doc = json::parse(json_bytes, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("not a JSON object");
  std::unique_ptr<TokenizerJson> t(new TokenizerJson());
  Impl& m = *t->impl_;
  const json model = doc.value("model", json());
  int32_t max_id = -1;
  MM_RETURN_NOT_OK(ReadVocab(model, &m, &max_id));
  Ids by_content = m.vocab;
  MM_RETURN_NOT_OK(ReadAddedTokens(doc, &m, &by_content, &max_id));
  MM_RETURN_NOT_OK(ReadModel(model, &m));
  MM_ASSIGN_OR_RETURN(m.normalizer, MakeNormalizer(doc.value("normalizer", json())));
  MM_ASSIGN_OR_RETURN(PreTokenizer pre, MakePreTokenizer(doc.value("pre_tokenizer", json())));
  m.pre_tokenizer.push_back(std::move(pre));
  MM_RETURN_NOT_OK(
      PostProcessor(doc.value("post_processor", json()), by_content, &m.before, &m.after));
  for (int32_t id : m.before) max_id = std::max(max_id, id);
  for (int32_t id : m.after) max_id = std::max(max_id, id);

  t->vocab_size_ = max_id + 1;
  t->bos_id_ = m.before.empty() ? -1 : m.before.front();
  t->eos_id_ = m.after.empty() ? -1 : m.after.back();
  t->unk_id_ = UnkId(m, by_content, t->eos_id_);
  t->pad_id_ = PadId(doc, by_content, t->unk_id_, t->vocab_size_);
  t->model_bytes_ = std::move(json_bytes);
  return t;
}

Result<std::vector<int32_t>> TokenizerJson::EncodePieces(std::string_view caption) const {
  const Impl& m = *impl_;
  std::vector<const AddedToken*> raw;
  for (const AddedToken& tok : m.added) {
    if (!tok.normalized) raw.push_back(&tok);
  }
  std::vector<int32_t> ids;
  for (const auto& [t, b, e] : FindAdded(caption, raw)) {
    if (t >= 0) {
      ids.push_back(raw[t]->id);
    } else {
      MM_RETURN_NOT_OK(m.Text(caption.substr(b, e - b), false, &ids));
    }
  }
  return ids;
}

Result<TokenizedCaption> TokenizerJson::Encode(std::string_view caption, int max_tokens) const {
  MM_ASSIGN_OR_RETURN(std::vector<int32_t> pieces, EncodePieces(caption));
  return AssembleCaption(impl_->before, std::move(pieces), impl_->after, max_tokens,
                         impl_->model_unk.value_or(-1));
}

}  // namespace mm::pack

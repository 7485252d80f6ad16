#include "common/trace/testing/trace_json.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace trace {
namespace testing {
namespace {

struct Value {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  double number = 0;
  std::string text;
  std::vector<Value> items;
  std::vector<std::pair<std::string, Value>> members;
  const Value* Get(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(absl::string_view s) : s_(s) {}

  absl::StatusOr<Value> Document() {
    Value v;
    if (!ParseValue(&v, 0)) return Error();
    Space();
    if (i_ != s_.size()) return Fail("trailing characters after the document"), Error();
    return v;
  }

 private:
  absl::Status Error() const {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at byte ", i_, ": ", error_));
  }
  bool Fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) {
      ++i_;
    }
  }
  bool Literal(absl::string_view word) {
    if (s_.substr(i_, word.size()) != word) return Fail("unknown literal");
    i_ += word.size();
    return true;
  }
  bool ParseString(std::string* out) {
    if (s_[i_] != '"') return Fail("expected a string");
    for (++i_; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in a string");
      if (c == '\\') {
        if (++i_ >= s_.size()) break;
        const char e = s_[i_];
        if (e == 'u') {
          if (i_ + 4 >= s_.size()) break;
          out->push_back(static_cast<char>(std::strtol(std::string(s_.substr(i_ + 1, 4)).c_str(),
                                                       nullptr, 16)));
          i_ += 4;
        } else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) {
          out->push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        } else {
          return Fail("bad escape");
        }
      } else {
        out->push_back(c);
      }
    }
    return Fail("unterminated string");
  }
  bool ParseNumber(double* out) {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) {
      return Fail("bad number");
    }
    while (i_ < s_.size() && std::string("0123456789.eE+-").find(s_[i_]) != std::string::npos) {
      ++i_;
    }
    const std::string n(s_.substr(start, i_ - start));
    char* end = nullptr;
    *out = std::strtod(n.c_str(), &end);
    if (end != n.c_str() + n.size()) return Fail("bad number");
    return true;
  }
  bool ParseValue(Value* v, int depth) {
    if (depth > 64) return Fail("nested too deep");
    Space();
    if (i_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v->kind = Value::kString;
      return ParseString(&v->text);
    }
    if (c == 't' || c == 'f') {
      v->kind = Value::kBool;
      v->number = c == 't';
      return Literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') return Literal("null");
    v->kind = Value::kNumber;
    return ParseNumber(&v->number);
  }
  bool ParseArray(Value* v, int depth) {
    v->kind = Value::kArray;
    ++i_;
    Space();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    for (;;) {
      v->items.emplace_back();
      if (!ParseValue(&v->items.back(), depth + 1)) return false;
      Space();
      if (i_ >= s_.size()) return Fail("unterminated array");
      if (s_[i_] == ']') return ++i_, true;
      if (s_[i_++] != ',') return Fail("expected , or ] in an array");
    }
  }
  bool ParseObject(Value* v, int depth) {
    v->kind = Value::kObject;
    ++i_;
    Space();
    if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
    for (;;) {
      Space();
      std::string key;
      if (i_ >= s_.size() || !ParseString(&key)) return Fail("expected a key");
      Space();
      if (i_ >= s_.size() || s_[i_++] != ':') return Fail("expected :");
      v->members.emplace_back(std::move(key), Value());
      if (!ParseValue(&v->members.back().second, depth + 1)) return false;
      Space();
      if (i_ >= s_.size()) return Fail("unterminated object");
      if (s_[i_] == '}') return ++i_, true;
      if (s_[i_++] != ',') return Fail("expected , or } in an object");
    }
  }

  absl::string_view s_;
  size_t i_ = 0;
  std::string error_;
};

absl::StatusOr<TraceEvent> ToEvent(const Value& v, size_t n) {
  const std::string where = absl::StrCat("event ", n, ": ");
  if (v.kind != Value::kObject) return absl::InvalidArgumentError(where + "not an object");
  TraceEvent e;
  for (const char* key : {"ph", "ts", "pid", "tid"}) {
    const Value* f = v.Get(key);
    const bool want_string = std::string(key) == "ph";
    if (f == nullptr || f->kind != (want_string ? Value::kString : Value::kNumber)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "no ", key));
    }
  }
  e.ph = v.Get("ph")->text;
  e.ts = v.Get("ts")->number;
  e.pid = static_cast<int64_t>(v.Get("pid")->number);
  e.tid = static_cast<int64_t>(v.Get("tid")->number);
  if (const Value* f = v.Get("name"); f != nullptr) e.name = f->text;
  if (const Value* f = v.Get("cat"); f != nullptr) e.cat = f->text;
  if (e.ph == "X") {
    const Value* d = v.Get("dur");
    if (d == nullptr || d->kind != Value::kNumber || d->number < 0) {
      return absl::InvalidArgumentError(where + "an X event without a dur >= 0");
    }
    e.dur = d->number;
  }
  if (const Value* a = v.Get("args"); a != nullptr && a->kind == Value::kObject) {
    for (const auto& [k, x] : a->members) {
      if (x.kind == Value::kNumber) e.num_args[k] = x.number;
      if (x.kind == Value::kString) e.str_args[k] = x.text;
    }
  }
  return e;
}

}  // namespace

absl::StatusOr<std::vector<TraceEvent>> ParseTrace(absl::string_view json) {
  Parser p(json);
  absl::StatusOr<Value> doc = p.Document();
  if (!doc.ok()) return doc.status();
  const Value* events = doc->Get("traceEvents");
  if (doc->kind != Value::kObject || events == nullptr || events->kind != Value::kArray) {
    return absl::InvalidArgumentError("no traceEvents array in a top-level object");
  }
  std::vector<TraceEvent> out;
  for (size_t n = 0; n < events->items.size(); ++n) {
    absl::StatusOr<TraceEvent> e = ToEvent(events->items[n], n);
    if (!e.ok()) return e.status();
    out.push_back(std::move(*e));
  }
  return out;
}

absl::Status CheckNesting(const std::vector<TraceEvent>& events) {
  constexpr double kSlack = 0.0015;  // µs: the files carry ns exactly
  std::map<std::pair<int64_t, int64_t>, std::vector<const TraceEvent*>> by_thread;
  for (const TraceEvent& e : events) {
    if (e.ph == "X") by_thread[{e.pid, e.tid}].push_back(&e);
  }
  for (auto& [key, spans] : by_thread) {
    // Parents first: earlier start, and the longer of two that start together.
    std::sort(spans.begin(), spans.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    std::vector<const TraceEvent*> open;
    for (const TraceEvent* s : spans) {
      while (!open.empty() && open.back()->ts + open.back()->dur <= s->ts + kSlack) open.pop_back();
      if (!open.empty() && s->ts + s->dur > open.back()->ts + open.back()->dur + kSlack) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pid ", key.first, " tid ", key.second, ": span ", s->name, " at ", s->ts,
            " overlaps ", open.back()->name, " at ", open.back()->ts, " without nesting in it"));
      }
      open.push_back(s);
    }
  }
  return absl::OkStatus();
}

}  // namespace testing
}  // namespace trace
}  // namespace tandem

// relay's in-process whisper.cpp binding, compiled for the host CPU by `npm run setup`.
//
// It exposes the same JavaScript surface as the prebuilt `@fugood/whisper.node` addon (the fallback,
// see src/engines/whisper-cpp/binding.ts), plus what live streaming needs and that addon lacks:
// - `audioCtx`: the encoder runs over the audio's own length instead of whisper's fixed 30 s window;
// - `maxTokens`: a bound on the tokens of each decoding pass (whisper.cpp's `max_tokens`);
// - `candidates`: language identification restricted to a set of languages (session hints, the pair
//   of a two-way session), always over the same window, whatever other decodes did;
// - `stop()` that really interrupts a decode (whisper.cpp's abort callback).
// Written by hand because no maintained binding offers these; it is only glue around whisper.h.
#include <napi.h>

#include <atomic>
#include <functional>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "whisper.h"

namespace {

// ---------------------------------------------------------------------------------------------- log

struct LogLine {
  std::string level;
  std::string text;
};

std::mutex logMutex;
Napi::ThreadSafeFunction logFunction;
bool logEnabled = false;

const char* levelName(ggml_log_level level) {
  switch (level) {
    case GGML_LOG_LEVEL_ERROR: return "error";
    case GGML_LOG_LEVEL_WARN: return "warn";
    case GGML_LOG_LEVEL_INFO: return "info";
    default: return "debug";
  }
}

// Called by whisper.cpp and ggml from any thread.
void forwardLog(ggml_log_level level, const char* text, void*) {
  std::lock_guard<std::mutex> lock(logMutex);
  if (!logEnabled || text == nullptr) return;
  auto* line = new LogLine{levelName(level), text};
  napi_status status = logFunction.NonBlockingCall(line, [](Napi::Env env, Napi::Function callback, LogLine* data) {
    callback.Call({Napi::String::New(env, data->level), Napi::String::New(env, data->text)});
    delete data;
  });
  if (status != napi_ok) delete line;
}

// Swallows log lines while no listener is set, as the prebuilt addon's stderr default would not suit a
// service (its logger is the place for them); listeners see everything while enabled.
void dropLog(ggml_log_level, const char*, void*) {}

// ------------------------------------------------------------------------------------------ decodes

struct Options {
  std::string language = "en";
  std::vector<std::string> candidates;
  int threads = 1;
  bool tokenTimestamps = false;
  int maxLen = 0;
  float temperatureInc = 0.2f;
  std::string prompt;
  int audioCtx = 0;
  int maxTokens = 0;
};

struct Segment {
  std::string text;
  int64_t t0;
  int64_t t1;
};

// Identification runs on a state of its own whose encoder window is fixed once (whisper.cpp sizes
// a state's window from the last whisper_full on it, so on the decoding state identification would
// depend on whichever decode ran before): the first 10 s of the utterance, which is enough to tell
// languages apart and a third of whisper's 30 s window.
constexpr int kIdentifyFrames = 500;

struct Decoding {
  whisper_context* context;
  whisper_state* identifier;
  std::vector<float> audio;
  Options options;
  std::atomic<bool> aborted{false};
};

class TranscribeWorker : public Napi::AsyncWorker {
 public:
  TranscribeWorker(Napi::Env env, std::shared_ptr<Decoding> decoding, Napi::Object owner,
                   std::function<void()> done)
      : Napi::AsyncWorker(env), decoding_(std::move(decoding)), deferred_(Napi::Promise::Deferred::New(env)),
        done_(std::move(done)) {
    owner_ = Napi::Persistent(owner);
  }

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    Decoding& d = *decoding_;
    const Options& o = d.options;
    whisper_full_params params = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    params.n_threads = o.threads;
    params.print_progress = false;
    params.print_realtime = false;
    params.print_special = false;
    params.print_timestamps = false;
    params.no_context = true;
    params.token_timestamps = o.tokenTimestamps;
    params.max_len = o.maxLen;
    params.split_on_word = o.maxLen > 0;
    params.temperature_inc = o.temperatureInc;
    params.audio_ctx = o.audioCtx;
    params.max_tokens = o.maxTokens;
    params.initial_prompt = o.prompt.empty() ? nullptr : o.prompt.c_str();
    params.abort_callback = [](void* flag) { return static_cast<std::atomic<bool>*>(flag)->load(); };
    params.abort_callback_user_data = &d.aborted;

    std::string language = o.language;
    if (language == "auto") {
      if (!identify(language)) return;
    }
    params.language = language.c_str();
    if (d.aborted.load()) {
      aborted_ = true;
      return;
    }
    const int status = whisper_full(d.context, params, d.audio.data(), static_cast<int>(d.audio.size()));
    // Interrupted by `stop()`; a stop that came after the decode had finished leaves its result.
    if (status != 0 && d.aborted.load()) {
      aborted_ = true;
      return;
    }
    if (status != 0) {
      SetError("whisper_full failed with status " + std::to_string(status));
      return;
    }
    const int n = whisper_full_n_segments(d.context);
    for (int i = 0; i < n; i++) {
      const char* text = whisper_full_get_segment_text(d.context, i);
      segments_.push_back({text ? text : "", whisper_full_get_segment_t0(d.context, i) * 10,
                           whisper_full_get_segment_t1(d.context, i) * 10});
      result_ += segments_.back().text;
    }
    const int id = whisper_full_lang_id(d.context);
    language_ = id >= 0 ? whisper_lang_str(id) : language;
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::Object result = Napi::Object::New(env);
    result.Set("result", Napi::String::New(env, result_));
    result.Set("isAborted", Napi::Boolean::New(env, aborted_));
    Napi::Array segments = Napi::Array::New(env, segments_.size());
    for (size_t i = 0; i < segments_.size(); i++) {
      Napi::Object segment = Napi::Object::New(env);
      segment.Set("text", Napi::String::New(env, segments_[i].text));
      segment.Set("t0", Napi::Number::New(env, static_cast<double>(segments_[i].t0)));
      segment.Set("t1", Napi::Number::New(env, static_cast<double>(segments_[i].t1)));
      segments[i] = segment;
    }
    result.Set("segments", segments);
    if (!aborted_ && !language_.empty()) result.Set("language", Napi::String::New(env, language_));
    finish();
    deferred_.Resolve(result);
  }

  void OnError(const Napi::Error& error) override {
    finish();
    deferred_.Reject(error.Value());
  }

 private:
  // Picks the most probable language among the candidates (all languages when none are given) from
  // whisper's language-token probabilities over the utterance's first 10 s.
  bool identify(std::string& language) {
    Decoding& d = *decoding_;
    const Options& o = d.options;
    const int samples = static_cast<int>(d.audio.size());
    if (whisper_pcm_to_mel_with_state(d.context, d.identifier, d.audio.data(), samples, o.threads) != 0) {
      SetError("whisper_pcm_to_mel failed");
      return false;
    }
    std::vector<float> probabilities(whisper_lang_max_id() + 1, 0.0f);
    if (whisper_lang_auto_detect_with_state(d.context, d.identifier, 0, o.threads, probabilities.data()) < 0) {
      SetError("whisper_lang_auto_detect failed");
      return false;
    }
    int best = -1;
    for (int id = 0; id <= whisper_lang_max_id(); id++) {
      const char* code = whisper_lang_str(id);
      bool allowed = o.candidates.empty();
      for (const std::string& candidate : o.candidates) allowed = allowed || candidate == code;
      if (allowed && (best < 0 || probabilities[id] > probabilities[best])) best = id;
    }
    if (best < 0) {
      SetError("none of the candidate languages is known to whisper.cpp");
      return false;
    }
    language = whisper_lang_str(best);
    return true;
  }

  void finish() {
    done_();
    owner_.Reset();
  }

  std::shared_ptr<Decoding> decoding_;
  Napi::Promise::Deferred deferred_;
  std::function<void()> done_;
  Napi::ObjectReference owner_;
  std::string result_;
  std::string language_;
  std::vector<Segment> segments_;
  bool aborted_ = false;
};

// ------------------------------------------------------------------------------------------ context

class WhisperContext : public Napi::ObjectWrap<WhisperContext> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "WhisperContext",
                       {InstanceMethod("transcribeData", &WhisperContext::TranscribeData),
                        InstanceMethod("release", &WhisperContext::Release),
                        StaticMethod("toggleNativeLog", &WhisperContext::ToggleNativeLog)});
  }

  explicit WhisperContext(const Napi::CallbackInfo& info) : Napi::ObjectWrap<WhisperContext>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "options object expected");
    Napi::Value file = info[0].As<Napi::Object>().Get("filePath");
    if (!file.IsString()) throw Napi::TypeError::New(env, "filePath must be a string");
    whisper_context_params params = whisper_context_default_params();
    params.use_gpu = false;
    params.flash_attn = false;
    context_ = whisper_init_from_file_with_params(file.As<Napi::String>().Utf8Value().c_str(), params);
    if (context_ == nullptr) throw Napi::Error::New(env, "failed to load model");
    identifier_ = whisper_init_state(context_);
    if (identifier_ == nullptr) {
      free();
      throw Napi::Error::New(env, "failed to allocate the identification state");
    }
    // Fixes the identification state's encoder window (see kIdentifyFrames): one decode of 1 s of
    // silence with that window, at most one token.
    whisper_full_params prime = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    prime.print_progress = false;
    prime.audio_ctx = kIdentifyFrames;
    prime.max_tokens = 1;
    prime.no_timestamps = true;
    prime.language = "en";
    std::vector<float> silence(16000, 0.0f);
    if (whisper_full_with_state(context_, identifier_, prime, silence.data(), static_cast<int>(silence.size())) != 0) {
      free();
      throw Napi::Error::New(env, "failed to prepare the identification state");
    }
  }

  // Only at environment teardown can this run during a decode (the decode holds a reference to the
  // object): the decode is stopped and the model left to the process's end rather than freed under it.
  ~WhisperContext() override {
    if (busy_) {
      current_->aborted.store(true);
      return;
    }
    free();
  }

 private:
  static Napi::Value ToggleNativeLog(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const bool enable = info.Length() > 0 && info[0].ToBoolean().Value();
    std::lock_guard<std::mutex> lock(logMutex);
    if (logEnabled) {
      logFunction.Release();
      logEnabled = false;
    }
    if (enable && info.Length() > 1 && info[1].IsFunction()) {
      logFunction = Napi::ThreadSafeFunction::New(env, info[1].As<Napi::Function>(), "whisper.cpp log", 0, 1);
      logEnabled = true;
      whisper_log_set(forwardLog, nullptr);
    } else {
      whisper_log_set(dropLog, nullptr);
    }
    return env.Undefined();
  }

  Napi::Value TranscribeData(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (context_ == nullptr) throw Napi::Error::New(env, "the context was released");
    if (busy_) throw Napi::Error::New(env, "a decode is already running on this context");
    if (info.Length() < 2 || !info[0].IsArrayBuffer() || !info[1].IsObject()) {
      throw Napi::TypeError::New(env, "transcribeData(ArrayBuffer of PCM16, options) expected");
    }
    auto decoding = std::make_shared<Decoding>();
    decoding->context = context_;
    decoding->identifier = identifier_;
    Napi::ArrayBuffer buffer = info[0].As<Napi::ArrayBuffer>();
    const auto* pcm = static_cast<const int16_t*>(buffer.Data());
    const size_t samples = buffer.ByteLength() / sizeof(int16_t);
    decoding->audio.resize(samples);
    for (size_t i = 0; i < samples; i++) decoding->audio[i] = static_cast<float>(pcm[i]) / 32768.0f;
    decoding->options = readOptions(info[1].As<Napi::Object>());

    busy_ = true;
    current_ = decoding;
    auto* worker = new TranscribeWorker(env, decoding, Value(), [this]() {
      busy_ = false;
      current_.reset();
      if (releaseRequested_) free();
    });
    Napi::Promise promise = worker->Promise();
    worker->Queue();

    Napi::Object transcription = Napi::Object::New(env);
    transcription.Set("promise", promise);
    transcription.Set("stop", Napi::Function::New(env, [decoding](const Napi::CallbackInfo& call) {
                        decoding->aborted.store(true);
                        auto deferred = Napi::Promise::Deferred::New(call.Env());
                        deferred.Resolve(call.Env().Undefined());
                        return deferred.Promise();
                      }));
    return transcription;
  }

  // Frees the model now, or when the running decode ends.
  Napi::Value Release(const Napi::CallbackInfo& info) {
    if (busy_) {
      releaseRequested_ = true;
    } else {
      free();
    }
    auto deferred = Napi::Promise::Deferred::New(info.Env());
    deferred.Resolve(info.Env().Undefined());
    return deferred.Promise();
  }

  static Options readOptions(const Napi::Object& object) {
    Options options;
    auto string = [&](const char* key, std::string& out) {
      Napi::Value value = object.Get(key);
      if (value.IsString()) out = value.As<Napi::String>().Utf8Value();
    };
    auto integer = [&](const char* key, int& out) {
      Napi::Value value = object.Get(key);
      if (value.IsNumber()) out = value.As<Napi::Number>().Int32Value();
    };
    string("language", options.language);
    string("prompt", options.prompt);
    integer("maxThreads", options.threads);
    integer("maxLen", options.maxLen);
    integer("audioCtx", options.audioCtx);
    integer("maxTokens", options.maxTokens);
    Napi::Value timestamps = object.Get("tokenTimestamps");
    if (timestamps.IsBoolean()) options.tokenTimestamps = timestamps.As<Napi::Boolean>().Value();
    Napi::Value temperatureInc = object.Get("temperatureInc");
    if (temperatureInc.IsNumber()) options.temperatureInc = temperatureInc.As<Napi::Number>().FloatValue();
    Napi::Value candidates = object.Get("candidates");
    if (candidates.IsArray()) {
      Napi::Array list = candidates.As<Napi::Array>();
      for (uint32_t i = 0; i < list.Length(); i++) {
        Napi::Value item = list.Get(i);
        if (item.IsString()) options.candidates.push_back(item.As<Napi::String>().Utf8Value());
      }
    }
    if (options.threads < 1) options.threads = 1;
    return options;
  }

  void free() {
    if (identifier_ != nullptr) whisper_free_state(identifier_);
    identifier_ = nullptr;
    if (context_ != nullptr) whisper_free(context_);
    context_ = nullptr;
  }

  whisper_context* context_ = nullptr;
  whisper_state* identifier_ = nullptr;
  std::shared_ptr<Decoding> current_;
  bool busy_ = false;
  bool releaseRequested_ = false;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  whisper_log_set(dropLog, nullptr);
  exports.Set("WhisperContext", WhisperContext::Define(env));
  exports.Set("systemInfo", Napi::String::New(env, whisper_print_system_info()));
  exports.Set("version", Napi::String::New(env, whisper_version()));
  return exports;
}

}  // namespace

NODE_API_MODULE(relay_whisper, Init)

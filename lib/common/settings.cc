#include "lib/common/settings.h"

#include "lib/common/strings.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace collx {

static const SettingInfo kSettings[] = {
#define COLLX_SETTING_INFO_(id, type, def, meaning) \
  {SettingId::id, "COLLX_" #id, SettingType::type, def, meaning},
    COLLX_SETTINGS(COLLX_SETTING_INFO_)
#undef COLLX_SETTING_INFO_
};

static_assert(sizeof(kSettings) / sizeof(kSettings[0]) == static_cast<size_t>(SettingId::kCount),
              "every setting has one entry");

const SettingInfo& setting_info(SettingId id) { return kSettings[static_cast<size_t>(id)]; }

const char* setting_type_name(SettingType type) {
  switch (type) {
    case SettingType::kInt: return "integer";
    case SettingType::kSize: return "size";
    case SettingType::kBool: return "boolean";
    case SettingType::kSecret: return "secret string";
    case SettingType::kString: break;
  }
  return "string";
}

const SettingInfo* all_settings(size_t* count) {
  *count = sizeof(kSettings) / sizeof(kSettings[0]);
  return kSettings;
}

bool setting_is_set(SettingId id) { return std::getenv(setting_info(id).name) != nullptr; }

std::string setting_raw(SettingId id) {
  const char* value = std::getenv(setting_info(id).name);
  return value ? std::string(value) : std::string(setting_info(id).default_value);
}

bool parse_size(const std::string& raw, uint64_t* out, bool allow_inf) {
  std::string text = trim(raw);
  if (text.empty()) return false;
  if (allow_inf && (text == "inf" || text == "INF" || text == "max")) {
    *out = UINT64_MAX;
    return true;
  }
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return false;
  uint64_t scale = 1;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': scale = 1ull << 10; break;
      case 'M': scale = 1ull << 20; break;
      case 'G': scale = 1ull << 30; break;
      case 'T': scale = 1ull << 40; break;
      default: return false;
    }
    ++i;
    if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;  // "64KB"
    if (i < text.size() && (text[i] == 'i')) return false;
  }
  if (i != text.size()) return false;
  if (value > UINT64_MAX / scale) return false;
  *out = value * scale;
  return true;
}

static Status malformed(SettingId id, const std::string& value, const char* expected) {
  return make_status(COLLX_ERR_INVALID_ARG, "%s='%s' is not %s", setting_info(id).name,
                     value.c_str(), expected);
}

Status setting_int(SettingId id, int64_t* out, bool* found) {
  std::string value = trim(setting_raw(id));
  if (found) *found = !value.empty();
  if (value.empty()) return Status::Ok();
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (errno != 0 || end == value.c_str() || *end != '\0') return malformed(id, value, "an integer");
  *out = parsed;
  return Status::Ok();
}

Status setting_size(SettingId id, uint64_t* out, bool* found) {
  std::string value = trim(setting_raw(id));
  if (found) *found = !value.empty();
  if (value.empty()) return Status::Ok();
  if (!parse_size(value, out)) return malformed(id, value, "a size (bytes, with optional K/M/G)");
  return Status::Ok();
}

Status setting_bool(SettingId id, bool* out, bool* found) {
  std::string value = trim(setting_raw(id));
  if (found) *found = !value.empty();
  if (value.empty()) return Status::Ok();
  for (auto& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "1" || value == "true" || value == "yes" || value == "on") {
    *out = true;
  } else if (value == "0" || value == "false" || value == "no" || value == "off") {
    *out = false;
  } else {
    return malformed(id, value, "a boolean (0/1)");
  }
  return Status::Ok();
}

}  // namespace collx

namespace collx {

std::string settings_markdown() {
  std::string out =
      "# Environment reference\n\n"
      "Generated from the settings registry (`lib/common/settings.h`); do not edit by hand.\n"
      "Regenerate with `build/tools/collx-info --settings-markdown > docs/environment.md`.\n\n"
      "| variable | type | default | meaning |\n| --- | --- | --- | --- |\n";
  size_t count = 0;
  const SettingInfo* all = all_settings(&count);
  for (size_t i = 0; i < count; ++i) {
    const char* type = setting_type_name(all[i].type);
    std::string def = *all[i].default_value ? std::string("`") + all[i].default_value + "`" : "(unset)";
    out += std::string("| `") + all[i].name + "` | " + type + " | " + def + " | " + all[i].meaning + " |\n";
  }
  return out;
}

}  // namespace collx

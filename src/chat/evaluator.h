#pragma once
// Renders a parsed chat template as jinja2 (with Hugging Face's environment) would: Python
// semantics for values, truthiness, str(), comparison and arithmetic; undefined values print as
// "" and iterate as empty, but their attributes, items and arithmetic are errors. Filters: trim,
// upper, lower, capitalize, title, length/count, tojson(indent), default/d, join, list, first,
// last, string, int, float, replace, items, safe, select/reject, selectattr/rejectattr, map.
// Tests: defined, undefined, none, string, number, integer, float, boolean, true, false, mapping,
// iterable, sequence, odd, even, divisibleby, eq/equalto/==, ne/!=, lt/le/gt/ge, in, lower,
// upper. Functions: raise_exception(msg), namespace(...), range(...). Methods: str.strip/
// lstrip/rstrip/upper/lower/title/capitalize/startswith/endswith/split/replace, dict.items/
// keys/values/get. Anything else is a TemplateError naming the construct and its position.
#include <string>

#include "chat/parser.h"
#include "chat/value.h"

namespace tpbatch::chat {

// `globals` holds the template's variables (messages, add_generation_prompt, bos_token, ...).
std::string render(const Template& tmpl, const Dict& globals);

}  // namespace tpbatch::chat
